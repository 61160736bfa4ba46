-- A mailbox's automatic reply (outbound/auto-replies.ts): the answer mail arriving while it is on
-- gets, once per sender per interval, as RFC 3834 recommends. Kept until the account turns it off.
CREATE TABLE mailbox_auto_replies (
  mailbox_id text PRIMARY KEY REFERENCES mailboxes (id) ON DELETE CASCADE,
  -- NULL: "Re: " and the subject of the email answered.
  subject text,
  text_body text NOT NULL,
  html_body text,
  interval_days integer NOT NULL CHECK (interval_days BETWEEN 1 AND 30),
  starts_at timestamptz,
  ends_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Who each mailbox answered automatically, and when last: a sender is answered again only once the
-- interval has passed.
CREATE TABLE auto_replies_sent (
  mailbox_id text NOT NULL REFERENCES mailboxes (id) ON DELETE CASCADE,
  sender text NOT NULL,
  sent_at timestamptz NOT NULL,
  PRIMARY KEY (mailbox_id, sender)
);
