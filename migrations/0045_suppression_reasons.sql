-- Why an address is suppressed: it bounced (the mta, or a bounce report), its owner unsubscribed
-- (the one-click link of a sent message, RFC 8058), its owner reported the mail as spam (a complaint
-- that came back to the message's bounce address, RFC 5965), or the account added it by hand.
ALTER TABLE suppressions DROP CONSTRAINT suppressions_reason_check;
ALTER TABLE suppressions ADD CONSTRAINT suppressions_reason_check
  CHECK (reason IN ('bounced', 'unsubscribed', 'complained', 'manual'));
