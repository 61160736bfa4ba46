-- A link to choose a new password, mailed to the account's email (services/accounts/password-reset.ts).
-- Only the token's SHA-256 is kept; a token works once, until it expires, and every token of the account
-- goes when one is used or the account is deleted.
CREATE TABLE password_resets (
  token_hash text PRIMARY KEY,
  user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
CREATE INDEX password_resets_user ON password_resets (user_id);
