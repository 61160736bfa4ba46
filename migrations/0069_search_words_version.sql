-- Which version of reading words (services/search/documents.ts, WORDS_VERSION) indexed each email's
-- words. Mail indexed before the version was kept is version 1: its accents were folded in place
-- (0067) but its Chinese, Japanese and Korean runs were not cut in pairs, nor set apart from Latin
-- letters written against them. `mailroom reindex` reads such mail's words again, without embedding
-- it again, and the index actor says at start how much there is.
ALTER TABLE search_documents ADD COLUMN words_version smallint NOT NULL DEFAULT 1;
