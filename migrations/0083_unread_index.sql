-- A mailbox's unread mail, newest first: the API's `unread=true` (an agent's "what is new"), its thread list's
-- and the dashboard's Unread read it. Without it PostgreSQL read every email of the mailbox for the label (it is
-- not in the mailbox's index): on a mailbox of 100,000 emails, 20 of them unread, that list took 180 ms on the
-- embedded database and 58 ms on PostgreSQL 15. Partial: most mail has been read. The lists name the label as
-- written here (services/mail/narrowing.ts `unread`), so that every plan can use it.
CREATE INDEX emails_unread_idx ON emails (mailbox_id, received_at DESC, id DESC) WHERE 'unread' = ANY(labels);
