-- The API hot path without a round trip per request (services/accounts/principals.ts,
-- services/ratelimit/leases.ts): a credential is resolved once and cached, and request tokens are
-- taken from the shared counters in leases. mailroom_authenticate, which did both per request, goes.
DROP FUNCTION mailroom_authenticate(text, text, text, integer[], text[], integer[]);

-- Resolve a credential to its owner without counting anything:
--   'key'     p_ref = SHA-256 of an API key
--   'session' p_ref = session id, p_user = the user the access token names
--   'cookie'  p_ref = SHA-256 of a session cookie
-- valid_until is when the credential stops working by itself (a key's expiry, a session's end);
-- NULL for a key that never expires. No row: unknown, revoked or expired.
CREATE FUNCTION mailroom_principal(p_kind text, p_ref text, p_user text)
RETURNS TABLE (user_id text, plan text, key_id text, session_id text, valid_until timestamptz)
LANGUAGE sql STABLE AS $$
  SELECT k.user_id, s.plan, k.id, NULL::text, k.expires_at
    FROM api_keys k JOIN subscriptions s ON s.user_id = k.user_id
    WHERE p_kind = 'key' AND k.key_hash = p_ref AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())
  UNION ALL
  SELECT x.user_id, s.plan, NULL::text, x.id, x.refresh_expires_at
    FROM sessions x JOIN subscriptions s ON s.user_id = x.user_id
    WHERE p_kind = 'session' AND x.id = p_ref AND x.user_id = p_user AND x.revoked_at IS NULL AND x.refresh_expires_at > now()
  UNION ALL
  SELECT x.user_id, s.plan, NULL::text, x.id, x.refresh_expires_at
    FROM sessions x JOIN subscriptions s ON s.user_id = x.user_id
    WHERE p_kind = 'cookie' AND x.cookie_hash = p_ref AND x.revoked_at IS NULL AND x.refresh_expires_at > now()
$$;

-- Take up to p_want requests of a subject's windows at once (a lease), atomically across processes:
-- as many as every window still allows. granted = 0 is a refusal, reported as mailroom_rate_take
-- reports one (the exhausted window that resets last); otherwise the window with the fewest requests
-- left after the lease. window_starts identifies the windows the lease was counted in, for
-- mailroom_rate_return; lease_until is when the earliest of them ends (the lease ends with it).
CREATE FUNCTION mailroom_rate_lease(p_subject text, p_windows integer[], p_limits integer[], p_want integer)
RETURNS TABLE (granted integer, window_seconds integer, max_requests integer, remaining integer, reset_at bigint,
               window_starts bigint[], lease_until bigint)
LANGUAGE plpgsql AS $$
DECLARE
  now_s  bigint := floor(extract(epoch FROM clock_timestamp()))::bigint;
  n      integer := array_length(p_windows, 1);
  starts bigint[];
  counts integer[];
  stored_starts bigint[];
  stored_hits integer[];
  pick   integer := 0;
  take   integer := greatest(p_want, 1);
  ends   bigint;
  i      integer;
BEGIN
  INSERT INTO rate_limit_counters (subject, window_starts, hits)
    VALUES (p_subject, array_fill(0::bigint, ARRAY[n]), array_fill(0, ARRAY[n]))
    ON CONFLICT (subject) DO NOTHING;
  SELECT r.window_starts, r.hits INTO stored_starts, stored_hits
    FROM rate_limit_counters r WHERE r.subject = p_subject FOR UPDATE;
  FOR i IN 1..n LOOP
    starts[i] := now_s - (now_s % p_windows[i]);
    counts[i] := CASE WHEN stored_starts[i] = starts[i] THEN coalesce(stored_hits[i], 0) ELSE 0 END;
    IF counts[i] >= p_limits[i] AND (pick = 0 OR starts[i] + p_windows[i] > starts[pick] + p_windows[pick]) THEN
      pick := i;
    END IF;
    take := least(take, p_limits[i] - counts[i]);
    ends := least(ends, starts[i] + p_windows[i]);
  END LOOP;
  IF pick > 0 THEN
    RETURN QUERY SELECT 0, p_windows[pick], p_limits[pick], 0, starts[pick] + p_windows[pick], starts, ends;
    RETURN;
  END IF;
  FOR i IN 1..n LOOP
    counts[i] := counts[i] + take;
  END LOOP;
  UPDATE rate_limit_counters SET window_starts = starts, hits = counts WHERE subject = p_subject;
  pick := 1;
  FOR i IN 2..n LOOP
    IF p_limits[i] - counts[i] < p_limits[pick] - counts[pick] THEN
      pick := i;
    END IF;
  END LOOP;
  RETURN QUERY SELECT take, p_windows[pick], p_limits[pick], p_limits[pick] - counts[pick], starts[pick] + p_windows[pick],
                      starts, ends;
END
$$;

-- Give back requests a lease took and did not use, in the windows it was counted in that are still
-- current (a window that has ended has been reset anyway).
CREATE FUNCTION mailroom_rate_return(p_subject text, p_starts bigint[], p_count integer)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  stored_starts bigint[];
  stored_hits integer[];
  i integer;
BEGIN
  SELECT r.window_starts, r.hits INTO stored_starts, stored_hits
    FROM rate_limit_counters r WHERE r.subject = p_subject FOR UPDATE;
  IF stored_starts IS NULL THEN
    RETURN;
  END IF;
  FOR i IN 1..least(array_length(stored_starts, 1), array_length(p_starts, 1)) LOOP
    IF stored_starts[i] = p_starts[i] THEN
      stored_hits[i] := greatest(0, stored_hits[i] - p_count);
    END IF;
  END LOOP;
  UPDATE rate_limit_counters SET hits = stored_hits WHERE subject = p_subject;
END
$$;
