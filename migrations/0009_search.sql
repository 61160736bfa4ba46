-- Search (SPEC "Search"): what the index actor made searchable, past queries for suggestions, and
-- the indexes suggestions read. The vectors themselves live in the VectorIndex (Qdrant, or pgvector
-- tables the adapter creates per embedding model, since this database may lack the extension).

-- One row per indexed email: its full-text document and the model its vectors were made with.
-- Written after the vectors, so a row here means the email is searchable both ways.
CREATE TABLE search_documents (
  email_id      text PRIMARY KEY REFERENCES emails (id) ON DELETE CASCADE,
  user_id       text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  mailbox_id    text NOT NULL REFERENCES mailboxes (id) ON DELETE CASCADE,
  model         text NOT NULL,
  chunks        integer NOT NULL,
  -- Subject (weight A) and body with plain-text attachments (weight B), English stemming.
  document      tsvector NOT NULL,
  -- Lexemes in the document, counting repeats: the length full-text ranking normalises by.
  length        integer NOT NULL,
  processing_ms integer NOT NULL,
  indexed_at    timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX search_documents_document_idx ON search_documents USING gin (document);
CREATE INDEX search_documents_user_idx ON search_documents (user_id, mailbox_id) INCLUDE (length);
-- Reindexing finds the emails not yet embedded with the current model.
CREATE INDEX search_documents_model_idx ON search_documents (model);

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
