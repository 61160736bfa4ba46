-- Drafts answering mail whose From named no address (`<<not an address>>`) took what it held for
-- their To, before replies.ts kept such out (it keeps only addresses mail can be sent to): a draft
-- holding one could not be read, and every list of its account's drafts answered 500. Those
-- recipients are taken out of the drafts not yet sent; the person approving one names whom it goes to.
WITH fields (name) AS (VALUES ('to'), ('cc'), ('bcc'))
UPDATE drafts d
SET content = d.content || (
  SELECT jsonb_object_agg(f.name, (
    SELECT coalesce(jsonb_agg(i.item ORDER BY i.position), '[]'::jsonb)
    FROM jsonb_array_elements(d.content -> f.name) WITH ORDINALITY AS i (item, position)
    WHERE coalesce(i.item ->> 'address', i.item #>> '{}') ~ '^[^@[:space:]"<>(),;]+@[^@[:space:]"<>(),;]+$'
  ))
  FROM fields f
  WHERE jsonb_typeof(d.content -> f.name) = 'array'
)
WHERE d.status <> 'sent' AND EXISTS (
  SELECT 1
  FROM fields f, jsonb_array_elements(CASE WHEN jsonb_typeof(d.content -> f.name) = 'array' THEN d.content -> f.name ELSE '[]'::jsonb END) AS i (item)
  WHERE coalesce(i.item ->> 'address', i.item #>> '{}') !~ '^[^@[:space:]"<>(),;]+@[^@[:space:]"<>(),;]+$'
);
