/**
 * The reasons the send path (services/outbound/send.ts) refuses a message, declared on every endpoint
 * that sends: sends, replies and forwards, drafts sent, invitations answered, meetings' invitations.
 */
import type { HttpApiEndpoint } from "@effect/platform"
import { RecipientSuppressed, SenderDomainUnverified, SendQuotaReached, StorageQuotaReached } from "../../../services/errors.ts"
import { envelope } from "../errors.ts"

export const refusingSends = <
  Name extends string,
  Method extends HttpApiEndpoint.HttpApiEndpoint.AnyWithProps["method"],
  Path,
  UrlParams,
  Payload,
  Headers,
  Success,
  Error,
  R,
  RE
>(endpoint: HttpApiEndpoint.HttpApiEndpoint<Name, Method, Path, UrlParams, Payload, Headers, Success, Error, R, RE>) =>
  endpoint
    .addError(envelope(SenderDomainUnverified))
    .addError(envelope(SendQuotaReached))
    .addError(envelope(StorageQuotaReached))
    .addError(envelope(RecipientSuppressed))
