-- A mailbox's sent mail, in arrival order: the API's list with `direction=outbound` (the dashboard's sent
-- mail), IMAP's Sent folder and the mail IMAP shows answered (services/imap/views.ts `repliesIn`) read it at
-- every look. Without it PostgreSQL scanned every email of every mailbox for them: on a database of 400,000
-- emails, a mailbox's 10,000 sent ones took 160 ms to list and 180 ms to number for IMAP (11 and 16 ms with it).
-- Partial: received mail, most of it, is not in it.
CREATE INDEX emails_outbound_idx ON emails (mailbox_id, received_at, id) WHERE direction = 'outbound';
