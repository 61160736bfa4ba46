-- A list's `after` (services/mail/emails.ts) is "mail stored after that email", and an agent that
-- lists oldest first after the last email it saw must miss none. `received_at` cannot promise that:
-- it is when SMTP took the message, and ingests store mail out of that order (two at once, a backlog
-- drained), so a cursor read past an email that committed a moment later skipped it for good.
--
-- So each account numbers the mail it stores (`email_order`), in the statement that stores it
-- (services/mail/store.ts): taking numbers locks the account's row until the store commits, so a
-- store that takes later numbers commits later, and a list that read up to a number has seen every
-- email below it for good. `after` reads in (stored_seq, received_at, id) order. Mail stored before
-- this migration is 0: before everything stored since, in its received order.
CREATE TABLE email_order (
  user_id text PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
  last    bigint NOT NULL
);
ALTER TABLE emails ADD COLUMN stored_seq bigint NOT NULL DEFAULT 0;
CREATE INDEX emails_user_stored_idx ON emails (user_id, stored_seq, received_at, id);

-- A deleted email still marks its place (0066), in the same order; unknown (NULL) for those deleted before.
ALTER TABLE deleted_emails ADD COLUMN stored_seq bigint;
