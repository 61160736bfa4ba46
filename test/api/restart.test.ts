/**
 * A restart keeps users, keys and sessions; SIGTERM lets in-flight requests finish and exits 0.
 * Runs on the embedded database (PGlite under DATA_DIR) and on PostgreSQL.
 */
import { PGlite } from "@electric-sql/pglite"
import { vector } from "@electric-sql/pglite-pgvector"
import * as path from "node:path"
import pg from "pg"
import { afterAll, beforeAll, expect, it } from "vitest"
import { type Backend, createBackend, startServer } from "../support/server.ts"
import { client, withApiKey } from "../support/http.ts"

let backend: Backend

beforeAll(async () => {
  backend = await createBackend()
})

afterAll(async () => {
  await backend?.dispose()
})

/** Run SQL against the backend's database while no server holds it. */
const query = async (text: string, params: Array<unknown>) => {
  if (backend.env.DATABASE_URL) {
    const db = new pg.Client({ connectionString: backend.env.DATABASE_URL })
    await db.connect()
    await db.query(text, params)
    await db.end()
  } else {
    const db = await PGlite.create({ dataDir: path.join(backend.env.DATA_DIR!, "pglite"), extensions: { vector } })
    await db.query(text, params)
    await db.close()
  }
}

it("keeps users, API keys and sessions across a restart, and expired keys stay refused", async () => {
  const first = await startServer(backend.env)
  const api = client(first.url)
  const user = await withApiKey(api)
  const expiring = await api.post("/v1/api-keys", { bearer: user.accessToken, body: { name: "short-lived", expirationDays: 1 } })
  expect(expiring.status).toBe(201)

  // A request in flight when SIGTERM arrives still gets its answer; then the process exits 0.
  const inFlight = api.post("/api/auth/login", { body: { email: user.email, password: user.password } })
  await new Promise((resolve) => setTimeout(resolve, 30))
  const exitCode = first.stop()
  expect((await inFlight).status).toBe(200)
  expect(await exitCode).toBe(0)

  // Age one key past its expiry, as a day passing would.
  await query("UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = $1", [expiring.body.data.keyId])

  const second = await startServer(backend.env)
  try {
    const again = client(second.url)
    expect((await again.get("/v1/api-keys", { apiKey: user.apiKey })).status).toBe(200)
    expect((await again.get("/v1/api-keys", { bearer: user.accessToken })).status).toBe(200)
    const refreshed = await again.post("/api/auth/refresh", { body: { refreshToken: user.refreshToken } })
    expect(refreshed.status).toBe(200)
    const login = await again.post("/api/auth/login", { body: { email: user.email, password: user.password } })
    expect(login.status).toBe(200)
    const expired = await again.get("/v1/api-keys", { apiKey: expiring.body.data.apiKey })
    expect(expired.status).toBe(401)
    expect(expired.body.error).toEqual({ code: "UNAUTHORIZED", message: "Invalid, expired or revoked API key" })
  } finally {
    expect(await second.stop()).toBe(0)
  }
  // Two starts, two drains and three scrypt checks: ~45 s on a loaded 2-core machine, past the default 60 s once.
}, 150_000)
