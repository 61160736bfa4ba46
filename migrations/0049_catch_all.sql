-- A custom domain's catch-all (domains/domains.ts, mail/inbound.ts): mail to an address of the domain
-- that no active mailbox has goes to this mailbox of the account instead of being refused.
ALTER TABLE domains ADD COLUMN catch_all_mailbox_id text REFERENCES mailboxes (id) ON DELETE SET NULL;
