-- A mailbox's schedule (services/schedule): one calendar per event it is on, the meetings it organizes
-- and the invitations it received, each kept as the latest invitation, update or cancellation left it
-- (`calendar`: iCalendar text, the event's parts and the zones they name). `first_start` and
-- `last_end` bound its occurrences (`last_end` null: it repeats without end) so a range finds the
-- events it can hold; `response` is the mailbox's own answer (an organizer's: accepted).
CREATE TABLE calendar_entries (
  mailbox_id  text NOT NULL REFERENCES mailboxes (id) ON DELETE CASCADE,
  uid         text NOT NULL,
  user_id     text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  role        text NOT NULL CHECK (role IN ('organizer', 'attendee')),
  meeting_id  text REFERENCES meetings (id) ON DELETE CASCADE,
  email_id    text REFERENCES emails (id) ON DELETE SET NULL,
  sequence    integer NOT NULL,
  status      text NOT NULL CHECK (status IN ('confirmed', 'tentative', 'cancelled')),
  response    text NOT NULL CHECK (response IN ('needs_action', 'accepted', 'declined', 'tentative', 'delegated')),
  calendar    text NOT NULL,
  first_start timestamptz NOT NULL,
  last_end    timestamptz,
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (mailbox_id, uid)
);
-- A range asked for is mostly now and later: the events still to end are few beside the ones past.
CREATE INDEX calendar_entries_by_end ON calendar_entries (mailbox_id, (coalesce(last_end, 'infinity'::timestamptz)));

-- What the schedule has still to read, from before it existed: every received email with a calendar
-- part, and every meeting. The worker works through it once (services/schedule: Schedule.backfill).
CREATE TABLE calendar_backfill (
  kind text NOT NULL CHECK (kind IN ('email', 'meeting')),
  id   text NOT NULL,
  PRIMARY KEY (kind, id)
);
INSERT INTO calendar_backfill (kind, id)
SELECT DISTINCT 'email', a.email_id FROM attachments a JOIN emails e ON e.id = a.email_id
WHERE e.direction = 'inbound'
  AND (lower(a.content_type) IN ('text/calendar', 'application/ics') OR lower(a.filename) LIKE '%.ics');
INSERT INTO calendar_backfill (kind, id) SELECT 'meeting', id FROM meetings;
