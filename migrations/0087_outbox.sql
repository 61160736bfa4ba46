-- Publications a change owes the bus, written in the change's transaction (services/bus/outbox.ts):
-- the change's node publishes them once it commits and deletes them as the bus takes them; those it
-- could not (the bus refused, or the node died first) are published again by the worker role's sweep.
-- Used by label changes (email.labels_changed; held mail let through: its copies' jobs, email.received),
-- deletions (email.deleted), new API keys (api_key.created) and unsubscribes (email.unsubscribed).
-- `position` keeps the order they were staged in, which the sweep publishes them in.
CREATE TABLE outbox (
  msg_id       text PRIMARY KEY,
  position     bigint GENERATED ALWAYS AS IDENTITY,
  subject      text NOT NULL,
  data         bytea NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  attempted_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX outbox_attempted_at ON outbox (attempted_at);
