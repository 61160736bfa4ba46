-- A deleted email still marks a place in its mailbox's mail (services/mail/emails.ts, `after`): an
-- agent that waits for mail after the last email it saw, and deleted that one meanwhile, carries on
-- after it rather than being refused. Rows deleted before this migration have no place (NULLs).
ALTER TABLE deleted_emails
  ADD COLUMN user_id text,
  ADD COLUMN mailbox_id text,
  ADD COLUMN received_at timestamptz;
