-- Forwarding (services/mail/forwarding.ts): a mailbox's received mail, copied to addresses of people.
-- An address forwards only once confirmed: by the link mailed to it (only its SHA-256 is kept; the same
-- link later stops the forwarding), or at once when it is a mailbox of the same account.
CREATE TABLE mailbox_forwards (
  mailbox_id    text NOT NULL REFERENCES mailboxes (id) ON DELETE CASCADE,
  user_id       text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  address       text NOT NULL CHECK (address = lower(address)),
  domain        text NOT NULL,
  token_sha256  text NOT NULL UNIQUE,
  created_at    timestamptz NOT NULL DEFAULT now(),
  confirmed_at  timestamptz,
  -- A copy refused for good (5xx, a delivery report) suspends the address until the account adds it again.
  suspended_at     timestamptz,
  suspended_reason text,
  PRIMARY KEY (mailbox_id, address)
);

-- Each received email's copies to the forwarding addresses confirmed when it was stored, delivered by
-- the mta as sent mail is (outbound/forwards.ts): per address, its status, attempts and last answer.
CREATE TABLE forward_deliveries (
  email_id        text NOT NULL REFERENCES emails (id) ON DELETE CASCADE,
  address         text NOT NULL,
  domain          text NOT NULL,
  status          text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'sent', 'deferred', 'bounced', 'failed')),
  attempts        integer NOT NULL DEFAULT 0,
  last_response   text,
  next_attempt_at timestamptz,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (email_id, address)
);
