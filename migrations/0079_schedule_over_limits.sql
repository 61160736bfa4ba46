-- Received invitations kept before the schedule's size limits (services/schedule/occurrences.ts
-- `unkeepable`: at most 256K characters, 500 dates in RDATE and EXDATE) that may be over them: each is read
-- once more by a worker (Schedule.rewalkKept), which takes one over them off the schedule, as it would not
-- keep it now (each request expanded it: a stranger's 40,000 dates cost every request 1.3 s).
INSERT INTO calendar_rewalk (mailbox_id, uid)
SELECT mailbox_id, uid FROM calendar_entries
WHERE role = 'attendee' AND (length(calendar) > 262144 OR calendar ~* '(RDATE|EXDATE)')
ON CONFLICT DO NOTHING;
