-- A reply or forward draft made from now on holds its recipients and subject (filled from the email it
-- answers, then the person's to edit): it is sent exactly as it stands. One made before (false) names
-- none of its own and is answered as the reply and forward routes answer, as it always was.
ALTER TABLE drafts ADD COLUMN filled boolean NOT NULL DEFAULT false;
