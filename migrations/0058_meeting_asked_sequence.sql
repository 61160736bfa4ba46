-- The revision of a meeting that last asked its attendees to answer (services/meetings): the first
-- invitation's, then each new time's. A REPLY naming an older revision answers a question no longer
-- asked (an accept of the old time arriving after the move) and is not kept.
ALTER TABLE meetings ADD COLUMN asked_sequence integer NOT NULL DEFAULT 0;
