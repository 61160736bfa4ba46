-- Search (SPEC "Search"): what the index actor made searchable (documents, the full-text inverted
-- index and its lexicon), past queries for suggestions, and the indexes suggestions read. The
-- vectors live in the VectorIndex (Qdrant, or pgvector tables the adapter creates per embedding
-- model, since this database may lack the extension).

-- One row per indexed email: the model its vectors were made with and its length in words.
-- Written after the vectors, so a row here means the email is searchable both ways.
CREATE TABLE search_documents (
  email_id      text PRIMARY KEY REFERENCES emails (id) ON DELETE CASCADE,
  user_id       text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  mailbox_id    text NOT NULL REFERENCES mailboxes (id) ON DELETE CASCADE,
  model         text NOT NULL,
  chunks        integer NOT NULL,
  -- Words in the subject and searchable body: the length BM25 normalises by.
  length        integer NOT NULL,
  processing_ms integer NOT NULL,
  indexed_at    timestamptz NOT NULL DEFAULT now()
);

-- Document count and average length per namespace come from here (an index-only scan).
CREATE INDEX search_documents_user_idx ON search_documents (user_id, mailbox_id) INCLUDE (length);
-- Reindexing finds the emails not yet embedded with the current model.
CREATE INDEX search_documents_model_idx ON search_documents (model);

-- The full-text inverted index: one row per email and English lexeme (PostgreSQL's stemming and
-- stop words), so that ranking a query reads only the postings of its own words. `frequency`
-- counts occurrences, subject ones double; `length` repeats the document's so that the ranking
-- reads this index alone.
CREATE TABLE search_terms (
  user_id    text NOT NULL,
  lexeme     text NOT NULL,
  email_id   text NOT NULL REFERENCES search_documents (email_id) ON DELETE CASCADE,
  mailbox_id text NOT NULL,
  frequency  real NOT NULL,
  length     integer NOT NULL,
  PRIMARY KEY (user_id, lexeme, email_id) INCLUDE (mailbox_id, frequency, length)
);

CREATE INDEX search_terms_email_idx ON search_terms (email_id);

-- In how many of a namespace's emails each lexeme occurs (its document frequency), kept as mail is
-- indexed: what a query's words weigh (IDF) is one lookup, not a count over the postings.
CREATE TABLE search_lexicon (
  user_id   text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  lexeme    text NOT NULL,
  documents integer NOT NULL,
  PRIMARY KEY (user_id, lexeme)
);

-- Queries a user ran, once per normalised text: the first source of suggestions.
CREATE TABLE search_queries (
  user_id      text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  normalized   text NOT NULL,
  query        text NOT NULL,
  uses         integer NOT NULL DEFAULT 1,
  last_used_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, normalized)
);

CREATE INDEX search_queries_prefix_idx ON search_queries (user_id, normalized text_pattern_ops);

-- Suggestions complete subjects and senders by prefix.
CREATE INDEX emails_subject_prefix_idx ON emails (user_id, lower(subject) text_pattern_ops);
CREATE INDEX emails_from_prefix_idx ON emails (user_id, lower(from_address) text_pattern_ops);
