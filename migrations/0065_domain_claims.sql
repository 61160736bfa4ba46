-- A hostname may be claimed by several accounts until one proves it owns it (domains/domains.ts): an
-- unverified claim no longer keeps every other account from registering the name (squatting); the
-- first to verify holds it, and no second claim can then verify. An account claims a name once.
ALTER TABLE domains DROP CONSTRAINT domains_name_key;
CREATE UNIQUE INDEX domains_account_name_idx ON domains (user_id, name);
CREATE UNIQUE INDEX domains_verified_name_idx ON domains (name) WHERE verified;
