-- A deleted account's addresses are held from other accounts for 30 days, as a deleted mailbox's are
-- (services/accounts/closure.ts): their rows in released_addresses must outlive the account's row, so
-- they no longer reference it. `user_id` still says whose they were (nobody may take them back).
ALTER TABLE released_addresses DROP CONSTRAINT released_addresses_user_id_fkey;
