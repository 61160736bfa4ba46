-- The charset a text attachment's Content-Type named (`text/csv; charset=iso-8859-1`): what its text is
-- read by (services/mail/charsets.ts). Null when it named none, and for mail stored before this.
ALTER TABLE attachments ADD COLUMN charset text;
