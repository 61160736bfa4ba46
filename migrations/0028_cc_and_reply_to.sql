-- An email's Cc and Reply-To addresses, as its To already is (services/mail/records.ts): read from the
-- message when it is stored. Nullable, so adding them rewrites no row: an email stored before has
-- null here and reads them from its stored headers instead.
ALTER TABLE emails ADD COLUMN cc_addresses text[], ADD COLUMN reply_to_addresses text[];
