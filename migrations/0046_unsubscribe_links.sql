-- One-click unsubscribe (RFC 8058): a message sent with `list_unsubscribe` names a link of its own in
-- List-Unsubscribe, and using it puts the address the message was sent to on the account's suppression
-- list (reason `unsubscribed`). Only the token's SHA-256 is kept. A link outlives its email (a deleted
-- sent email's recipient can still unsubscribe) and goes with its account, or after a year
-- (housekeeping).
CREATE TABLE unsubscribe_links (
  token_sha256 text PRIMARY KEY,
  user_id      text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  mailbox_id   text NOT NULL,
  email_id     text NOT NULL,
  message_id   text NOT NULL,
  address      text NOT NULL CHECK (address = lower(address)),
  created_at   timestamptz NOT NULL DEFAULT now(),
  used_at      timestamptz
);
CREATE INDEX unsubscribe_links_created_idx ON unsubscribe_links (created_at);
