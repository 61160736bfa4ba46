-- Every refresh token a session has exchanged (services/accounts/accounts.ts `refresh`), not only the
-- last one: any of them presented again means a copy of the session's tokens leaked, and the session
-- ends. Before, only the token exchanged last was known, so a thief who refreshed twice was not found
-- out when the owner's older token came back. Kept as long as such a token could otherwise still have
-- been used (30 days: maintenance/housekeeping.ts), and with its session.
CREATE TABLE spent_refresh_tokens (
  token_hash text PRIMARY KEY,
  session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  spent_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX spent_refresh_tokens_session_idx ON spent_refresh_tokens (session_id);
CREATE INDEX spent_refresh_tokens_spent_at_idx ON spent_refresh_tokens (spent_at);

INSERT INTO spent_refresh_tokens (token_hash, session_id, spent_at)
SELECT previous_refresh_hash, id, coalesce(refreshed_at, now()) FROM sessions WHERE previous_refresh_hash IS NOT NULL
ON CONFLICT DO NOTHING;
ALTER TABLE sessions DROP COLUMN previous_refresh_hash;
