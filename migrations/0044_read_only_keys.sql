-- An API key may be read-only (`permission`): it reads mail and searches, and every change (sending,
-- labels, deletions, keys, webhooks, …) refuses it. full_access: what every key was before.
ALTER TABLE api_keys ADD COLUMN permission text NOT NULL DEFAULT 'full_access'
  CHECK (permission IN ('full_access', 'read_only'));

-- mailroom_principal (0035) answers the key's permission too; full_access for sessions.
DROP FUNCTION mailroom_principal(text, text, text);
CREATE FUNCTION mailroom_principal(p_kind text, p_ref text, p_user text)
RETURNS TABLE (user_id text, plan text, key_id text, session_id text, valid_until timestamptz, mailbox_ids text[], permission text)
LANGUAGE sql STABLE AS $$
  SELECT k.user_id, s.plan, k.id, NULL::text, k.expires_at, k.mailbox_ids, k.permission
    FROM api_keys k JOIN subscriptions s ON s.user_id = k.user_id
    WHERE p_kind = 'key' AND k.key_hash = p_ref AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())
  UNION ALL
  SELECT x.user_id, s.plan, NULL::text, x.id, x.refresh_expires_at, NULL::text[], 'full_access'
    FROM sessions x JOIN subscriptions s ON s.user_id = x.user_id
    WHERE p_kind = 'session' AND x.id = p_ref AND x.user_id = p_user AND x.revoked_at IS NULL AND x.refresh_expires_at > now()
  UNION ALL
  SELECT x.user_id, s.plan, NULL::text, x.id, x.refresh_expires_at, NULL::text[], 'full_access'
    FROM sessions x JOIN subscriptions s ON s.user_id = x.user_id
    WHERE p_kind = 'cookie' AND x.cookie_hash = p_ref AND x.revoked_at IS NULL AND x.refresh_expires_at > now()
$$;
