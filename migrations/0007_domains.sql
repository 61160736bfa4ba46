-- Custom domains (SPEC "Domain", "Domains"): a hostname belongs to one account, proves ownership
-- with a TXT record, and points its MX at us before mail for it can arrive.

CREATE TABLE domains (
  id                 text PRIMARY KEY,
  user_id            text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  -- Lower-cased ASCII (IDNs in punycode), without a trailing dot.
  name               text NOT NULL UNIQUE CHECK (name = lower(name)),
  -- The whole TXT value, `<VERIFY_PREFIX>=<token>`.
  verification_token text NOT NULL,
  verified           boolean NOT NULL DEFAULT false,
  mx_configured      boolean NOT NULL DEFAULT false,
  verified_at        timestamptz,
  created_at         timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX domains_user_idx ON domains (user_id, created_at);
-- Mailboxes by domain: the domain's mailbox_count, migrations and the delete check.
CREATE INDEX mailboxes_active_domain_idx ON mailboxes (domain) WHERE status = 'active';
