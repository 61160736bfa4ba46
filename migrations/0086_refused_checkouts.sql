-- A local checkout link remembers the plan the account was on when it was made (made_on_plan): once the
-- account has changed plan since (another link paid, say), confirming it changes and charges nothing.
-- Such a link, and one confirmed while the account has its plan already, ends 'refused' rather than
-- 'completed' (it was never paid), with the plan it found (refused_on_plan), so it says the same when
-- opened again. Links made before this have no made_on_plan: only the plan already held refuses them.
ALTER TABLE payment_sessions
  ADD COLUMN made_on_plan    text CHECK (made_on_plan IN ('free', 'pro', 'enterprise')),
  ADD COLUMN refused_on_plan text CHECK (refused_on_plan IN ('free', 'pro', 'enterprise'));
ALTER TABLE payment_sessions DROP CONSTRAINT payment_sessions_status_check;
ALTER TABLE payment_sessions ADD CONSTRAINT payment_sessions_status_check CHECK (status IN ('open', 'completed', 'refused'));
