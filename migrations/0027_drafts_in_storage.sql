-- Drafts count toward their account's storage (storage_usage) while they can still be sent: their
-- content (text, html, attachments in base64) is stored mail as much as an email is. A sent draft
-- stops counting (the email it became counts instead), as does a deleted one. Kept by a trigger, so
-- that every way a draft changes or goes (an edit, a send, a delete, its account's deletion) is
-- counted the same.
CREATE FUNCTION mailroom_draft_bytes(p_status text, p_content jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN p_status = 'sent' THEN 0 ELSE octet_length(p_content::text) END::bigint
$$;

CREATE FUNCTION mailroom_count_draft_storage() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  owner text := CASE WHEN TG_OP = 'DELETE' THEN OLD.user_id ELSE NEW.user_id END;
  delta bigint := (CASE WHEN TG_OP = 'DELETE' THEN 0 ELSE mailroom_draft_bytes(NEW.status, NEW.content) END)
                - (CASE WHEN TG_OP = 'INSERT' THEN 0 ELSE mailroom_draft_bytes(OLD.status, OLD.content) END);
BEGIN
  IF delta > 0 THEN
    INSERT INTO storage_usage (user_id, bytes) VALUES (owner, delta)
    ON CONFLICT (user_id) DO UPDATE SET bytes = storage_usage.bytes + EXCLUDED.bytes;
  ELSIF delta < 0 THEN
    -- Not an insert: a draft deleted with its account finds no row to count against, and needs none.
    UPDATE storage_usage SET bytes = greatest(0, bytes + delta) WHERE user_id = owner;
  END IF;
  RETURN NULL;
END
$$;

-- The drafts of deleted mailboxes can never be sent or read again: they go, uncounted.
DELETE FROM drafts WHERE mailbox_id IN (SELECT id FROM mailboxes WHERE status = 'deleted');

INSERT INTO storage_usage (user_id, bytes)
SELECT user_id, sum(mailroom_draft_bytes(status, content)) FROM drafts GROUP BY user_id
ON CONFLICT (user_id) DO UPDATE SET bytes = storage_usage.bytes + EXCLUDED.bytes;

-- A send reads what the drafts being sent from its mailbox hold (services/outbound/send.ts): few, found here.
CREATE INDEX drafts_sending_idx ON drafts (mailbox_id) WHERE status = 'sending';

CREATE TRIGGER drafts_count_storage
AFTER INSERT OR DELETE OR UPDATE OF status, content ON drafts
FOR EACH ROW EXECUTE FUNCTION mailroom_count_draft_storage();
