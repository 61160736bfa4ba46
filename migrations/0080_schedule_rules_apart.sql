-- Events with several repeat rules of mixed kinds (a weekly and a monthly one) were walked from their
-- first repeat when kept, capped at 10,000 repeats, so one begun long ago was kept as ending where the
-- cap stopped (services/schedule/occurrences.ts now walks each such rule alone from near the range:
-- `walkedApart`). Each event with more than one rule is walked once more by a worker
-- (Schedule.rewalkKept), which writes its bounds again.
INSERT INTO calendar_rewalk (mailbox_id, uid)
SELECT mailbox_id, uid FROM calendar_entries
WHERE regexp_count(calendar, '\nRRULE[:;]', 1, 'i') > 1
ON CONFLICT DO NOTHING;
