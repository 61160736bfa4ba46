-- Meetings a mailbox organizes (services/meetings): the event as its invitations describe it, its
-- revision (`sequence`, one more with each change sent), and its attendees with their answers as
-- their calendars' replies tell them (`attendees`: [{address, name, status, comment, responded_at}]).
-- `starts_at` orders them (a whole day's start at midnight UTC).
CREATE TABLE meetings (
  id          text PRIMARY KEY,
  mailbox_id  text NOT NULL REFERENCES mailboxes (id) ON DELETE CASCADE,
  user_id     text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  uid         text NOT NULL UNIQUE,
  sequence    integer NOT NULL DEFAULT 0,
  status      text NOT NULL DEFAULT 'confirmed' CHECK (status IN ('confirmed', 'cancelled')),
  summary     text NOT NULL,
  description text,
  location    text,
  url         text,
  start_time  jsonb NOT NULL,
  end_time    jsonb NOT NULL,
  starts_at   timestamptz NOT NULL,
  recurrence  text,
  attendees   jsonb NOT NULL,
  email_id    text REFERENCES emails (id) ON DELETE SET NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX meetings_by_mailbox ON meetings (mailbox_id, created_at);
