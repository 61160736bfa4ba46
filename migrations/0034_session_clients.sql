-- What each login session was opened from, for the list of sessions an account sees (GET
-- /api/auth/sessions): the client as it named itself (User-Agent) and the address it connected from.
-- Nullable, no rewrite: sessions opened before this migration show neither.
ALTER TABLE sessions ADD COLUMN user_agent text, ADD COLUMN client_address text;
