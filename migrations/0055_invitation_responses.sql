-- A mailbox's answer to a calendar invitation it received (services/invitations): the latest one,
-- kept with the email it answers and gone with it. `reply_email_id` is the REPLY sent to the organizer.
CREATE TABLE invitation_responses (
  email_id       text PRIMARY KEY REFERENCES emails (id) ON DELETE CASCADE,
  user_id        text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  status         text NOT NULL CHECK (status IN ('accepted', 'declined', 'tentative')),
  comment        text,
  reply_email_id text REFERENCES emails (id) ON DELETE SET NULL,
  responded_at   timestamptz NOT NULL DEFAULT now()
);
