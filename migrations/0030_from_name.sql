-- The display name of an email's From (`from_name`): '' when its From has none. NULL for mail stored
-- before the column existed, which reads the name from its stored headers (services/mail/records.ts):
-- no row is rewritten.
ALTER TABLE emails ADD COLUMN from_name text;
