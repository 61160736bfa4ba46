-- Received mail: raw messages and attachment bytes (content-addressed), parsed emails, and the
-- per-day acceptance counter the SMTP node checks.

-- The same bytes are stored once, whoever they were sent to: raw MIME messages and attachment
-- contents alike, keyed by the lowercase hex SHA-256 of the bytes.
CREATE TABLE blobs (
  sha256     text PRIMARY KEY CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  size       bigint NOT NULL CHECK (size >= 0),
  content    bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Emails accepted per account and UTC day (the plan's "emails per day"). Counted when the SMTP node
-- accepts a message, so the limit holds under bursts; the monthly count is usage_counters.emails.
CREATE TABLE mail_daily_counters (
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  day     date NOT NULL,
  emails  bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (user_id, day)
);

-- One row per message and recipient mailbox. The id is chosen by the SMTP node before the message
-- goes on the bus, which makes ingesting a redelivered message a no-op.
CREATE TABLE emails (
  id              text PRIMARY KEY,
  mailbox_id      text NOT NULL REFERENCES mailboxes (id) ON DELETE CASCADE,
  user_id         text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  message_id      text NOT NULL,
  thread_id       text NOT NULL,
  subject         text NOT NULL,
  from_address    text NOT NULL,
  to_addresses    text[] NOT NULL,
  sent_at         timestamptz NOT NULL,
  received_at     timestamptz NOT NULL,
  mail_from       text NOT NULL,
  rcpt_to         text NOT NULL,
  headers         jsonb NOT NULL,
  text_body       text NOT NULL,
  html_body       text,
  has_attachments boolean NOT NULL,
  raw_sha256      text NOT NULL REFERENCES blobs (sha256),
  size            bigint NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX emails_mailbox_received_idx ON emails (mailbox_id, received_at DESC, id DESC);
CREATE INDEX emails_thread_idx ON emails (thread_id, received_at);
-- Threading looks up the messages a reply refers to.
CREATE INDEX emails_message_id_idx ON emails (mailbox_id, message_id);
CREATE INDEX emails_raw_idx ON emails (raw_sha256);

CREATE TABLE attachments (
  id           text PRIMARY KEY,
  email_id     text NOT NULL REFERENCES emails (id) ON DELETE CASCADE,
  position     integer NOT NULL,
  filename     text,
  content_type text NOT NULL,
  size         bigint NOT NULL,
  -- SHA-256 of the decoded bytes, lowercase hex; also the blob holding them.
  checksum     text NOT NULL REFERENCES blobs (sha256),
  content_id   text,
  UNIQUE (email_id, position)
);

CREATE INDEX attachments_checksum_idx ON attachments (checksum);
