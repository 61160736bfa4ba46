/**
 * The outbox's backlog on `/metrics` (services/bus/outbox-backlog.ts): a publication a change staged
 * and the bus never took (its node died before publishing) is counted in `mailroom_outbox_waiting`,
 * and its wait in `mailroom_outbox_oldest_seconds`, by a process whatever it has done itself. The
 * publication is put in the database before the server starts (the embedded database is the server's
 * alone once it runs), its sweep put off by an hour so that it stays. On PostgreSQL the figures then
 * follow the table to none.
 */
import { PGlite } from "@electric-sql/pglite"
import { vector } from "@electric-sql/pglite-pgvector"
import * as path from "node:path"
import pg from "pg"
import { afterAll, beforeAll, expect, it } from "vitest"
import { scrape } from "../support/metrics.ts"
import { type Backend, createBackend, type Server, startServer } from "../support/server.ts"
import { until } from "../support/wait.ts"

let backend: Backend
let server: Server | undefined

/** Run SQL against the backend's database (the embedded one only while no server holds it). */
const query = async (text: string) => {
  if (backend.env.DATABASE_URL) {
    const db = new pg.Client({ connectionString: backend.env.DATABASE_URL })
    await db.connect()
    await db.query(text)
    await db.end()
  } else {
    const db = await PGlite.create({ dataDir: path.join(backend.env.DATA_DIR!, "pglite"), extensions: { vector } })
    await db.query(text)
    await db.close()
  }
}

beforeAll(async () => {
  backend = await createBackend()
})

afterAll(async () => {
  if (server !== undefined) expect(await server.stop()).toBe(0)
  await backend?.dispose()
})

it("counts what waits in the outbox and how long the oldest has waited", async () => {
  // Staged ten minutes ago by a change whose node died; swept (published again) an hour from now.
  await query(`INSERT INTO outbox (msg_id, subject, data, created_at, attempted_at)
               VALUES ('stranded-1', 'events.test.stranded', '\\x7b7d', now() - interval '10 minutes', now() + interval '1 hour')`)
  server = await startServer(backend.env)
  const metrics = `${server.url}/metrics`
  const seen = await until("the outbox sampled", async () => {
    const now = await scrape(metrics)
    return now.value("mailroom_outbox_waiting") === 1 ? now : undefined
  }, 20_000, 200)
  expect(seen.value("mailroom_outbox_oldest_seconds")).toBeGreaterThanOrEqual(600)
  expect(seen.value("mailroom_outbox_oldest_seconds")).toBeLessThan(700)
  expect(seen.text).toContain("# TYPE mailroom_outbox_waiting gauge")

  if (backend.env.DATABASE_URL) {
    await query("DELETE FROM outbox WHERE msg_id = 'stranded-1'")
    const empty = await until("the outbox sampled empty", async () => {
      const now = await scrape(metrics)
      return now.value("mailroom_outbox_waiting") === 0 ? now : undefined
    }, 20_000, 200)
    expect(empty.exported("mailroom_outbox_oldest_seconds")).toBe(true)
    expect(empty.value("mailroom_outbox_oldest_seconds")).toBe(0)
  }
}, 120_000)
