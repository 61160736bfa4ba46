-- An API key may be limited to some mailboxes of its account (`mailboxIds`): it reads, sends and
-- manages the mail of those only, and account-wide routes refuse it. NULL: the whole account, as before.
ALTER TABLE api_keys ADD COLUMN mailbox_ids text[];

-- mailroom_principal (0018) answers the key's mailboxes too; NULL for sessions and unlimited keys.
DROP FUNCTION mailroom_principal(text, text, text);
CREATE FUNCTION mailroom_principal(p_kind text, p_ref text, p_user text)
RETURNS TABLE (user_id text, plan text, key_id text, session_id text, valid_until timestamptz, mailbox_ids text[])
LANGUAGE sql STABLE AS $$
  SELECT k.user_id, s.plan, k.id, NULL::text, k.expires_at, k.mailbox_ids
    FROM api_keys k JOIN subscriptions s ON s.user_id = k.user_id
    WHERE p_kind = 'key' AND k.key_hash = p_ref AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())
  UNION ALL
  SELECT x.user_id, s.plan, NULL::text, x.id, x.refresh_expires_at, NULL::text[]
    FROM sessions x JOIN subscriptions s ON s.user_id = x.user_id
    WHERE p_kind = 'session' AND x.id = p_ref AND x.user_id = p_user AND x.revoked_at IS NULL AND x.refresh_expires_at > now()
  UNION ALL
  SELECT x.user_id, s.plan, NULL::text, x.id, x.refresh_expires_at, NULL::text[]
    FROM sessions x JOIN subscriptions s ON s.user_id = x.user_id
    WHERE p_kind = 'cookie' AND x.cookie_hash = p_ref AND x.revoked_at IS NULL AND x.refresh_expires_at > now()
$$;
