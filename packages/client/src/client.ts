/**
 * The typed client for Effect users: `HttpApiClient` over the very contract the server is built
 * from, so every route, payload, answer and named error is typed as the server declares it.
 *
 *   const mailroom = yield* makeClient({ baseUrl: "http://localhost:3000", apiKey })
 *   const { mailboxes } = yield* mailroom.mailboxes.list({ urlParams: { limit: 100 } })
 *
 * Provide an HttpClient (e.g. `FetchHttpClient.layer` from @effect/platform).
 */
import { HttpApiClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { Effect } from "effect"
import { MailroomApi } from "../../../src/http/api.ts"

export { MailroomApi }

export interface ClientOptions {
  /** `{app_url}`, e.g. http://localhost:3000 (routes carry their own /v1 or /api prefix). */
  readonly baseUrl: string
  /** Sent as `X-API-Key` on every request, when given. */
  readonly apiKey?: string | undefined
  /** Sent as `Authorization: Bearer` (an access token from login), when given and no key is. */
  readonly accessToken?: string | undefined
}

export const makeClient = (options: ClientOptions) =>
  HttpApiClient.make(MailroomApi, {
    baseUrl: options.baseUrl,
    transformClient: HttpClient.mapRequest((request) =>
      options.apiKey !== undefined
        ? HttpClientRequest.setHeader(request, "x-api-key", options.apiKey)
        : options.accessToken !== undefined
        ? HttpClientRequest.bearerToken(request, options.accessToken)
        : request
    )
  })

export type MailroomClient = Effect.Effect.Success<ReturnType<typeof makeClient>>
