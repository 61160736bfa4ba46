-- The event log (issue 17): every event any node produced, kept 7 days, so an event stream
-- (`GET /v1/events`) resumes after a reconnection without loss, on whichever API node it lands.
--
-- Order. A reader must never skip a row that commits after it read a later one. `seq` alone cannot
-- promise that: two writers take 10 and 11, and 11 may commit first. So the log is read in
-- (txid, seq) order, and only up to the oldest transaction still running (`pg_snapshot_xmin`):
-- every transaction below it has ended, so no row can appear behind a position already read.
CREATE TABLE event_log (
  seq        bigserial PRIMARY KEY,
  txid       xid8 NOT NULL DEFAULT pg_current_xact_id(),
  event_id   text NOT NULL UNIQUE,
  user_id    text NOT NULL,
  kind       text NOT NULL,
  mailbox_id text,
  payload    text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX event_log_user_position_idx ON event_log (user_id, txid, seq);
CREATE INDEX event_log_created_at_idx ON event_log (created_at);

-- Open event streams, so that an account's cap holds across API nodes. A stream's row is refreshed
-- while it is open; a node that died leaves rows that stop counting once they are stale.
CREATE TABLE event_streams (
  id           text PRIMARY KEY,
  user_id      text NOT NULL,
  refreshed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX event_streams_user_idx ON event_streams (user_id, refreshed_at);
