-- Mail is found by its words before it is embedded (issue 18): the words stage
-- (services/search/word-indexer.ts) stores an email's document, postings and lexicon counts at
-- ingest's pace, and the index stage names the model once the vectors are stored. A document
-- without a model is searchable by its words only, so far; `chunks` and `processing_ms` are 0 until
-- then. Reindexing (`model IS DISTINCT FROM` the current one) embeds such mail too.
ALTER TABLE search_documents ALTER COLUMN model DROP NOT NULL;
