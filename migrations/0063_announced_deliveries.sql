-- Whether a delivery's latest change of status was told as an event (email.sent, email.bounced, …).
-- An attempt's outcome is written, then told: a teller that died in between, or a bus that refused
-- the event, left the change untold, and the job, which then comes back, tells it first
-- (outbound/mta.ts). Rows written before this were told.
ALTER TABLE outbound_deliveries ADD COLUMN announced boolean NOT NULL DEFAULT true;
