/**
 * The typed client for everyone else: openapi-fetch over types generated from Mailroom's OpenAPI
 * document (`npm run gen:client`). Promise-based; every path, parameter, body and answer is typed.
 *
 *   const mailroom = createClient({ baseUrl: "http://localhost:3000", apiKey })
 *   const { data, error } = await mailroom.GET("/v1/api/mailboxes")
 */
import createFetchClient, { type Client } from "openapi-fetch"
import type { paths } from "./openapi.ts"

export type { components, operations, paths } from "./openapi.ts"

export interface ClientOptions {
  /** `{app_url}`, e.g. http://localhost:3000. */
  readonly baseUrl: string
  /** Sent as `X-API-Key` on every request, when given. */
  readonly apiKey?: string | undefined
  /** Sent as `Authorization: Bearer` (an access token from login), when given and no key is. */
  readonly accessToken?: string | undefined
  /** A fetch of your own (tests, proxies); the global one otherwise. */
  readonly fetch?: typeof globalThis.fetch
}

export type MailroomFetchClient = Client<paths>

export const createClient = (options: ClientOptions): MailroomFetchClient => {
  const headers: Record<string, string> = {}
  if (options.apiKey !== undefined) headers["x-api-key"] = options.apiKey
  else if (options.accessToken !== undefined) headers["authorization"] = `Bearer ${options.accessToken}`
  return createFetchClient<paths>({ baseUrl: options.baseUrl, headers, ...(options.fetch ? { fetch: options.fetch } : {}) })
}
