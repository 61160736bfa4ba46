-- A webhook may listen to some mailboxes only (`mailbox_ids`): events about other mailboxes, and
-- events about no mailbox, are not sent to it. NULL: every event of the account, as before.
ALTER TABLE webhooks ADD COLUMN mailbox_ids text[];
