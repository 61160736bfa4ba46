-- The deliveries still waiting to go (queued, or deferred to be tried again), found without reading
-- the ones settled long ago: each process samples how many there are and how old the oldest queued
-- one is (services/outbound/backlog.ts: /readyz, mailroom_outbound_* metrics).
CREATE INDEX outbound_deliveries_waiting ON outbound_deliveries (status, updated_at) WHERE status IN ('queued', 'deferred');
