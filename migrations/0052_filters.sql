-- An account's filters (mail/filter-rules.ts): conditions on received mail and the labels it gets,
-- applied at ingest in the order they were created. A filter of one mailbox goes with it.
CREATE TABLE mail_filters (
  id text PRIMARY KEY,
  user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  -- NULL: every mailbox of the account.
  mailbox_id text REFERENCES mailboxes (id) ON DELETE CASCADE,
  name text,
  enabled boolean NOT NULL DEFAULT true,
  -- Normalised as the API shows them: {"from": [...], "subject_contains": [...], ...}.
  conditions jsonb NOT NULL,
  add_labels text[] NOT NULL,
  remove_labels text[] NOT NULL,
  -- Written behind ingest (a few seconds late), for a person asking whether a filter works.
  matched_count bigint NOT NULL DEFAULT 0,
  last_matched_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX mail_filters_user_idx ON mail_filters (user_id, created_at, id);
CREATE INDEX mail_filters_mailbox_idx ON mail_filters (mailbox_id) WHERE mailbox_id IS NOT NULL;
