-- Mailboxes: the addresses agents receive mail at (SPEC "Mailbox").
-- A deleted mailbox keeps its row (status 'deleted', deleted_at set): its address is held for 30 days
-- for anyone but its former owner, and its mail stays hidden behind it.

CREATE TABLE mailboxes (
  id                 text PRIMARY KEY,
  user_id            text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  local_part         text NOT NULL,
  domain             text NOT NULL,
  -- lower(local_part@domain): what uniqueness and inbound routing compare.
  address_normalized text NOT NULL,
  status             text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'deleted')),
  created_at         timestamptz NOT NULL DEFAULT now(),
  deleted_at         timestamptz,
  CHECK (address_normalized = lower(local_part || '@' || domain)),
  CHECK ((status = 'deleted') = (deleted_at IS NOT NULL))
);

-- One active mailbox per address across all users; it decides concurrent creates and renames.
CREATE UNIQUE INDEX mailboxes_active_address_key ON mailboxes (address_normalized) WHERE status = 'active';
CREATE INDEX mailboxes_user_idx ON mailboxes (user_id, created_at);
-- The 30-day hold on deleted addresses.
CREATE INDEX mailboxes_deleted_address_idx ON mailboxes (address_normalized, deleted_at) WHERE status = 'deleted';
