-- Inbound trust (issue 20): the SPF, DKIM, DMARC and ARC verdicts the SMTP node computed when it
-- received the message, and the one RFC 8601 Authentication-Results value summing them up. Mail
-- received before the checks existed, and sent mail, has neither (NULL): nothing was checked.
ALTER TABLE emails ADD COLUMN authentication jsonb;
ALTER TABLE emails ADD COLUMN authentication_results text;
-- rspamd's verdict (status, score, action, symbols) when RSPAMD_URL is set; NULL when nothing scored it.
ALTER TABLE emails ADD COLUMN spam jsonb;
