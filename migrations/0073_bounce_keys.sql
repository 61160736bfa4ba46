-- The key each email's bounce addresses are tagged with (services/outbound/bounce-address.ts): one
-- address per recipient domain, so a report to it can speak only of that domain's recipients. Added
-- without a default first, so the mail already stored keeps none (its bare address goes on working)
-- and the table is not rewritten; every email stored from now on gets one.
ALTER TABLE emails ADD COLUMN bounce_key uuid;
ALTER TABLE emails ALTER COLUMN bounce_key SET DEFAULT gen_random_uuid();
