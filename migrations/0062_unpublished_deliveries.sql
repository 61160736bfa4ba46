-- A sent email's deliveries are stored before their job is handed to the bus. `published` says the
-- bus took it; a delivery left unpublished (its process died between the two, or the bus refused it
-- and the send could not be taken back) is published again by the mta role (outbound/requeue.ts),
-- so a send answered 202 is never left queued for ever. Rows stored before this were published.
ALTER TABLE outbound_deliveries ADD COLUMN published boolean NOT NULL DEFAULT true;
CREATE INDEX outbound_deliveries_unpublished ON outbound_deliveries (updated_at) WHERE NOT published;
