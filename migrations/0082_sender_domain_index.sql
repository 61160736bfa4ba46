-- A list narrowed to a sender's domain (`from=example.org`, `from=*.example.org`: services/mail/narrowing.ts
-- `senderIs`), counted and paged: the domain ends the address, so no index on it held the condition, and
-- PostgreSQL read every email of the mailbox for it. Reversed, the domain starts it: `gro.elpmaxe@` is a
-- prefix this index finds, within one account, as emails_from_prefix_idx finds an address. On a mailbox of
-- 100,000 emails a domain of 100 took 300 ms to list, and one of 5,000 150 ms.
CREATE INDEX emails_from_domain_idx ON emails (user_id, reverse(lower(from_address)) text_pattern_ops);
