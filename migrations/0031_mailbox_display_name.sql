-- The name a mailbox's sent mail carries in its From ("Support Agent <agent@example.com>"): NULL when it
-- has none, as every mailbox created before the column existed.
ALTER TABLE mailboxes ADD COLUMN display_name text;
