-- The mailbox each webhook delivery's event is about (none for an event about no mailbox, such as
-- api_key.created). A key limited to mailboxes that manages a webhook (one that listens to its
-- mailboxes only) sees, and sends again, only the deliveries about its mailboxes: a webhook that
-- listened to the whole account before it was narrowed keeps deliveries about other mailboxes.
-- Deliveries made before this column are filled from the event log, which keeps 7 days; older
-- ones stay about no mailbox, so only the account's full keys and its dashboard see them.
ALTER TABLE webhook_deliveries ADD COLUMN mailbox_id text;
UPDATE webhook_deliveries d SET mailbox_id = e.mailbox_id
  FROM webhooks w, event_log e
  WHERE w.id = d.webhook_id AND e.event_id = d.event_id AND e.user_id = w.user_id AND e.mailbox_id IS NOT NULL;
