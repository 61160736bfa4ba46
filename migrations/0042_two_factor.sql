-- Two-factor sign-in (services/accounts/two-factor.ts): an account's authenticator-app secret (base32), set up
-- and then turned on by a code from the app (enabled_at); the newest time step whose code was used (a code works
-- once); the SHA-256 of each unused recovery code. One row per account; none while it is off.
CREATE TABLE two_factor (
  user_id text PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
  secret text NOT NULL,
  enabled_at timestamptz,
  last_step bigint,
  recovery_hashes text[] NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now()
);
