/**
 * A restart keeps users, keys and sessions; SIGTERM lets in-flight requests finish and exits 0.
 * Runs on the embedded database (PGlite under DATA_DIR) and on PostgreSQL.
 */
import { PGlite } from "@electric-sql/pglite"
import { vector } from "@electric-sql/pglite-pgvector"
import * as path from "node:path"
import pg from "pg"
import { afterAll, beforeAll, expect, it } from "vitest"
import { withApiKey } from "../support/accounts.ts"
import { type Backend, createBackend, startServer } from "../support/server.ts"
import { anonymous, withKey, withToken } from "../support/typed-client.ts"

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
  const user = await withApiKey(first.url)
  const expiring = await withToken(first.url, user).POST("/v1/api-keys", { body: { name: "short-lived", expirationDays: 1 } })
  expect(expiring.response.status).toBe(201)

  // A request in flight when SIGTERM arrives still gets its answer; then the process exits 0.
  const inFlight = anonymous(first.url).POST("/api/auth/login", { body: { email: user.email, password: user.password } })
  await new Promise((resolve) => setTimeout(resolve, 30))
  const exitCode = first.stop()
  expect((await inFlight).response.status).toBe(200)
  expect(await exitCode).toBe(0)

  // Age one key past its expiry, as a day passing would.
  await query("UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = $1", [expiring.data!.data.keyId])

  const second = await startServer(backend.env)
  try {
    expect((await withKey(second.url, user).GET("/v1/api-keys")).response.status).toBe(200)
    expect((await withToken(second.url, user).GET("/v1/api-keys")).response.status).toBe(200)
    const refreshed = await anonymous(second.url).POST("/api/auth/refresh", { body: { refreshToken: user.refreshToken } })
    expect(refreshed.response.status).toBe(200)
    const login = await anonymous(second.url).POST("/api/auth/login", { body: { email: user.email, password: user.password } })
    expect(login.response.status).toBe(200)
    const expired = await withKey(second.url, expiring.data!.data).GET("/v1/api-keys")
    expect(expired.response.status).toBe(401)
    expect(expired.error?.error).toEqual({ code: "UNAUTHORIZED", message: "Invalid, expired or revoked API key" })
  } finally {
    expect(await second.stop()).toBe(0)
  }
  // Two starts, two drains and three scrypt checks: ~45 s on a loaded 2-core machine, past the default 60 s once.
}, 150_000)
