-- Words are indexed and looked up without the diacritics of Latin letters (services/search/documents.ts,
-- foldAccents): "munchen" finds "München", "cafe" finds "café". Mail indexed before holds lexemes
-- with accents, which no query now asks for: they are folded here in place.
--
-- Its words are gone, only their stems are left, and a word is now folded before it is stemmed:
-- "résumé" was held as résumé and is now stemmed as "resume" is (resum), "défense" was held as
-- défens and is now defens. So a folded lexeme is held twice, as folded (defens, resume) and as
-- its own stem (defen, resum) where that differs: one of them is what a query now asks for in all
-- but rare cases. `mailroom reindex --all` indexes such mail exactly. A lexeme that folds to a stop
-- word ("à") goes. Postings that meet another of the same email under one lexeme ("café" and
-- "cafe") become one, their frequencies added; the lexicon counts the lexemes it changed again.

-- Lexemes are lower case: the lower-case letters with diacritics (U+00C0-U+024F, U+1E00-U+1EFF)
-- and those Unicode does not decompose, as foldAccents folds them.
CREATE OR REPLACE FUNCTION pg_temp.search_fold(word text) RETURNS text LANGUAGE sql IMMUTABLE STRICT
RETURN replace(replace(replace(replace(
  translate(word,
    'àáâãäåçèéêëìíîïñòóôõöùúûüýÿāăąćĉċčďēĕėęěĝğġģĥĩīĭįĵķĺļľńņňōŏőŕŗřśŝşšţťũūŭůűųŵŷźżžơưǎǐǒǔǖǘǚǜǟǡǧǩǫǭǰǵǹǻȁȃȅȇȉȋȍȏȑȓȕȗșțȟȧȩȫȭȯȱȳḁḃḅḇḉḋḍḏḑḓḕḗḙḛḝḟḡḣḥḧḩḫḭḯḱḳḵḷḹḻḽḿṁṃṅṇṉṋṍṏṑṓṕṗṙṛṝṟṡṣṥṧṩṫṭṯṱṳṵṷṹṻṽṿẁẃẅẇẉẋẍẏẑẓẕẖẗẘẙạảấầẩẫậắằẳẵặẹẻẽếềểễệỉịọỏốồổỗộớờởỡợụủứừửữựỳỵỷỹøłđðħıŧ',
    'aaaaaaceeeeiiiinooooouuuuyyaaaccccdeeeeegggghiiiijklllnnnooorrrssssttuuuuuuwyzzzouaiouuuuuaagkoojgnaaaeeiioorruusthaeooooyabbbcdddddeeeeefghhhhhiikkkllllmmmnnnnoooopprrrrsssssttttuuuuuvvwwwwwxxyzzzhtwyaaaaaaaaaaaaeeeeeeeeiioooooooooooouuuuuuuyyyyolddhit'),
  'ß', 'ss'), 'æ', 'ae'), 'œ', 'oe'), 'þ', 'th');

-- Each lexeme with accents, once per lexeme it becomes (none for a stop word: a row of NULL).
CREATE TEMPORARY TABLE search_refolded ON COMMIT DROP AS
  SELECT DISTINCT l.user_id, l.lexeme AS written, t.lexeme
  FROM search_lexicon l
  CROSS JOIN LATERAL (SELECT pg_temp.search_fold(l.lexeme) AS folded) AS f
  CROSS JOIN LATERAL (SELECT tsvector_to_array(to_tsvector('english', f.folded)) AS stems) AS s
  LEFT JOIN LATERAL unnest(CASE cardinality(s.stems)
    WHEN 0 THEN ARRAY[]::text[]
    WHEN 1 THEN ARRAY[f.folded, s.stems[1]]
    ELSE ARRAY[f.folded]
  END) AS t (lexeme) ON true
  WHERE octet_length(l.lexeme) <> char_length(l.lexeme) AND f.folded <> l.lexeme;

WITH moved AS (
  DELETE FROM search_terms p USING (SELECT DISTINCT user_id, written FROM search_refolded) AS r
  WHERE p.user_id = r.user_id AND p.lexeme = r.written
  RETURNING p.user_id, p.lexeme, p.email_id, p.doc, p.mailbox_id, p.frequency, p.length
)
INSERT INTO search_terms AS p (user_id, lexeme, email_id, doc, mailbox_id, frequency, length)
SELECT m.user_id, r.lexeme, m.email_id, min(m.doc), min(m.mailbox_id), sum(m.frequency), min(m.length)
FROM moved m JOIN search_refolded r ON r.user_id = m.user_id AND r.written = m.lexeme AND r.lexeme IS NOT NULL
GROUP BY m.user_id, r.lexeme, m.email_id
ON CONFLICT (user_id, lexeme, email_id) DO UPDATE SET frequency = p.frequency + EXCLUDED.frequency;

DELETE FROM search_lexicon l USING search_refolded r WHERE l.user_id = r.user_id AND l.lexeme = r.written;

INSERT INTO search_lexicon AS l (user_id, lexeme, documents)
SELECT p.user_id, p.lexeme, count(*) FROM search_terms p
WHERE (p.user_id, p.lexeme) IN (SELECT user_id, lexeme FROM search_refolded WHERE lexeme IS NOT NULL)
GROUP BY p.user_id, p.lexeme
ON CONFLICT (user_id, lexeme) DO UPDATE SET documents = EXCLUDED.documents;
