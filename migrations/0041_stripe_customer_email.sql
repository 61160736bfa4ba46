-- The email the account's Stripe customer was last given (layers/stripe-billing.ts): Stripe mails receipts and
-- invoices there, so a change of the account's email is passed on, and where that failed, passed on at the next
-- checkout or portal visit, when the two differ. NULL for customers made before this column: given once then.
ALTER TABLE subscriptions ADD COLUMN stripe_customer_email text;
