-- The plan's storage is a limit now (services/mail/inbound.ts, RCPT): a deleted mailbox's mail no
-- longer counts against it (services/mailboxes/mailboxes.ts `remove` gives it back). Mailboxes
-- deleted before gave nothing back: their mail's bytes leave the count once, here. A subtraction,
-- so that mail counted meanwhile by another node is kept.
UPDATE storage_usage s
SET bytes = greatest(0, s.bytes - d.bytes)
FROM (
  SELECT e.user_id, sum(e.size) AS bytes
  FROM emails e JOIN mailboxes m ON m.id = e.mailbox_id
  WHERE m.status = 'deleted'
  GROUP BY e.user_id
) d
WHERE d.user_id = s.user_id;
