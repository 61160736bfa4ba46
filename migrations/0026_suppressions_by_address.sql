-- Suppressions found by address alone, across accounts: an address that comes to have a mailbox here
-- (created, or a mailbox renamed to it) is no longer suppressed by anyone, for it and its subaddresses
-- (services/mailboxes/mailboxes.ts). `text_pattern_ops` serves both the equality and the
-- `LIKE 'local+%@domain'` of the subaddresses.
CREATE INDEX suppressions_by_address ON suppressions (address text_pattern_ops);
