-- How far a kept event's rules were walked from their first repeat (services/schedule/occurrences.ts
-- `spanning`): rules a range cannot be walked from near (a COUNT is counted from the first repeat; daily
-- and monthly rules together; one repeating within a day) are walked once, within a time budget, when
-- the calendar is kept, and a range asked for stops at the last repeat that walk reached (ICAL.Time's
-- text, the event's own wall-clock time). Null when the rules are walked from near the range instead.
ALTER TABLE calendar_entries ADD COLUMN repeats_until text;

-- The repeating events kept before: each is walked once more by a worker (Schedule.rewalkKept), then
-- its entry here is gone.
CREATE TABLE calendar_rewalk (
  mailbox_id text NOT NULL,
  uid        text NOT NULL,
  PRIMARY KEY (mailbox_id, uid),
  FOREIGN KEY (mailbox_id, uid) REFERENCES calendar_entries (mailbox_id, uid) ON DELETE CASCADE
);
INSERT INTO calendar_rewalk (mailbox_id, uid) SELECT mailbox_id, uid FROM calendar_entries WHERE calendar LIKE '%RRULE%';
