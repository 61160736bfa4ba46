/**
 * A database or bus that cannot be reached: 503 SERVICE_UNAVAILABLE with Retry-After (never a 500,
 * never internals), /readyz says so, and service resumes by itself once they are back.
 * PostgreSQL sits behind a TCP proxy the test cuts; the bus is a private nats-server.
 */
import { afterAll, beforeAll, expect, it } from "vitest"
import { createFragileBackend, type FragileBackend } from "../support/fragile-backend.ts"
import type { PrivateNats } from "../support/nats-server.ts"
import { startServer, type Server } from "../support/server.ts"
import type { TcpProxy } from "../support/tcp-proxy.ts"
import { client, withApiKey } from "../support/http.ts"
import { until } from "../support/wait.ts"

let backend: FragileBackend
let proxy: TcpProxy
let nats: PrivateNats
let server: Server

beforeAll(async () => {
  backend = await createFragileBackend()
  ;({ proxy, nats } = backend)
  server = await startServer(backend.env)
})

afterAll(async () => {
  await server?.stop()
  await backend?.dispose()
})

it("answers 503 with Retry-After while PostgreSQL is unreachable, and recovers", async () => {
  const api = client(server.url)
  const user = await withApiKey(api)

  await proxy.cut()
  const reply = await api.get("/v1/api-keys", { apiKey: user.apiKey })
  expect(reply.status).toBe(503)
  expect(reply.body).toEqual({ success: false, error: { code: "SERVICE_UNAVAILABLE", message: expect.any(String) } })
  expect(Number(reply.headers.get("retry-after"))).toBeGreaterThan(0)
  expect(reply.text).not.toMatch(/ECONNREFUSED|SELECT|\.[mc]?[jt]s:\d+/)

  const login = await api.post("/api/auth/login", { body: { email: user.email, password: user.password } })
  expect(login.status).toBe(503)
  const ready = await api.get("/readyz")
  expect(ready.status).toBe(503)
  expect(ready.body.error.code).toBe("SERVICE_UNAVAILABLE")

  await proxy.restore()
  await until("the API answers again", async () => ((await api.get("/v1/api-keys", { apiKey: user.apiKey })).status === 200 ? true : undefined), 20_000, 200)
  expect((await api.get("/readyz")).status).toBe(200)
})

it("reports not ready while the bus is down, and ready again once it is back", async () => {
  const api = client(server.url)
  await nats.stop()
  const ready = await api.get("/readyz")
  expect(ready.status).toBe(503)
  expect(ready.body).toEqual({ success: false, error: { code: "SERVICE_UNAVAILABLE", message: "The bus is not reachable" } })
  expect(ready.headers.get("retry-after")).not.toBeNull()
  await nats.start()
  await until("ready again", async () => ((await api.get("/readyz")).status === 200 ? true : undefined), 20_000, 200)
})
