-- The text read from a document attachment (a PDF, a Word file), once per distinct file: a PDF costs tens
-- of milliseconds of CPU a page, too much to repeat for each search index pass or each request.
-- Keyed by the blob (the attachment's SHA-256), so the same file in many emails is read once, and
-- gone with the blob when no email holds it any more. `reader` names what read it (a newer reader
-- reads again); an unreadable file keeps why (`reason`), so a damaged or hostile one is tried once.
CREATE TABLE document_texts (
  checksum  text PRIMARY KEY REFERENCES blobs (sha256) ON DELETE CASCADE,
  format    text NOT NULL CHECK (format IN ('pdf', 'docx')),
  reader    text NOT NULL,
  text      text NOT NULL DEFAULT '',
  pages     integer,
  truncated boolean NOT NULL DEFAULT false,
  reason    text CHECK (reason IN ('encrypted', 'damaged', 'too_large', 'too_complex')),
  read_at   timestamptz NOT NULL DEFAULT now()
);
