-- Full-text top-k without reading every posting (services/search/ranker.ts, "pruned"): each
-- lexeme's postings in the order of their BM25 impact within a frequency (most occurrences first,
-- then shortest email first). Within one frequency a shorter email always scores higher, whatever
-- BM25's constants and the namespace's average length are when the query runs, so this order
-- stays right as mail arrives and nothing stored here has to be rewritten: the ranker reads from
-- it the best posting of each frequency (a lexeme's highest possible impact, computed at query
-- time) and the best postings of each lexeme (a first bound on the k-th best score). Building it
-- covers the postings already stored.
CREATE INDEX search_terms_impact_idx ON search_terms (user_id, lexeme, frequency DESC, length) INCLUDE (email_id, mailbox_id);
