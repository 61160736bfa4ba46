-- Every mailbox's mail and drafts in one list (GET /v1/api/emails and /v1/api/drafts;
-- services/mail/emails.ts `listAll`, services/outbound/drafts.ts `listAll`): an account's newest
-- first without reading each mailbox's apart. The emails' index carries the mailbox, so the list's
-- count (which keeps to active mailboxes) reads the index alone. Building them covers the rows
-- already stored.
CREATE INDEX emails_user_received_idx ON emails (user_id, received_at DESC, id DESC) INCLUDE (mailbox_id);
CREATE INDEX drafts_user_created_idx ON drafts (user_id, created_at DESC, id DESC);
