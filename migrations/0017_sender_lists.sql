-- Allow and block lists (issue 20, item 3; services/mail/sender-lists.ts): per account (mailbox_id
-- null) and per mailbox. An entry is stored normalised (lower case, ASCII domains): an address, a
-- domain, or `*.domain` for every subdomain of it.

CREATE TABLE sender_list_entries (
  user_id    text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  mailbox_id text REFERENCES mailboxes (id) ON DELETE CASCADE,
  list       text NOT NULL CHECK (list IN ('allow', 'block')),
  entry      text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  -- An entry is on a list once; the account's list is the one without a mailbox.
  UNIQUE NULLS NOT DISTINCT (user_id, list, mailbox_id, entry)
);

-- RCPT's question "does any entry of this account name one of the sender's forms?": one probe per form.
CREATE INDEX sender_list_entries_match_idx ON sender_list_entries (user_id, entry);
-- Listing a list newest first.
CREATE INDEX sender_list_entries_page_idx ON sender_list_entries (user_id, list, mailbox_id, created_at);
