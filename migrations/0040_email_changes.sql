-- A change of an account's email waits until the new address confirms it (services/accounts/email-change.ts):
-- the link mailed there carries a token, of which only the SHA-256 is kept.
CREATE TABLE email_changes (
  token_hash text PRIMARY KEY,
  user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  new_email text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
CREATE INDEX email_changes_user ON email_changes (user_id);
