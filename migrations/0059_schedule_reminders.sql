-- Reminders of what is on mailboxes' schedules (services/schedule/reminders.ts): each occurrence a
-- `schedule.reminder` was sent for, claimed once whichever worker node saw it due first. Kept a day
-- past its start, then cleared.
CREATE TABLE schedule_reminders (
  mailbox_id text NOT NULL REFERENCES mailboxes (id) ON DELETE CASCADE,
  uid        text NOT NULL,
  starts_at  timestamptz NOT NULL,
  sent_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (mailbox_id, uid, starts_at)
);
CREATE INDEX schedule_reminders_by_start ON schedule_reminders (starts_at);

-- What is on or still to come, across every mailbox, for the reminders' scan (and nothing past).
CREATE INDEX calendar_entries_not_over ON calendar_entries ((coalesce(last_end, 'infinity'::timestamptz))) WHERE status <> 'cancelled';
