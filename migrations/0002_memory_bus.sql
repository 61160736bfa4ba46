-- The embedded bus (layers/memory-bus.ts): every published message is kept here until it ages out,
-- and each durable consumer's acknowledgements beside it, so a restart redelivers exactly what was
-- not acknowledged. Unused (and empty) when the bus is NATS.

CREATE TABLE bus_messages (
  seq          bigserial PRIMARY KEY,
  stream       text NOT NULL,
  subject      text NOT NULL,
  msg_id       text NOT NULL,
  data         bytea NOT NULL,
  published_at timestamptz NOT NULL DEFAULT now(),
  -- Publishing the same msg_id twice stores one message (NATS' Nats-Msg-Id de-duplication).
  UNIQUE (stream, msg_id)
);
-- Retention sweeps by age.
CREATE INDEX bus_messages_published_idx ON bus_messages (published_at);

CREATE TABLE bus_acks (
  consumer text NOT NULL,
  seq      bigint NOT NULL REFERENCES bus_messages (seq) ON DELETE CASCADE,
  acked_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (consumer, seq)
);
-- The cascade from a retention sweep looks acks up by message.
CREATE INDEX bus_acks_seq_idx ON bus_acks (seq);
