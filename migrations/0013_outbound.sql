-- Outbound mail (issue 16): sent messages are emails of the sending mailbox, with one delivery row
-- per recipient; the account's suppressed addresses; Idempotency-Key answers; send counters; the
-- DKIM keys outbound mail is signed with.

-- Every email says which way it went. Mail stored before outbound existed was received.
ALTER TABLE emails ADD COLUMN direction text NOT NULL DEFAULT 'inbound'
  CHECK (direction IN ('inbound', 'outbound'));

-- One row per recipient of a sent email: its fate, as the mta last saw it. `domain` groups the
-- recipients one SMTP transaction serves.
CREATE TABLE outbound_deliveries (
  email_id        text NOT NULL REFERENCES emails (id) ON DELETE CASCADE,
  recipient       text NOT NULL,
  domain          text NOT NULL,
  status          text NOT NULL DEFAULT 'queued'
    CHECK (status IN ('queued', 'sent', 'deferred', 'bounced', 'failed', 'suppressed')),
  attempts        integer NOT NULL DEFAULT 0,
  last_response   text,
  next_attempt_at timestamptz,
  updated_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (email_id, recipient)
);

-- Addresses an account no longer sends to: they bounced permanently.
CREATE TABLE suppressions (
  user_id       text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  address       text NOT NULL CHECK (address = lower(address)),
  reason        text NOT NULL CHECK (reason IN ('bounced')),
  last_response text,
  email_id      text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, address)
);

-- A send's Idempotency-Key: the same key and body within 24 hours answers `response` again.
CREATE TABLE idempotency_keys (
  user_id        text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  key            text NOT NULL,
  request_sha256 text NOT NULL,
  response       jsonb NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, key)
);
CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);

-- Messages sent per account and UTC day, and per billing period.
ALTER TABLE mail_daily_counters ADD COLUMN sent bigint NOT NULL DEFAULT 0;
ALTER TABLE usage_counters ADD COLUMN emails_sent bigint NOT NULL DEFAULT 0;

-- DKIM signing keys (PEM, PKCS#8). `owner` is `shared` for the operator's key that signs the shared
-- domains (unless DKIM_PRIVATE_KEY is set), or a custom domain's id. Kept in the database so every
-- node of a cluster signs with the key its DNS record publishes.
CREATE TABLE dkim_keys (
  owner       text PRIMARY KEY,
  selector    text NOT NULL,
  private_key text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);

-- What verification found of a custom domain's sending records: its DKIM key and an SPF record.
ALTER TABLE domains ADD COLUMN dkim_configured boolean NOT NULL DEFAULT false;
ALTER TABLE domains ADD COLUMN spf_configured boolean NOT NULL DEFAULT false;

-- Drafts: a message an agent prepared and a person (or the agent) sends later, at once or at
-- `send_at`. `content` holds the send request's fields; a draft may answer (`in_reply_to`, with
-- `reply_all`) or forward (`forward_of`) an email. Sending makes it `sent` with the email it became.
CREATE TABLE drafts (
  id          text PRIMARY KEY,
  user_id     text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  mailbox_id  text NOT NULL REFERENCES mailboxes (id) ON DELETE CASCADE,
  content     jsonb NOT NULL,
  in_reply_to text REFERENCES emails (id) ON DELETE SET NULL,
  reply_all   boolean NOT NULL DEFAULT false,
  forward_of  text REFERENCES emails (id) ON DELETE SET NULL,
  send_at     timestamptz,
  status      text NOT NULL DEFAULT 'draft' CHECK (status IN ('draft', 'sending', 'sent')),
  email_id    text,
  -- Why a scheduled send was refused (the draft is kept, unscheduled, for a person to fix).
  last_error  text,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  CHECK (in_reply_to IS NULL OR forward_of IS NULL)
);
CREATE INDEX drafts_mailbox_idx ON drafts (mailbox_id, created_at DESC);
-- The scheduler's question: which drafts are due.
CREATE INDEX drafts_due_idx ON drafts (send_at) WHERE status <> 'sent' AND send_at IS NOT NULL;
