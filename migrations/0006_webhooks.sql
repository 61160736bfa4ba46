-- Webhooks (SPEC "Webhooks", "Events"): the endpoints an account has registered, and the log of
-- every delivery made to them.

CREATE TABLE webhooks (
  id         text PRIMARY KEY,
  user_id    text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  url        text NOT NULL,
  events     text[] NOT NULL CHECK (cardinality(events) > 0),
  -- Kept as given: every delivery is signed with it.
  secret     text NOT NULL,
  active     boolean NOT NULL DEFAULT true,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX webhooks_user_idx ON webhooks (user_id, created_at);

-- One row per endpoint and event: what the webhook actor has done about it. The unique key makes a
-- redelivered event find its earlier progress instead of starting over.
CREATE TABLE webhook_deliveries (
  id           text PRIMARY KEY,
  webhook_id   text NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
  -- The event's stable id, sent as the `webhook-id` header.
  event_id     text NOT NULL,
  event        text NOT NULL,
  status       text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed', 'canceled')),
  attempts     integer NOT NULL DEFAULT 0,
  created_at   timestamptz NOT NULL DEFAULT now(),
  completed_at timestamptz,
  UNIQUE (webhook_id, event_id)
);

CREATE INDEX webhook_deliveries_log_idx ON webhook_deliveries (webhook_id, created_at DESC);

-- Every attempt: the status the endpoint answered (none when it could not be reached), how long it
-- took, and what went wrong.
CREATE TABLE webhook_attempts (
  delivery_id  text NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
  attempt      integer NOT NULL CHECK (attempt >= 1),
  status_code  integer,
  duration_ms  integer NOT NULL,
  error        text,
  attempted_at timestamptz NOT NULL,
  PRIMARY KEY (delivery_id, attempt)
);
