/**
 * Verifying Mailroom's webhook deliveries: `verifyWebhook` checks both signatures (X-Service-Signature
 * and Standard Webhooks' webhook-signature) in constant time and the timestamp's age.
 */
export { type VerifyInput, verifyServiceSignature, verifyWebhook } from "../../../services/webhooks/signatures.ts"
