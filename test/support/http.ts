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
  get: <T = any>(path: string, options?: RequestOptions) => request<T>(baseUrl, "GET", path, options),
  post: <T = any>(path: string, options?: RequestOptions) => request<T>(baseUrl, "POST", path, options),
  patch: <T = any>(path: string, options?: RequestOptions) => request<T>(baseUrl, "PATCH", path, options),
  delete: <T = any>(path: string, options?: RequestOptions) => request<T>(baseUrl, "DELETE", path, options)
})

export type Client = ReturnType<typeof client>

let counter = 0
/** A user that exists: registered and logged in. */
export const signUp = async (api: Client, overrides: { email?: string; password?: string; name?: string } = {}) => {
  const email = overrides.email ?? `agent-${Date.now().toString(36)}-${counter++}-${Math.random().toString(36).slice(2, 8)}@example.com`
  const password = overrides.password ?? "correct horse battery"
  const name = overrides.name ?? "Test Agent"
  const registered = await api.post("/api/auth/register", { body: { email, password, name } })
  if (registered.status !== 201) throw new Error(`register failed: ${registered.status} ${registered.text}`)
  const login = await api.post("/api/auth/login", { body: { email, password } })
  if (login.status !== 200) throw new Error(`login failed: ${login.status} ${login.text}`)
  return {
    email,
    password,
    name,
    userId: registered.body.data.userId as string,
    accessToken: login.body.data.accessToken as string,
    refreshToken: login.body.data.refreshToken as string,
    cookie: login.headers.get("set-cookie") ?? ""
  }
}

/** A user with an API key. */
export const withApiKey = async (api: Client, overrides: Parameters<typeof signUp>[1] = {}) => {
  const user = await signUp(api, overrides)
  const created = await api.post("/v1/api-keys", { bearer: user.accessToken, body: { name: "test key" } })
  if (created.status !== 201) throw new Error(`key failed: ${created.status} ${created.text}`)
  return { ...user, apiKey: created.body.data.apiKey as string, keyId: created.body.data.keyId as string }
}

export const isoMillis = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
