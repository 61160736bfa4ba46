-- Emails deleted through the API (services/mail/deletion.ts), kept as long as the bus may still deliver
-- their inbound message again (housekeeping removes them after 8 days): a redelivered message of a
-- deleted email is not stored again.
CREATE TABLE deleted_emails (
  id         text PRIMARY KEY,
  deleted_at timestamptz NOT NULL DEFAULT now()
);
