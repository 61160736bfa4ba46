-- Held search rankings (services/search/held-rankings.ts): a search whose answer has more pages keeps
-- the ranking it paged through, so that a later page asked with its token (`ranking`) is read from that
-- ranking instead of ranking again (the index may have changed meanwhile: vectors of an embedding
-- backlog arrive, and a new ranking's pages would show an email twice or never). The emails in ranked
-- order with their scores, the search they answer (`search`: a digest of its query and filters), and
-- when the token stops working: 10 minutes after its last use. Housekeeping removes expired ones.
CREATE TABLE search_rankings (
  id         text PRIMARY KEY,
  user_id    text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  search     text NOT NULL,
  email_ids  text[] NOT NULL,
  scores     double precision[] NOT NULL,
  expires_at timestamptz NOT NULL
);

CREATE INDEX search_rankings_expires_idx ON search_rankings (expires_at);
