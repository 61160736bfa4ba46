-- The account's security activity (services/accounts/activity.ts): sign-ins and refused ones, changes of
-- password, email and two-factor sign-in, sessions signed out, API keys made and revoked; kept 90 days.
CREATE TABLE account_activity (
  id text PRIMARY KEY,
  user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  at timestamptz NOT NULL DEFAULT now(),
  kind text NOT NULL,
  client_address text,
  user_agent text,
  detail jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX account_activity_user_at ON account_activity (user_id, at DESC, id DESC);
CREATE INDEX account_activity_at ON account_activity (at);
