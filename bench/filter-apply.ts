/**
 * What running a filter over mail already received costs (`POST /v1/api/filters/{id}/apply`,
 * services/mail/filters.ts `apply`), in process over a mailbox of EMAILS received emails (the route's
 * APPLY_LIMIT, 10,000), written straight into the database: a dry run and a real run of three filters
 * (a sender's third of the mail labelled, a phrase in the body of a tenth, every email marked read),
 * each beside the baseline measured in the same run: the same emails read as an agent lists them
 * (Emails.list, 100 a page, in stored order). Meanwhile another caller runs a one-row statement every
 * 10 ms on the same database: its slowest answer says how long the run kept others waiting (the
 * embedded database has one connection; the process one event loop). Also printed: this process's CPU
 * time (user + system, every thread: on the embedded default that is the database's work too), which a
 * busy machine moves less than the wall time.
 *
 *   npm run bench:filter-apply                      # embedded (PGlite)
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npm run bench:filter-apply
 *   EMAILS=5000 npm run bench:filter-apply
 */
import { SqlClient } from "@effect/sql"
import { Effect, Fiber, Layer, Redacted } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as MemoryBus from "../layers/memory-bus.ts"
import * as Pglite from "../layers/pglite.ts"
import * as Postgres from "../layers/postgres.ts"
import { DependencyHealth } from "../services/health/dependency-health.ts"
import { Emails } from "../services/mail/emails.ts"
import { Filters } from "../services/mail/filters.ts"
import { migrate } from "../src/database.ts"
import { insertMailbox, storeBlob } from "../test/support/seed-mail.ts"
import { createDatabase } from "../test/support/services.ts"
import { insertUser } from "../test/support/users.ts"

const EMAILS = Number(process.env.EMAILS ?? 10_000)
const adminUrl = process.env.DATABASE_URL

const BODY = "Hello,\r\n\r\nThanks for the note. Here is what we agreed on the call, point by point, so nobody has to " +
  "remember it later.\r\n\r\n".repeat(1) + "A line of ordinary text that fills out the body like mail does. ".repeat(20)

const main = async () => {
  const database = adminUrl === undefined ? undefined : await createDatabase(adminUrl)
  const dataDir = database === undefined ? fs.mkdtempSync(path.join(os.tmpdir(), "bench-filter-apply-")) : undefined
  const connection = database === undefined
    ? Pglite.layer({ dataDir: dataDir! })
    : Postgres.layer({ url: Redacted.make(database.url), maxConnections: 10 })
  const services = Layer.mergeAll(Filters.Default, Emails.Default).pipe(
    Layer.provideMerge(MemoryBus.layer),
    Layer.provideMerge(DependencyHealth.Default),
    Layer.provideMerge(Layer.effectDiscard(migrate)),
    Layer.provideMerge(connection)
  )
  const program = Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const filters = yield* Filters
    const emails = yield* Emails
    const mailbox = yield* insertMailbox(yield* insertUser("enterprise"))
    const userId = mailbox.owner.userId
    const sha = yield* storeBlob(new TextEncoder().encode("Subject: bench\r\n\r\n"))
    yield* sql`
      INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, to_addresses, sent_at,
                          received_at, mail_from, rcpt_to, headers, text_body, has_attachments, raw_sha256, size, labels)
      SELECT 'eml_bench_' || g, ${mailbox.mailboxId}, ${userId}, '<bench' || g || '@t>', 'thr_bench_' || g,
             'Bench ' || g, CASE WHEN g % 3 = 0 THEN 'billing@acme.test' ELSE 'person' || (g % 50) || '@else.test' END,
             ARRAY[${mailbox.address}], now(), now() - (${EMAILS} - g) * interval '1 second', 'b@t', ${mailbox.address},
             jsonb_build_object('from', CASE WHEN g % 3 = 0 THEN 'Billing <billing@acme.test>' ELSE 'Person <person' || (g % 50) || '@else.test>' END),
             CASE WHEN g % 10 = 0 THEN ${BODY} || ' Your invoice is attached.' ELSE ${BODY} END, false, ${sha}, 2000,
             ARRAY['inbound', 'unread']
      FROM generate_series(1, ${EMAILS}) g`
    yield* sql`ANALYZE emails`

    /** `run` timed, while another caller's one-row statement every 10 ms is timed too. */
    const timed = <A, E>(run: Effect.Effect<A, E>) =>
      Effect.gen(function*() {
        const waits: Array<number> = []
        const prober = yield* Effect.fork(Effect.forever(Effect.gen(function*() {
          const started = performance.now()
          yield* sql`SELECT 1`
          waits.push(performance.now() - started)
          yield* Effect.sleep("10 millis")
        })))
        const started = performance.now()
        const cpu = process.cpuUsage()
        const result = yield* run
        const ms = performance.now() - started
        const used = process.cpuUsage(cpu)
        yield* Fiber.interrupt(prober)
        return { result, ms, cpuMs: (used.user + used.system) / 1000, probeMax: Math.max(0, ...waits), probes: waits.length }
      })

    const listAll = Effect.gen(function*() {
      let after: string | undefined
      let read = 0
      for (;;) {
        const { emails: page } = yield* emails.list(userId, mailbox.mailboxId, { limit: 100, offset: 0 }, { field: "received_at", direction: "asc" },
          after === undefined ? {} : { after })
        read += page.length
        if (page.length < 100) return read
        after = page[page.length - 1]!.email_id
      }
    })
    yield* listAll // warm-up
    const baseline = yield* timed(listAll)
    const line = (name: string, t: { ms: number; cpuMs: number; probeMax: number; probes: number }, what: string) =>
      console.log(`${name.padEnd(40)} ${(t.ms / 1000).toFixed(2).padStart(7)} s  ${(t.ms / baseline.ms).toFixed(2).padStart(6)}× the list  ` +
        `CPU ${(t.cpuMs / 1000).toFixed(2).padStart(6)} s (${(t.cpuMs / baseline.cpuMs).toFixed(2)}×)  ` +
        `other caller's slowest statement ${t.probeMax.toFixed(0).padStart(5)} ms (${t.probes})  ${what}`)
    console.log(`Filter apply over ${EMAILS} received emails, ${database === undefined ? "embedded (PGlite)" : "PostgreSQL"}`)
    line(`baseline: list ${baseline.result} emails`, baseline, "")

    const cases = [
      { name: "from acme.test +billing", conditions: { from: ["acme.test"] }, actions: { add_labels: ["billing"] } },
      { name: "body 'invoice' +invoices", conditions: { body_contains: ["invoice is attached"] }, actions: { add_labels: ["invoices"] } },
      { name: "subject 'bench' -unread", conditions: { subject_contains: ["bench"] }, actions: { remove_labels: ["unread"] } }
    ] as const
    for (const c of cases) {
      const created = yield* filters.create(userId, { conditions: c.conditions, actions: c.actions })
      const dry = yield* timed(filters.apply(userId, created.filter_id, true))
      line(`${c.name}, dry run`, dry, JSON.stringify({ ...dry.result, filter_id: undefined }))
      const real = yield* timed(filters.apply(userId, created.filter_id, false))
      line(`${c.name}, real run`, real, JSON.stringify({ ...real.result, filter_id: undefined }))
    }
    const events = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM bus_messages WHERE msg_id LIKE 'email.labels_changed:%'`
    console.log(`email.labels_changed published: ${events[0]!.n}`)
  })
  try {
    await Effect.runPromise(program.pipe(Effect.provide(services), Effect.scoped))
  } finally {
    await database?.drop()
    if (dataDir !== undefined) fs.rmSync(dataDir, { recursive: true, force: true })
  }
}

await main()
