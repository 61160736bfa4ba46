-- The plan's send limits held by the database (services/outbound/send.ts): each upsert of a sends
-- counter writes the limit it counts against, and a check refuses a count past it, so that sends
-- accepted at the same moment (each having read the counters below the limit) cannot together
-- overshoot it. NULL: no limit (the enterprise plan's period, and rows written before this).
ALTER TABLE mail_daily_counters ADD COLUMN sent_limit bigint;
ALTER TABLE mail_daily_counters ADD CONSTRAINT mail_daily_counters_sent_within_limit
  CHECK (sent_limit IS NULL OR sent <= sent_limit);
ALTER TABLE usage_counters ADD COLUMN emails_sent_limit bigint;
ALTER TABLE usage_counters ADD CONSTRAINT usage_counters_emails_sent_within_limit
  CHECK (emails_sent_limit IS NULL OR emails_sent <= emails_sent_limit);
