-- Stripe (STRIPE_SECRET_KEY): one Stripe customer per user, the subscription it pays for, and the
-- time of the newest state applied (events can arrive out of order: an older one never wins).
ALTER TABLE subscriptions
  ADD COLUMN stripe_customer_id     text UNIQUE,
  ADD COLUMN stripe_subscription_id text,
  ADD COLUMN provider_state_at      timestamptz;

-- Stripe events already applied, by id: a replayed or redelivered event has no second effect.
CREATE TABLE billing_events (
  id          text PRIMARY KEY,
  type        text NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now()
);
