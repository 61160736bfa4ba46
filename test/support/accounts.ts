/** The accounts every black-box suite starts from, made through the typed client as a user would. */
import { anonymous, withToken } from "./typed-client.ts"

let counter = 0
/** A user that exists: registered and logged in. */
export const signUp = async (baseUrl: string, overrides: { email?: string; password?: string; name?: string } = {}) => {
  const email = overrides.email ?? `agent-${Date.now().toString(36)}-${counter++}-${Math.random().toString(36).slice(2, 8)}@example.com`
  const password = overrides.password ?? "correct horse battery"
  const name = overrides.name ?? "Test Agent"
  const registered = await anonymous(baseUrl).POST("/api/auth/register", { body: { email, password, name } })
  if (registered.response.status !== 201 || !registered.data) {
    throw new Error(`register failed: ${registered.response.status} ${JSON.stringify(registered.error)}`)
  }
  const login = await anonymous(baseUrl).POST("/api/auth/login", { body: { email, password } })
  if (login.response.status !== 200 || !login.data) throw new Error(`login failed: ${login.response.status} ${JSON.stringify(login.error)}`)
  return {
    email,
    password,
    name,
    userId: registered.data.data.userId,
    accessToken: login.data.data.accessToken,
    refreshToken: login.data.data.refreshToken,
    cookie: login.response.headers.get("set-cookie") ?? ""
  }
}

/** A user with an API key. */
export const withApiKey = async (baseUrl: string, overrides: Parameters<typeof signUp>[1] = {}) => {
  const user = await signUp(baseUrl, overrides)
  const created = await withToken(baseUrl, user).POST("/v1/api-keys", { body: { name: "test key" } })
  if (created.response.status !== 201 || !created.data) throw new Error(`key failed: ${created.response.status} ${JSON.stringify(created.error)}`)
  return { ...user, apiKey: created.data.data.apiKey, keyId: created.data.data.keyId }
}

export const isoMillis = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
