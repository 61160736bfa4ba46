-- A delivery being sent again by hand holds a lease until this time (its one attempt takes 10 s at
-- most), so that two resends asked at once make one attempt, not two; a node that dies mid-resend
-- leaves a lease that simply runs out.
ALTER TABLE webhook_deliveries ADD COLUMN resending_until timestamptz;
