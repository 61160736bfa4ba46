-- Addresses a mailbox left behind, by a rename or a domain migration (services/mailboxes/mailboxes.ts
-- `taken`): held from other accounts for 30 days, as a deleted mailbox's address is, so that nobody
-- takes over mail still sent to the old address. Its owner may take it back at once. Rows older than
-- the hold are removed by the worker's housekeeping.
CREATE TABLE released_addresses (
  address_normalized text NOT NULL,
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  released_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (address_normalized, user_id)
);
CREATE INDEX released_addresses_released_at_idx ON released_addresses (released_at);
