-- Every mailbox's mail in one list (GET /v1/api/emails, services/mail/emails.ts `listAll`): an
-- account's emails newest first without reading each mailbox's apart. Building it covers the
-- emails already stored.
CREATE INDEX emails_user_received_idx ON emails (user_id, received_at DESC, id DESC);
