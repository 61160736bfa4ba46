/**
 * docker-compose.yml's NATS cluster holds mail through the loss of a server. Three local nats-server
 * processes run the committed deploy/nats/nats.conf (only its addresses and store directory made
 * local: test/support/nats-cluster.ts); Mailroom runs against all three with its streams in 3 copies
 * (NATS_REPLICAS=3, as compose sets it), as two nodes (api+smtp, smtp+worker) over PostgreSQL. Mail
 * flows over SMTP to both nodes, and the server leading the mail stream is killed (SIGKILL) mid-run:
 * - every message answered 250 is stored exactly once and listed over the API;
 * - a message not answered 250 was answered 4xx (try again), never 5xx, and is stored at most once;
 * - with two servers left, the cluster takes every message of a second batch.
 * And a node asked for 3 copies on a single NATS server stops at start, naming NATS_REPLICAS.
 *
 * It brings its own NATS servers, so it runs once per CI: in the PostgreSQL + NATS run.
 */
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { randomUUID } from "node:crypto"
import pg from "pg"
import { afterAll, beforeAll, expect, it } from "vitest"
import { streamName } from "../../layers/nats-bus.ts"
import { withApiKey } from "../support/accounts.ts"
import { type FakeOpenAi, fakeOpenAiEnv, startFakeOpenAi } from "../support/fake-openai.ts"
import { type FakeQdrant, startFakeQdrant } from "../support/fake-qdrant.ts"
import { type NatsCluster, startNatsCluster } from "../support/nats-cluster.ts"
import { sendMail } from "../support/send-mail.ts"
import { type Server, startServer } from "../support/server.ts"
import {
  adminDatabaseUrl,
  createDatabase,
  createDataDir,
  natsPrefix,
  sharedNatsUrl,
  type TestDatabase,
  testSecret
} from "../support/services.ts"
import { greets } from "../support/smtp-client.ts"
import { withKey } from "../support/typed-client.ts"
import { sleep, until } from "../support/wait.ts"

/** Messages in the batch during which a NATS server dies, and in the one after. */
const DURING = 200
const AFTER = 60
/** The server dies once this many of the first batch are accepted. */
const KILL_AFTER = 60
/** Transactions in flight at once, spread over both SMTP nodes. */
const LANES = 8

let cluster: NatsCluster
let database: TestDatabase
let dataDir: ReturnType<typeof createDataDir>
let qdrant: FakeQdrant
let openai: FakeOpenAi
let prefix: string
const nodes: Array<Server> = []
let db: pg.Client
let nc: NatsConnection
let jsm: JetStreamManager
let apiKey: string
let mailbox: { mailbox_id: string; email_address: string }

const mailStream = () => streamName(prefix, "mail")

beforeAll(async () => {
  cluster = await startNatsCluster()
  database = await createDatabase(adminDatabaseUrl ?? "postgres://postgres@127.0.0.1:5432/test")
  dataDir = createDataDir()
  qdrant = await startFakeQdrant()
  // Neither node indexes; the api node is still given an index and an embedder, as an operator would.
  openai = await startFakeOpenAi()
  prefix = natsPrefix()
  const env = {
    DATA_DIR: dataDir.dir,
    DATABASE_URL: database.url,
    JWT_SECRET: testSecret(),
    NATS_URL: cluster.url,
    NATS_PREFIX: prefix,
    NATS_REPLICAS: "3",
    QDRANT_URL: qdrant.url,
    ...fakeOpenAiEnv(openai)
  }
  // The api node first: it runs the migrations the other then finds done.
  nodes.push(await startServer({ ...env, ROLES: "api,smtp" }))
  nodes.push(await startServer({ ...env, ROLES: "smtp,worker" }, { ready: "none" }))
  await until(() => `the smtp,worker node did not greet:\n${nodes[1]!.output()}`, async () => ((await greets(nodes[1]!.smtpPort)) ? true : undefined), 90_000, 250)

  db = new pg.Client({ connectionString: database.url })
  await db.connect()
  nc = await connect({ servers: cluster.servers.map((server) => server.url), maxReconnectAttempts: -1 })
  jsm = await jetstreamManager(nc)

  const user = await withApiKey(nodes[0]!.url)
  apiKey = user.apiKey
  const created = await withKey(nodes[0]!.url, user).POST("/v1/api/mailboxes", {
    body: { local_part: `nats-cluster-${Date.now().toString(36)}`, domain: "agents.localhost" }
  })
  if (created.response.status !== 201 || !created.data) throw new Error(`mailbox: ${created.response.status} ${JSON.stringify(created.error)}`)
  mailbox = created.data.mailbox
  // Enterprise (the suite owns its database), so that a few hundred messages are within the plan.
  await db.query("UPDATE subscriptions SET plan = 'enterprise' WHERE user_id = $1", [user.userId])
}, 300_000)

afterAll(async () => {
  await Promise.all(nodes.map(async (node) => {
    const stopped = await Promise.race([node.stop().then(() => true), sleep(20_000).then(() => false)])
    if (!stopped) await node.kill()
  }))
  await nc?.close()
  await db?.end()
  await qdrant?.close()
  await openai?.close()
  await cluster?.dispose()
  await database?.drop()
  dataDir?.remove()
}, 120_000)

interface Outcome {
  readonly accepted: Array<string>
  /** Tag and reply of each message not answered 250. */
  readonly refused: Array<{ readonly seq: string; readonly reply: string }>
}

/** `count` messages tagged `<label>-<n>`, LANES at a time, alternating between the two SMTP nodes. */
const sendBatch = async (label: string, count: number, onAccepted: (acceptedSoFar: number) => void = () => {}): Promise<Outcome> => {
  const outcome: Outcome = { accepted: [], refused: [] }
  let next = 0
  await Promise.all(Array.from({ length: LANES }, async () => {
    while (next < count) {
      const n = next++
      const seq = `${label}-${n}`
      try {
        const info = await sendMail(nodes[n % nodes.length]!.smtpPort, {
          to: mailbox.email_address,
          subject: `NATS cluster ${seq}`,
          text: `Message ${seq}, body ${randomUUID()}`,
          headers: { "X-Test-Seq": seq }
        })
        if (/^250[ -]/.test(info.response)) {
          outcome.accepted.push(seq)
          onAccepted(outcome.accepted.length)
        } else outcome.refused.push({ seq, reply: info.response })
      } catch (error) {
        outcome.refused.push({ seq, reply: (error as { response?: string }).response ?? String(error) })
      }
    }
  }))
  return outcome
}

/** Copies stored per tag, for the tags of `label`. */
const stored = async (label: string) => {
  const { rows } = await db.query<{ seq: string; copies: string }>(
    `SELECT headers->>'x-test-seq' AS seq, count(*) AS copies FROM emails
     WHERE mailbox_id = $1 AND headers->>'x-test-seq' LIKE $2 GROUP BY 1`,
    [mailbox.mailbox_id, `${label}-%`]
  )
  return new Map(rows.map((row) => [row.seq, Number(row.copies)]))
}

/** The ingest consumer's backlog; undefined while the cluster cannot answer (an election). */
const ingestBacklog = async () => {
  try {
    const info = await jsm.consumers.info(mailStream(), "ingest")
    return { pending: info.num_pending, unacknowledged: info.num_ack_pending }
  } catch {
    return undefined
  }
}

/** Every subject listed over the API for the mailbox, all pages. */
const listedSubjects = async () => {
  const subjects: Array<string> = []
  for (let offset = 0;; offset += 100) {
    const page = await withKey(nodes[0]!.url, { apiKey }).GET("/v1/api/mailboxes/{mailboxId}/emails", {
      params: { path: { mailboxId: mailbox.mailbox_id }, query: { limit: 100, offset } }
    })
    if (page.response.status !== 200 || !page.data) throw new Error(`list: ${page.response.status} ${JSON.stringify(page.error)}`)
    subjects.push(...page.data.data.map((email) => email.subject))
    if (page.data.meta.hasMore !== true) return subjects
  }
}

it("keeps the streams in three copies across the three servers of the committed configuration", async () => {
  const info = await jsm.streams.info(mailStream())
  expect(info.config.num_replicas).toBe(3)
  expect(info.cluster?.name).toBe("mailroom")
  const holders = [info.cluster?.leader, ...(info.cluster?.replicas ?? []).map((replica) => replica.name)].sort()
  expect(holders).toEqual(cluster.servers.map((server) => server.name).sort())
})

it("loses and duplicates nothing when the NATS server leading the mail stream is killed mid-run", async () => {
  const started = Date.now()
  let reachedKillPoint!: () => void
  const killPoint = new Promise<void>((resolve) => (reachedKillPoint = resolve))
  let killed: { readonly name: string; readonly acceptedBefore: number; readonly at: number } | undefined
  let acceptedSoFar = 0

  const kill = (async () => {
    await killPoint
    const leader = (await jsm.streams.info(mailStream())).cluster?.leader
    if (leader === undefined) throw new Error("the mail stream has no leader")
    await cluster.server(leader).kill()
    killed = { name: leader, acceptedBefore: acceptedSoFar, at: Date.now() }
  })()
  const during = await sendBatch("during", DURING, (soFar) => {
    acceptedSoFar = soFar
    if (soFar === KILL_AFTER) reachedKillPoint()
  })
  reachedKillPoint() // should fewer be accepted, kill anyway so the assertions below tell it
  await kill
  console.info(
    `[nats-cluster] ${killed?.name} killed after ${killed?.acceptedBefore} accepted; batch during: ${during.accepted.length} accepted, ` +
      `${during.refused.length} refused (${[...new Set(during.refused.map((refusal) => refusal.reply))].slice(0, 2).join("; ") || "none"})`
  )
  expect(killed).toBeDefined()
  expect(cluster.servers.filter((server) => server.running())).toHaveLength(2)
  // Refusals while the stream elects a new leader are temporary ones: the sender tries again.
  for (const refusal of during.refused) expect(refusal.reply, refusal.seq).toMatch(/^4\d\d /)
  expect(during.accepted.length).toBeGreaterThanOrEqual(KILL_AFTER)

  // Two servers of three hold a majority: once the bus answers again, every message is taken.
  await until("a 250 with two NATS servers left", async () => {
    const probe = await sendMail(nodes[0]!.smtpPort, { to: mailbox.email_address, subject: "NATS cluster probe", text: "probe" }).catch(() => undefined)
    return probe !== undefined && /^250[ -]/.test(probe.response) ? true : undefined
    // ~6 s on an idle machine; 26 s was seen with another cluster suite competing for the two cores.
  }, 90_000, 250)
  console.info(`[nats-cluster] a 250 again ${Date.now() - killed!.at} ms after the kill`)
  const after = await sendBatch("after", AFTER)
  expect(after.refused).toEqual([])

  // Every accepted message stored, and nothing left on the bus for the worker (a late redelivery
  // would so already show as a duplicate); then once more after a pause.
  const accepted = [...during.accepted, ...after.accepted]
  let last = ""
  await until(() => `every accepted message stored; last seen ${last}`, async () => {
    const copies = new Map([...(await stored("during")), ...(await stored("after"))])
    const backlog = await ingestBacklog()
    last = JSON.stringify({ stored: copies.size, accepted: accepted.length, backlog })
    return accepted.every((seq) => copies.has(seq)) && backlog?.pending === 0 && backlog.unacknowledged === 0 ? true : undefined
  }, 90_000, 500, 2000)
  await sleep(2000)
  const copies = new Map([...(await stored("during")), ...(await stored("after"))])
  expect(accepted.filter((seq) => copies.get(seq) !== 1)).toEqual([])
  // A message answered 4xx may still have reached the bus (its acknowledgement lost with the
  // server): kept once at most, never twice.
  expect(during.refused.filter((refusal) => (copies.get(refusal.seq) ?? 0) > 1)).toEqual([])

  // Readable over the API, each exactly once.
  const subjects = await listedSubjects()
  for (const seq of accepted) expect(subjects.filter((subject) => subject === `NATS cluster ${seq}`), seq).toHaveLength(1)
  console.info(`[nats-cluster] ${accepted.length} accepted messages stored once each and listed; ${Math.round((Date.now() - started) / 1000)} s`)
}, 240_000)

it("stops a node asked for three copies on a single NATS server, naming NATS_REPLICAS", async () => {
  const node = await startServer({
    DATA_DIR: dataDir.dir,
    DATABASE_URL: database.url,
    JWT_SECRET: testSecret(),
    NATS_URL: sharedNatsUrl ?? "nats://127.0.0.1:4222",
    NATS_PREFIX: natsPrefix(),
    NATS_REPLICAS: "3",
    QDRANT_URL: qdrant.url,
    ROLES: "worker"
  }, { ready: "none" })
  try {
    await until(() => `the node did not stop:\n${node.output()}`, async () => (node.process.exitCode !== null ? true : undefined), 90_000, 250)
    expect(node.process.exitCode).toBe(1)
    expect(node.output()).toMatch(/with 3 replicas \(NATS_REPLICAS: needs a NATS cluster of at least 3 JetStream servers\)/)
  } finally {
    await node.kill()
  }
}, 120_000)
