-- Extracted content (issue 17, item 5): the new text of a reply, one-time codes and links, read from
-- an inbound message once when it is stored (services/mail/extract.ts). NULL for sent mail, and for
-- mail stored before extraction existed, whose extraction is computed from its stored bodies when
-- it is read (no backfill: it is cheap, and a backfill would rewrite every email row).
ALTER TABLE emails ADD COLUMN extracted jsonb;
