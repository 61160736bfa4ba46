-- The ARC verdict names the domain that sealed the latest ARC set (services/mail/authentication.ts).
-- Verdicts stored before it was kept say null: the chain is not read again.
UPDATE emails SET authentication = jsonb_set(authentication, '{arc,domain}', 'null'::jsonb)
WHERE authentication IS NOT NULL AND authentication ? 'arc' AND NOT (authentication -> 'arc' ? 'domain');
