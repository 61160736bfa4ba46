-- Labels and read state (issue 17). An email's labels live on its row: system labels Mailroom sets
-- (`inbound` and, once outbound mail exists, `sent` state facts and cannot be removed; `unread` is set
-- on arrival and is the agent's to clear) and the account's own labels, 1-64 characters each.
-- Mail stored before labels existed is inbound and, as nobody has marked it handled, unread.
ALTER TABLE emails ADD COLUMN labels text[] NOT NULL DEFAULT '{}';
UPDATE emails SET labels = ARRAY['inbound', 'unread'];

-- The list filters (`labels`, `exclude_labels`, `unread`) and search's label filter read it with
-- the array operators a GIN index serves.
CREATE INDEX emails_labels_idx ON emails USING gin (labels);
