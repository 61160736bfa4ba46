-- The flags a mail program sets that no label holds (services/imap/views.ts): \Answered, \Deleted,
-- \Draft and its own keywords ($Forwarded, Thunderbird's tags), as STORE leaves them. They are the email's, in every folder that shows it (as \Seen and
-- \Flagged are, through its labels), and go when the email does. `mailbox_id` lets a folder's view read
-- its mailbox's flags in one plain read.
CREATE TABLE imap_flags (
  email_id   text PRIMARY KEY REFERENCES emails (id) ON DELETE CASCADE,
  mailbox_id text NOT NULL,
  flags      text[] NOT NULL
);
CREATE INDEX imap_flags_mailbox_idx ON imap_flags (mailbox_id);
