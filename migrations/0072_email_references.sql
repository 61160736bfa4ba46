-- The Message-IDs each email refers to (References, then In-Reply-To), for threading
-- (services/mail/threads.ts): a reply joins the thread of another email of its mailbox that answers
-- the same message (its sibling), when the message answered is not in the mailbox. NULL where it
-- refers to nothing, and for mail stored before this column (not read back from its headers: it
-- would rewrite every email).
ALTER TABLE emails ADD COLUMN referenced text[];
CREATE INDEX emails_referenced_idx ON emails USING gin (referenced) WHERE referenced IS NOT NULL;
