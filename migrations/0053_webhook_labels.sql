-- A webhook may listen to mail carrying some labels only (`labels`): events about an email with none
-- of them, and events about no email's labels, are not sent to it. NULL: every event, as before.
ALTER TABLE webhooks ADD COLUMN labels text[];
