-- Accounts: users, login sessions, API keys, subscriptions, usage and rate-limit counters.

CREATE TABLE users (
  id               text PRIMARY KEY,
  email            text NOT NULL,
  email_normalized text NOT NULL UNIQUE,
  name             text NOT NULL,
  password_hash    text NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now()
);

-- One row per login. The access token names the session; the refresh token is stored hashed and
-- rotated on every use (the one it replaced is kept to detect reuse of a stolen token).
CREATE TABLE sessions (
  id                    text PRIMARY KEY,
  user_id               text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  refresh_hash          text NOT NULL UNIQUE,
  previous_refresh_hash text,
  cookie_hash           text NOT NULL UNIQUE,
  refresh_expires_at    timestamptz NOT NULL,
  created_at            timestamptz NOT NULL DEFAULT now(),
  refreshed_at          timestamptz,
  revoked_at            timestamptz
);
CREATE INDEX sessions_user_idx ON sessions (user_id);
CREATE INDEX sessions_previous_refresh_idx ON sessions (previous_refresh_hash);

CREATE TABLE api_keys (
  id           text PRIMARY KEY,
  user_id      text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  name         text NOT NULL,
  key_hash     text NOT NULL UNIQUE,
  key_prefix   text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz,
  last_used_at timestamptz,
  revoked_at   timestamptz
);
CREATE INDEX api_keys_user_idx ON api_keys (user_id, created_at);

CREATE TABLE subscriptions (
  user_id              text PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
  plan                 text NOT NULL DEFAULT 'free' CHECK (plan IN ('free', 'pro', 'enterprise')),
  status               text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'past_due', 'canceled')),
  current_period_start timestamptz NOT NULL,
  current_period_end   timestamptz NOT NULL,
  cancel_at_period_end boolean NOT NULL DEFAULT false,
  updated_at           timestamptz NOT NULL DEFAULT now()
);

-- Counted per billing period (emails received, searches run).
CREATE TABLE usage_counters (
  user_id      text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  period_start timestamptz NOT NULL,
  emails       bigint NOT NULL DEFAULT 0,
  searches     bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (user_id, period_start)
);

-- Bytes currently stored for an account (not per period: storage is a level, not a flow).
CREATE TABLE storage_usage (
  user_id text PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
  bytes   bigint NOT NULL DEFAULT 0
);

-- Fixed-window request counters shared by every API process. UNLOGGED: counters are cheap to
-- lose in a crash and must not cost a WAL flush on every request.
CREATE UNLOGGED TABLE rate_limit_counters (
  subject       text PRIMARY KEY,
  window_starts bigint[] NOT NULL,
  hits          integer[] NOT NULL
);

-- Count one request against every window of a subject, atomically across processes.
-- A refused request is not counted, so hammering a full window does not drain the longer ones.
-- Returns the window to report: when allowed, the one with the fewest requests left; when refused,
-- the exhausted window that resets last. p_peek checks without counting.
CREATE FUNCTION mailroom_rate_take(p_subject text, p_windows integer[], p_limits integer[], p_peek boolean DEFAULT false)
RETURNS TABLE (allowed boolean, window_seconds integer, max_requests integer, remaining integer, reset_at bigint)
LANGUAGE plpgsql AS $$
DECLARE
  now_s  bigint := floor(extract(epoch FROM clock_timestamp()))::bigint;
  n      integer := array_length(p_windows, 1);
  starts bigint[];
  counts integer[];
  stored_starts bigint[];
  stored_hits integer[];
  pick   integer := 0;
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
  END LOOP;
  IF pick > 0 THEN
    RETURN QUERY SELECT false, p_windows[pick], p_limits[pick], 0, starts[pick] + p_windows[pick];
    RETURN;
  END IF;
  IF NOT p_peek THEN
    FOR i IN 1..n LOOP
      counts[i] := counts[i] + 1;
    END LOOP;
    UPDATE rate_limit_counters SET window_starts = starts, hits = counts WHERE subject = p_subject;
  END IF;
  pick := 1;
  FOR i IN 2..n LOOP
    IF p_limits[i] - counts[i] < p_limits[pick] - counts[pick] THEN
      pick := i;
    END IF;
  END LOOP;
  RETURN QUERY SELECT true, p_windows[pick], p_limits[pick], p_limits[pick] - counts[pick], starts[pick] + p_windows[pick];
END
$$;

-- Resolve one credential and count the request against its rate limit, in one call:
--   'key'     p_ref = SHA-256 of an API key       → limited per key
--   'session' p_ref = session id, p_user = user    → limited per user (access tokens)
--   'cookie'  p_ref = SHA-256 of a session cookie  → limited per user
-- p_limits holds the plans' request limits for p_windows, one row per plan: free, pro, enterprise.
-- No row: the credential is unknown, revoked or expired.
CREATE FUNCTION mailroom_authenticate(p_kind text, p_ref text, p_user text, p_windows integer[], p_limits integer[])
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
  v_row := CASE v_plan WHEN 'free' THEN 1 WHEN 'pro' THEN 2 ELSE 3 END;
  RETURN QUERY
    SELECT v_user, v_plan, v_key, v_session, r.allowed, r.window_seconds, r.max_requests, r.remaining, r.reset_at
    FROM mailroom_rate_take(v_subject, p_windows, ARRAY(SELECT unnest(p_limits[v_row:v_row][1:array_length(p_windows, 1)]))) r;
END
$$;
