-- IMAP's numbering of a mailbox's folders (services/imap/store.ts): each folder's UIDVALIDITY and next
-- UID, and the UID of each email in it. Written when a mail program looks at a folder, never as mail
-- is stored; a folder's row is locked while its new emails are numbered.
CREATE TABLE imap_folders (
  mailbox_id text NOT NULL REFERENCES mailboxes (id) ON DELETE CASCADE,
  -- "inbox", "sent", "junk" or "label:<label>" (services/imap/folders.ts folderKey).
  folder text NOT NULL,
  uid_validity bigint NOT NULL,
  uid_next bigint NOT NULL DEFAULT 1,
  PRIMARY KEY (mailbox_id, folder)
);

CREATE TABLE imap_messages (
  mailbox_id text NOT NULL,
  folder text NOT NULL,
  uid bigint NOT NULL,
  email_id text NOT NULL,
  PRIMARY KEY (mailbox_id, folder, uid),
  UNIQUE (mailbox_id, folder, email_id),
  FOREIGN KEY (mailbox_id, folder) REFERENCES imap_folders (mailbox_id, folder) ON DELETE CASCADE
);
