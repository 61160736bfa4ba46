/**
 * The inbound pipeline's stages at their own pace (issue 18): accepting and ingesting in one set of
 * processes (ROLES=api,smtp and ROLES=worker), indexing in another (ROLES=indexer). With the indexer
 * stopped, mail is still accepted and stored and found by its words (the worker's words stage), the
 * index stage's lag grows and is told (`/readyz`, `/metrics`, the worker's log past
 * STAGE_LAG_WARNING); started again, the indexer catches up and every email becomes searchable by
 * meaning. Separate processes need PostgreSQL and NATS: services mode only.
 */
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type FakeOpenAi, fakeOpenAiEnv, startFakeOpenAi } from "../support/fake-openai.ts"
import { type FakeQdrant, startFakeQdrant } from "../support/fake-qdrant.ts"
import { type Box, fresh, newBox } from "../support/mailboxes.ts"
import { scrape } from "../support/metrics.ts"
import { type Backend, createBackend, type Server, startServer } from "../support/server.ts"
import { mode } from "../support/services.ts"
import { connectSmtp, envelope } from "../support/smtp-client.ts"
import { anonymous, withKey } from "../support/typed-client.ts"
import { sleep, until } from "../support/wait.ts"

const LAG_WARNING_SECONDS = 2


let backend: Backend
let qdrant: FakeQdrant
let openai: FakeOpenAi
let env: Record<string, string>
let node: Server
let worker: Server
let indexer: Server | undefined
let db: pg.Client
let box: Box

/** A process without HTTP is up once it has not died and `ready()` says so. */
const upWhen = (server: Server, what: string, ready: () => Promise<boolean>) =>
  until(() => `${what} not ready:\n${server.output()}`, async () => {
    if (server.process.exitCode !== null) throw new Error(`${what} exited with ${server.process.exitCode}:\n${server.output()}`)
    return (await ready()) ? true : undefined
  }, 90_000, 250)

const stages = async () => {
  const reply = await anonymous(node.url).GET("/readyz")
  expect(reply.response.status).toBe(200)
  return reply.data!.data.stages!
}

const count = async (table: "emails" | "search_documents") =>
  Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM ${table} WHERE mailbox_id = $1`, [box.mailboxId])).rows[0]!.n)

/** The box's emails with vectors: their documents name the model (the words stage's have none). */
const embedded = async () =>
  Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM search_documents WHERE mailbox_id = $1 AND model IS NOT NULL`, [box.mailboxId])).rows[0]!.n)

const search = (query: string, mode: "text" | "vector") =>
  withKey(node.url, box.user).POST("/v1/search", { body: { query, mode, limit: 10 } }).then((found) => {
    expect(found.response.status, JSON.stringify(found.error)).toBe(200)
    return found.data!.data.map((hit) => hit.subject)
  })

const send = async (subject: string) => {
  const session = await connectSmtp(node.smtpPort)
  const { replies } = await envelope(session, `${fresh("s")}@example.org`, [box.address])
  expect(replies.map((reply) => reply.code)).toEqual([250])
  const reply = await session.data(`Subject: ${subject}\r\nTo: <${box.address}>\r\n\r\nThe quarterly invoice for ${subject} is attached.\r\n`)
  expect(reply.code).toBe(250)
  await session.close()
}

const startIndexer = async () => {
  const started = await startServer({ ...env, ROLES: "indexer" }, { ready: "none" })
  indexer = started
  return started
}

describe.skipIf(mode !== "postgres")("a worker and an indexer in processes of their own", () => {
  beforeAll(async () => {
    backend = await createBackend({ forcePostgres: true })
    qdrant = await startFakeQdrant()
    openai = await startFakeOpenAi()
    env = { ...backend.env, QDRANT_URL: qdrant.url, ...fakeOpenAiEnv(openai), STAGE_LAG_WARNING: String(LAG_WARNING_SECONDS) }
    // The api node first: it runs the migrations the others then find done.
    node = await startServer({ ...env, ROLES: "api,smtp" })
    worker = await startServer({ ...env, ROLES: "worker", LOG_LEVEL: "info" }, { ready: "none" })
    await startIndexer()
    db = new pg.Client({ connectionString: backend.env.DATABASE_URL! })
    await db.connect()
    box = await newBox(node.url)
    // The stages' lag is known at once (a consumer not started yet has all it would be given waiting);
    // that both stages run is shown by the first email being indexed, below.
    await upWhen(worker, "worker and indexer", async () => {
      const now = await stages()
      return now.ingest.pending !== null && now.index.pending !== null
    })
  }, 180_000)

  afterAll(async () => {
    await db?.end().catch(() => undefined)
    await Promise.all([indexer, worker, node].map((server) => server?.stop()))
    await qdrant?.close()
    await openai?.close()
    await backend?.dispose()
  }, 60_000)

  it("ingests while the indexer is stopped, tells the index stage's growing lag, and indexes everything once it is back", async () => {
    await send("first")
    await until("the first email indexed", async () => ((await embedded()) === 1 ? true : undefined), 60_000, 250)
    const stopped = await indexer!.stop()
    expect(stopped).toBe(0)

    for (let i = 0; i < 5; i++) await send(`backlog ${i}`)
    // Accepted and stored without the indexer: the worker runs at its own pace, and so does the
    // words stage: the backlog is found by its words while it waits for the embedder.
    await until("five more emails stored", async () => ((await count("emails")) === 6 ? true : undefined), 60_000, 250)
    await until("their words indexed", async () => ((await count("search_documents")) === 6 ? true : undefined), 60_000, 250)
    expect(await embedded()).toBe(1)
    expect((await search("quarterly invoice backlog", "text")).sort()).toEqual(["backlog 0", "backlog 1", "backlog 2", "backlog 3", "backlog 4", "first"])
    expect(await search("quarterly invoice backlog", "vector")).toEqual(["first"])

    // The index stage's lag: five waiting, none in flight, its oldest ageing past the threshold.
    const behind = await until("the index stage reported behind", async () => {
      const now = await stages()
      return now.index.pending === 5 && now.index.lagging ? now : undefined
    }, 30_000, 250)
    expect(behind.index).toMatchObject({ pending: 5, in_flight: 0, lagging: true })
    expect(behind.index.oldest_age_seconds).toBeGreaterThanOrEqual(LAG_WARNING_SECONDS)
    // Ingest and the words stage are not held up by it: nothing waits there.
    expect(behind.ingest).toMatchObject({ pending: 0, in_flight: 0, oldest_age_seconds: 0, lagging: false })
    expect(behind.words).toMatchObject({ pending: 0, in_flight: 0, oldest_age_seconds: 0, lagging: false })
    // This process accepted all six, at its own rate.
    expect(behind.accept.handled).toBe(6)
    expect(behind.accept).toMatchObject({ pending: null, in_flight: 0, oldest_age_seconds: null, lagging: false })

    const metrics = await scrape(`${node.url}/metrics`)
    expect(metrics.value("mailroom_stage_pending", { stage: "index" })).toBe(5)
    expect(metrics.value("mailroom_stage_oldest_age_seconds", { stage: "index" })).toBeGreaterThanOrEqual(LAG_WARNING_SECONDS)
    expect(metrics.value("mailroom_stage_handled_total", { stage: "accept" })).toBe(6)
    expect(metrics.value("mailroom_stage_pending", { stage: "ingest" })).toBe(0)

    // The worker feeds the index stage, so it tells the operator, once.
    await until("the worker's warning", async () => (/The index stage is behind: 5 messages waiting/.test(worker.output()) ? true : undefined), 10_000, 200)
    expect(worker.output().match(/The index stage is behind/g)).toHaveLength(1)

    // Still behind a moment later: the backlog waits on the bus, not in anyone's memory.
    await sleep(1_000)
    expect((await stages()).index.pending).toBe(5)

    await startIndexer()
    await until("every email indexed", async () => ((await embedded()) === 6 ? true : undefined), 90_000, 250)
    const caughtUp = await until("the index stage caught up", async () => {
      const now = await stages()
      return now.index.pending === 0 && now.index.in_flight === 0 && !now.index.lagging ? now : undefined
    }, 30_000, 250)
    expect(caughtUp.index.oldest_age_seconds).toBe(0)
    await until("the worker says it caught up", async () => (/The index stage has caught up after/.test(worker.output()) ? true : undefined), 10_000, 200)
    // With how long the oldest message had waited: at least the second the test waited above.
    const waited = /The index stage has caught up after [\d.]+ s behind here; its oldest message had waited ([\d.]+) s/.exec(worker.output())
    expect(Number(waited?.[1])).toBeGreaterThanOrEqual(1)

    // Searchable by meaning too, through the api.
    expect(await search("quarterly invoice backlog", "vector")).toHaveLength(6)
  }, 240_000)
})
