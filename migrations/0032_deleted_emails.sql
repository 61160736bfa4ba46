-- Emails deleted through the API (services/mail/deletion.ts), kept as long as the bus may still deliver
-- their inbound message again (housekeeping removes them after 8 days): a redelivered message of a
-- deleted email is not stored again.
CREATE TABLE deleted_emails (
  id         text PRIMARY KEY,
  deleted_at timestamptz NOT NULL DEFAULT now()
);

-- Deleting an email asks which unsent drafts answer it, and sets theirs to NULL (ON DELETE SET NULL):
-- both by these columns, which nothing indexed.
CREATE INDEX drafts_in_reply_to_idx ON drafts (in_reply_to) WHERE in_reply_to IS NOT NULL;
CREATE INDEX drafts_forward_of_idx ON drafts (forward_of) WHERE forward_of IS NOT NULL;
