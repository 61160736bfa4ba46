-- Hosted payment pages of the local payment provider (no Stripe key configured): a checkout or
-- portal session is a secret URL on the app itself.
CREATE TABLE payment_sessions (
  id          text PRIMARY KEY,
  kind        text NOT NULL CHECK (kind IN ('checkout', 'portal')),
  user_id     text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  plan        text CHECK (plan IN ('free', 'pro', 'enterprise')),
  success_url text,
  cancel_url  text,
  return_url  text,
  status      text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'completed')),
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL,
  completed_at timestamptz
);
CREATE INDEX payment_sessions_user_idx ON payment_sessions (user_id);
