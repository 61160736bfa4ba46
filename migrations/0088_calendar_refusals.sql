-- A received calendar the worker did not apply because of who sent it (services/schedule/calendar-sender.ts):
-- an update or cancellation of an event on a mailbox's schedule not from its organizer, or from an
-- organizer nothing vouches for (the email labelled `unauthenticated`), and a meeting answer likewise
-- not its attendee's own. Kept with the email and gone with it, so that GET /v1/api/emails/{id}/invitation
-- can say why the email changed nothing; gone too once it is applied (the label taken off by hand).
CREATE TABLE calendar_refusals (
  email_id   text PRIMARY KEY REFERENCES emails (id) ON DELETE CASCADE,
  reason     text NOT NULL CHECK (reason IN ('not_organizer', 'not_attendee', 'unverified_sender')),
  refused_at timestamptz NOT NULL DEFAULT now()
);
