import * as accounts from "./accounts.ts"

/** A small HTTP client for black-box tests: real requests, raw status, headers and JSON body. */
export interface Reply<T = any> {
  readonly status: number
  readonly headers: Headers
  readonly body: T
  readonly text: string
}

export interface RequestOptions {
  readonly body?: unknown
  /** Sent as is (not JSON-encoded). */
  readonly raw?: string | Uint8Array
  readonly headers?: Record<string, string>
  readonly apiKey?: string
  readonly bearer?: string
}

export const request = async <T = any>(baseUrl: string, method: string, path: string, options: RequestOptions = {}): Promise<Reply<T>> => {
  const headers: Record<string, string> = { ...options.headers }
  if (options.apiKey) headers["x-api-key"] = options.apiKey
  if (options.bearer) headers["authorization"] = `Bearer ${options.bearer}`
  let body: string | Uint8Array | undefined
  if (options.raw !== undefined) body = options.raw
  else if (options.body !== undefined) {
    body = JSON.stringify(options.body)
    headers["content-type"] ??= "application/json"
  }
  const response = await fetch(`${baseUrl}${path}`, { method, headers, redirect: "manual", ...(body !== undefined ? { body } : {}) })
  const text = await response.text()
  let parsed: unknown = undefined
  try {
    parsed = text.length > 0 ? JSON.parse(text) : undefined
  } catch {
    parsed = undefined
  }
  return { status: response.status, headers: response.headers, body: parsed as T, text }
}

export const client = (baseUrl: string) => ({
  url: baseUrl,
  get: <T = any>(path: string, options?: RequestOptions) => request<T>(baseUrl, "GET", path, options),
  post: <T = any>(path: string, options?: RequestOptions) => request<T>(baseUrl, "POST", path, options),
  patch: <T = any>(path: string, options?: RequestOptions) => request<T>(baseUrl, "PATCH", path, options),
  delete: <T = any>(path: string, options?: RequestOptions) => request<T>(baseUrl, "DELETE", path, options)
})

export type Client = ReturnType<typeof client>

/** A user that exists: registered and logged in. */
export const signUp = (api: Client, overrides: Parameters<typeof accounts.signUp>[1] = {}) => accounts.signUp(api.url, overrides)

/** A user with an API key. */
export const withApiKey = (api: Client, overrides: Parameters<typeof accounts.signUp>[1] = {}) => accounts.withApiKey(api.url, overrides)

export const isoMillis = accounts.isoMillis
