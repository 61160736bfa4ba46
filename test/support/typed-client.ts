/**
 * The typed client (`mailroom/fetch-client`) as black-box suites hold it: one per kind of caller,
 * plus two things a suite sends that the contract forbids, on purpose, to see them refused: a body
 * of the wrong shape and bytes that are not JSON (a body in another media type goes through
 * raw-http.ts). Everything else a suite sends and reads is typed from the OpenAPI document, so a test
 * that drifts from the contract stops compiling.
 */
import { createClient, type MailroomFetchClient } from "../../packages/client/src/fetch-client.ts"

export type { MailroomFetchClient }

/** A caller with an API key (sent as `X-API-Key`). */
export const withKey = (baseUrl: string, user: { readonly apiKey: string }): MailroomFetchClient =>
  createClient({ baseUrl, apiKey: user.apiKey })

/** A caller with a login's access token (sent as `Authorization: Bearer`). */
export const withToken = (baseUrl: string, user: { readonly accessToken: string }): MailroomFetchClient =>
  createClient({ baseUrl, accessToken: user.accessToken })

/** A caller with no credential at all. */
export const anonymous = (baseUrl: string): MailroomFetchClient => createClient({ baseUrl })

/**
 * A body (or query) the contract does not allow — a number where a string goes, an array, no body
 * where one is required — sent on purpose to see the server refuse it. The suites' one way past the
 * types, so each such request is visible as one.
 */
export const offContract = (value: unknown): never => value as never

/** Request options that send `text` as the body, as is, labelled JSON: bytes that do not parse. */
export const rawJsonBody = (text: string) => ({ body: offContract(text), bodySerializer: () => text })

/** Request options that carry a dashboard session: its cookie, sent from `origin` (a page of ours, or another site's). */
export const sessionFrom = (user: { readonly cookie: string }, origin: string) => ({
  headers: { cookie: user.cookie.split(";")[0]!, origin }
})
