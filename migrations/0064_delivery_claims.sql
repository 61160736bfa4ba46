-- The attempt a delivery is claimed by: the bus may hand one job out twice at once (a redelivery while
-- the first copy still runs), and each copy would send the message. A copy claims the recipients it
-- attempts (`claim`, until `claimed_until`, renewed while the attempt runs); another finds them taken,
-- waits for the claim's end, and finds them settled. A claim ends with the attempt's record, when the
-- attempt fails, or 30 seconds after its process died.
ALTER TABLE outbound_deliveries ADD COLUMN claim text;
ALTER TABLE outbound_deliveries ADD COLUMN claimed_until timestamptz;
