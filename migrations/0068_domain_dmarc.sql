-- A custom domain's DMARC record (`_dmarc.<domain>`), asked for beside SPF and DKIM and reported by
-- verification (services/domains/domains.ts): mailbox providers ask senders for one.
ALTER TABLE domains ADD COLUMN dmarc_configured boolean NOT NULL DEFAULT false;
