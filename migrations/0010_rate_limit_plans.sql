-- mailroom_authenticate picks the caller's plan row by name (p_plans), so that the order of the plans
-- is stated once, in TypeScript (services/ratelimit/rate-limiter.ts), not again here.
DROP FUNCTION mailroom_authenticate(text, text, text, integer[], integer[]);

CREATE FUNCTION mailroom_authenticate(p_kind text, p_ref text, p_user text, p_windows integer[], p_plans text[], p_limits integer[])
RETURNS TABLE (user_id text, plan text, key_id text, session_id text,
               allowed boolean, window_seconds integer, max_requests integer, remaining integer, reset_at bigint)
LANGUAGE plpgsql AS $$
DECLARE
  v_user text;
  v_plan text;
  v_key text;
  v_session text;
  v_subject text;
  v_row integer;
BEGIN
  IF p_kind = 'key' THEN
    SELECT k.user_id, s.plan, k.id INTO v_user, v_plan, v_key
      FROM api_keys k JOIN subscriptions s ON s.user_id = k.user_id
      WHERE k.key_hash = p_ref AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now());
    v_subject := 'key:' || v_key;
  ELSIF p_kind = 'session' THEN
    SELECT x.user_id, s.plan, x.id INTO v_user, v_plan, v_session
      FROM sessions x JOIN subscriptions s ON s.user_id = x.user_id
      WHERE x.id = p_ref AND x.user_id = p_user AND x.revoked_at IS NULL AND x.refresh_expires_at > now();
    v_subject := 'user:' || v_user;
  ELSIF p_kind = 'cookie' THEN
    SELECT x.user_id, s.plan, x.id INTO v_user, v_plan, v_session
      FROM sessions x JOIN subscriptions s ON s.user_id = x.user_id
      WHERE x.cookie_hash = p_ref AND x.revoked_at IS NULL AND x.refresh_expires_at > now();
    v_subject := 'user:' || v_user;
  END IF;
  IF v_user IS NULL THEN
    RETURN;
  END IF;
  v_row := array_position(p_plans, v_plan);
  IF v_row IS NULL THEN
    RAISE EXCEPTION 'mailroom_authenticate: no limits given for plan %', v_plan;
  END IF;
  RETURN QUERY
    SELECT v_user, v_plan, v_key, v_session, r.allowed, r.window_seconds, r.max_requests, r.remaining, r.reset_at
    FROM mailroom_rate_take(v_subject, p_windows, ARRAY(SELECT unnest(p_limits[v_row:v_row][1:array_length(p_windows, 1)]))) r;
END
$$;
