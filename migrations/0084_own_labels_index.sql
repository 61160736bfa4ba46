-- The mail of a mailbox that carries a label of the account's own, not only system ones: IMAP's LIST names a
-- folder for each such label (services/imap/views.ts `folders`), and a mail program lists at every sync. Without
-- it PostgreSQL read every email of the mailbox and every label on it: on a mailbox of 100,000 emails, 290 ms a
-- LIST on the embedded database. Partial: most mail carries system labels alone. The system labels as
-- services/imap/folders.ts lists them, in its order: LIST writes the same condition, so that every plan uses it.
CREATE INDEX emails_own_labels_idx ON emails (mailbox_id)
  WHERE NOT (labels <@ ARRAY['inbound', 'sent', 'unread', 'spam', 'unauthenticated', 'blocked', 'flagged']::text[]);
