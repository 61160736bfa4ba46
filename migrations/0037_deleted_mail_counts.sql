-- What deleted emails counted towards the mail stats (services/mail/stats.ts), kept when they are
-- deleted (services/mail/deletion.ts) so that deleting mail does not rewrite the past: a bounced
-- message deleted still counts against the bounce rate. By mailbox and UTC day: `what` 'email' with
-- the direction as `key`, or 'recipient' with a delivery's status (a final one: mail with deliveries
-- queued or deferred cannot be deleted). Rows past the longest stats window are removed by housekeeping.
CREATE TABLE deleted_mail_counts (
  user_id    text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  mailbox_id text NOT NULL REFERENCES mailboxes (id) ON DELETE CASCADE,
  day        date NOT NULL,
  what       text NOT NULL CHECK (what IN ('email', 'recipient')),
  key        text NOT NULL,
  n          bigint NOT NULL CHECK (n >= 0),
  PRIMARY KEY (mailbox_id, day, what, key)
);
CREATE INDEX deleted_mail_counts_user_day_idx ON deleted_mail_counts (user_id, day);
