-- Stripe subscriptions that ended (customer.subscription.deleted). An ended subscription is final: an
-- event about it that arrives after its deletion (the same second, so no newer by its time, or late)
-- never brings its plan back, even once the account has no subscription on record to compare with.
CREATE TABLE ended_stripe_subscriptions (
  subscription_id text PRIMARY KEY,
  user_id         text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  ended_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ended_stripe_subscriptions_user_idx ON ended_stripe_subscriptions (user_id);
