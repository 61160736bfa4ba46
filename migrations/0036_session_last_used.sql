-- When a login session was last used (a request with its access token or cookie), written behind the
-- answer in batches as API keys' last_used_at is (services/accounts/credential-use.ts): the account's
-- list of sessions shows it as lastActiveAt. NULL: not used since this migration.
ALTER TABLE sessions ADD COLUMN last_used_at timestamptz;
