-- When a recipient reported a sent email as spam (a feedback report came back: outbound/bounces.ts).
-- The delivery keeps its status (the message was delivered); stats count complaints per day of sending.
ALTER TABLE outbound_deliveries ADD COLUMN complained_at timestamptz;
