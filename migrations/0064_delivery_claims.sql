-- Which attempt holds a delivery now: a sent message's recipient, a forwarded copy's address. The bus
-- may hand one job out twice at once (redelivered while its first copy still runs), and each copy
-- would send the message: an attempt claims the rows it tries (`claim`, until `claimed_until`, renewed
-- while it runs); a copy that finds them held goes back to the bus until the claim ends, and then finds
-- them settled (outbound/claims.ts). A claim ends with the attempt's record, when the attempt fails, or
-- within 30 seconds of its process dying.
ALTER TABLE outbound_deliveries ADD COLUMN claim text;
ALTER TABLE outbound_deliveries ADD COLUMN claimed_until timestamptz;
ALTER TABLE forward_deliveries ADD COLUMN claim text;
ALTER TABLE forward_deliveries ADD COLUMN claimed_until timestamptz;
