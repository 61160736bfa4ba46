/**
 * `npm run bench:api`: throughput and latency of the API hot path against two baselines measured in
 * the same run, at 10 concurrent keep-alive connections:
 *
 *   (a) bare node:http answering a fixed JSON body
 *   (b) one bare Effect HttpApi route answering the same body (no authentication, rate limit or SQL)
 *   (c) Mailroom's `GET /v1/api-keys?limit=2` with an API key: authenticated, rate-limited, on
 *       PostgreSQL (a fresh database on BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test)
 *   (d) Mailroom's `POST /v1/search` (words only) on the same server, by accounts without mail: what
 *       a search costs besides the search itself (authentication, the request and search limits, the
 *       period's usage count, the query log). The bookkeeping is the mean answer time less the mean
 *       time the server spent searching, read from its `mailroom_search_duration_seconds` histogram.
 *       Under load that mean is mostly queueing (10 connections on a saturated server), so (d) also
 *       sends searches one at a time: the bookkeeping a search costs by itself is then its mean answer
 *       less its searching and less the mean answer of `GET /healthz` on the same connection (the
 *       client's and HTTP's own share).
 *
 * Every server runs in a child process of its own; the load generator (autocannon) runs in this
 * process, which does nothing else while it measures. Each target gets a 2 s warm-up, then 10 s
 * measured. Any non-2xx answer or socket error invalidates the run.
 *
 * The rate limit is exercised, not bypassed: the bench user is moved to the enterprise plan (500
 * requests per minute per key) and requests rotate over enough keys that none reaches its limit.
 *
 * Targets: (c) >= 0.6 x (b) in req/s, and p99(c) < 10 ms; the same for (d), and its bookkeeping < 2 ms
 * (one search at a time).
 * Each target also prints its server's CPU time per response (every thread, from /proc): on a machine
 * that other work shares, responses per server CPU second compare the servers better than req/s do.
 * Exit status: 0 when both targets pass, 2 when a target is missed, 1 when the run is invalid.
 *
 * Settings for quick runs: BENCH_TARGETS (default "a,b,c"), BENCH_SECONDS (10), BENCH_WARMUP_SECONDS (2);
 * BENCH_NODE_ARGS gives the servers' node flags (default: the production launchers' own,
 * "--max-semi-space-size=64"; e.g. add "--cpu-prof --cpu-prof-dir=/tmp/prof");
 * BENCH_DATABASE_URL names the PostgreSQL server for (c). BENCH_ROLES runs Mailroom with only those roles, as an
 * API node of a cluster runs (e.g. "api"; every role by default, as `npm start` does); a partial node
 * needs NATS, at BENCH_NATS_URL (nats://127.0.0.1:4222), under a prefix of its own removed afterwards, and a
 * shared vector index: the suites' in-memory stand-in for Qdrant ((d) searches words only).
 */
import autocannon from "autocannon"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import pg from "pg"
import { startFakeQdrant } from "../test/support/fake-qdrant.ts"
import { freePort } from "../test/support/process.ts"
import { deleteStreams, natsPrefix } from "../test/support/services.ts"
import { BenchError, type Child, cleanUp, logTail, onCleanup, scratchDirectory, seconds, serverNodeArgs, spawnChild, waitReady } from "./support/children.ts"

const CONNECTIONS = 10
const MEASURE_SECONDS = seconds("BENCH_SECONDS", 10)
const WARMUP_SECONDS = seconds("BENCH_WARMUP_SECONDS", 2)
const TARGETS = new Set((process.env.BENCH_TARGETS ?? "a,b,c,d").split(",").map((t) => t.trim()))
/** The servers' node flags: the production launchers' own unless BENCH_NODE_ARGS says otherwise. */
const NODE_ARGS = serverNodeArgs("BENCH_NODE_ARGS")
const ADMIN_DATABASE_URL = process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const ROLES = process.env.BENCH_ROLES
const NATS_URL = process.env.BENCH_NATS_URL ?? "nats://127.0.0.1:4222"
/** Requests one key may take in a run: below its plan's 500 per minute, with room to spare. */
const REQUESTS_PER_KEY = 400
/** Searches one account may make in a run: below the enterprise plan's 300 per minute. */
const SEARCHES_PER_USER = 250
const SEARCH_PATH = "/v1/search"
const SEARCH_BODY = JSON.stringify({ query: "the quarterly invoice from our supplier", mode: "text" })
/** Keys are spread over accounts of KEYS_PER_USER each (created with the owner's access token). */
const MAX_KEYS = 2000
const KEYS_PER_USER = 4
const LIST_PATH = "/v1/api-keys?limit=2"
/**
 * Accounts (d) signs in as at most: registering and logging in count against the client address's
 * 300 requests a minute, and the bench makes every account from one address.
 */
const MAX_SEARCHERS = 140
const labels = {
  a: "(a) bare node:http",
  b: "(b) bare Effect HttpApi",
  c: "(c) Mailroom GET /v1/api-keys",
  d: "(d) Mailroom POST /v1/search"
} as const

/** The load run in progress, stopped on SIGINT so the clean-up gets the event loop. */
let running: autocannon.Instance | undefined

const scratch = scratchDirectory("mailroom-bench-")

interface Server extends Child {
  readonly url: string
}

const startServer = async (
  name: string,
  script: string,
  settings: Record<string, string>,
  readyPath: string,
  readyWithinMs: number
): Promise<Server> => {
  const child = spawnChild(name, script, settings, { logDir: scratch, nodeArgs: NODE_ARGS, stopWithinMs: 5_000 })
  const url = `http://127.0.0.1:${settings.PORT}`
  await waitReady(child, `200 on ${readyPath}`, readyWithinMs, () => fetch(`${url}${readyPath}`).then((r) => r.status === 200, () => false))
  return { ...child, url }
}

// ---------------------------------------------------------------------------------------------
// Load

interface Measurement {
  readonly responses: number
  readonly seconds: number
  readonly rps: number
  readonly p50: number
  readonly p99: number
  readonly mean: number
  readonly bytesPerResponse: number
  readonly statuses: ReadonlyMap<number, number>
  readonly errors: number
  /** CPU time of the server process (every thread) per response in the measured period, µs. */
  readonly cpuPerResponse: number
}

const percentile = (sorted: Float64Array, q: number) =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!

/**
 * One autocannon run of `duration` seconds. Latencies are taken per response at full (sub-ms)
 * precision; autocannon's own histogram rounds to whole milliseconds.
 */
const load = (url: string, duration: number, headerSets: ReadonlyArray<Record<string, string>>, body?: string) =>
  new Promise<Measurement>((resolve, reject) => {
    let latencies = new Float64Array(1 << 16)
    let count = 0
    let bytes = 0
    const statuses = new Map<number, number>()
    const instance = autocannon(
      {
        url,
        connections: CONNECTIONS,
        duration,
        // Every connection cycles through the credentials in turn, so no key reaches its limit.
        // The requests are built once: a per-request `setupRequest` would halve what one
        // autocannon process can send, and (a) would measure the load generator.
        requests: headerSets.map((headers) =>
          body === undefined
            ? { method: "GET" as const, headers }
            : { method: "POST" as const, headers: { ...headers, "content-type": "application/json" }, body }
        )
      },
      (error: unknown, result: autocannon.Result) => {
        if (error) return reject(error instanceof Error ? error : new Error(String(error)))
        const sorted = latencies.slice(0, count).sort()
        resolve({
          responses: count,
          seconds: result.duration,
          rps: count / result.duration,
          p50: percentile(sorted, 0.5),
          p99: percentile(sorted, 0.99),
          mean: count > 0 ? sorted.reduce((sum, x) => sum + x, 0) / count : Number.NaN,
          bytesPerResponse: count > 0 ? bytes / count : 0,
          statuses,
          errors: result.errors,
          cpuPerResponse: Number.NaN
        })
      }
    )
    running = instance
    instance.on("done", () => {
      running = undefined
    })
    instance.on("response", (_client, statusCode, resBytes, responseTime) => {
      if (count === latencies.length) {
        const grown = new Float64Array(latencies.length * 2)
        grown.set(latencies)
        latencies = grown
      }
      latencies[count++] = responseTime
      bytes += resBytes
      statuses.set(statusCode, (statuses.get(statusCode) ?? 0) + 1)
    })
  })

const describeStatuses = (statuses: ReadonlyMap<number, number>) =>
  [...statuses].sort(([a], [b]) => a - b).map(([status, n]) => `${status}: ${n}`).join(", ")

/** Stop the run at the first phase that saw anything but 2xx. */
const checkClean = (label: string, phase: string, m: Measurement) => {
  const bad = [...m.statuses].filter(([status]) => status < 200 || status > 299)
  if (bad.length === 0 && m.errors === 0) return
  const limited = m.statuses.get(429) ?? 0
  const serverErrors = bad.filter(([status]) => status >= 500).reduce((n, [, c]) => n + c, 0)
  throw new BenchError(
    `${label}: ${phase} saw non-2xx answers or errors. Statuses: ${describeStatuses(m.statuses)}; socket errors: ${m.errors}` +
      (limited > 0 ? `\n  ${limited} answers were 429: the rate limit was reached, the keys were too few for this throughput` : "") +
      (serverErrors > 0 ? `\n  ${serverErrors} answers were 5xx: the server failed under load` : "")
  )
}

/**
 * CPU time a process has used so far (user + system, all its threads), µs; NaN where /proc is
 * absent. Unlike req/s, CPU per response barely moves when other processes share the cores.
 */
const cpuMicros = (pid: number | undefined) => {
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
    // utime and stime, fields 14 and 15 of stat(5), in clock ticks of 100 per second.
    return (Number(fields[11]) + Number(fields[12])) * 10_000
  } catch {
    return Number.NaN
  }
}

const measure = async (
  label: string,
  server: Server,
  route: string,
  headerSets: ReadonlyArray<Record<string, string>>,
  body?: string
) => {
  const url = `${server.url}${route}`
  process.stdout.write(`${label}: warm-up ${WARMUP_SECONDS} s, measuring ${MEASURE_SECONDS} s ... `)
  checkClean(label, "warm-up", await load(url, WARMUP_SECONDS, headerSets, body))
  const cpuBefore = cpuMicros(server.child.pid)
  const loaded = await load(url, MEASURE_SECONDS, headerSets, body)
  const result = { ...loaded, cpuPerResponse: (cpuMicros(server.child.pid) - cpuBefore) / loaded.responses }
  checkClean(label, "measurement", result)
  console.log(
    `${fmtInt(result.rps)} req/s, p50 ${fmtMs(result.p50)} ms, p99 ${fmtMs(result.p99)} ms, ` +
      `server CPU ${fmtInt(result.cpuPerResponse)} µs/response`
  )
  return result
}

// ---------------------------------------------------------------------------------------------
// Targets

/** Headers for the baselines: the same rotation machinery as (c), with credentials nobody checks. */
const dummyHeaders = Array.from({ length: 16 }, (_, i) => ({ "x-api-key": `mr_baseline_${i}` }))

const benchBaseline = async (label: string, script: string) => {
  const port = await freePort()
  const server = await startServer(label, script, { PORT: String(port) }, LIST_PATH, 30_000)
  try {
    return await measure(label, server, LIST_PATH, dummyHeaders)
  } finally {
    await server.stop()
  }
}

const expectStatus = async (response: Response, status: number, what: string) => {
  const text = await response.text()
  if (response.status !== status) throw new BenchError(`${what}: expected ${status}, got ${response.status}: ${text.slice(0, 500)}`)
  return JSON.parse(text) as { readonly data?: Record<string, unknown> | ReadonlyArray<unknown> }
}

const field = (body: { readonly data?: unknown }, name: string, what: string): string => {
  const data = body.data as Record<string, unknown> | undefined
  const value = data?.[name]
  if (typeof value !== "string") throw new BenchError(`${what}: the answer has no data.${name}`)
  return value
}

const createDatabase = async () => {
  const name = `mailroom_bench_${Date.now().toString(36)}_${randomBytes(4).toString("hex")}`
  const admin = new pg.Client({ connectionString: ADMIN_DATABASE_URL })
  await admin.connect().catch((error: unknown) => {
    throw new BenchError(`(c) needs PostgreSQL at ${ADMIN_DATABASE_URL}: ${String(error)}`)
  })
  try {
    await admin.query(`CREATE DATABASE ${name}`)
  } finally {
    await admin.end()
  }
  onCleanup(async () => {
    const client = new pg.Client({ connectionString: ADMIN_DATABASE_URL })
    await client.connect()
    try {
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    } finally {
      await client.end()
    }
  })
  const url = new URL(ADMIN_DATABASE_URL)
  url.pathname = `/${name}`
  return url.toString()
}

/** Run `task` over `items` with at most `concurrency` in flight. */
const pooled = async <A, B>(items: ReadonlyArray<A>, concurrency: number, task: (item: A) => Promise<B>) => {
  const results: Array<B> = []
  let index = 0
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (index < items.length) {
      const i = index++
      results[i] = await task(items[i]!)
    }
  }))
  return results
}

const benchMailroom = async (label: string, expectedRps: number) => {
  const databaseUrl = await createDatabase()
  const dataDir = fs.mkdtempSync(path.join(scratch, "data-"))
  const [port, smtpPort] = [await freePort(), await freePort()]
  const cluster: Record<string, string> = {}
  if (ROLES !== undefined) {
    const prefix = natsPrefix()
    onCleanup(() => deleteStreams(NATS_URL, prefix))
    const qdrant = await startFakeQdrant()
    onCleanup(() => qdrant.close())
    Object.assign(cluster, { ROLES, NATS_URL, NATS_PREFIX: prefix, QDRANT_URL: qdrant.url })
  }
  const server = await startServer(label, "src/main.ts", {
    ...cluster,
    PORT: String(port),
    HOST: "127.0.0.1",
    SMTP_PORT: String(smtpPort),
    SMTP_HOST: "127.0.0.1",
    DATA_DIR: dataDir,
    DATABASE_URL: databaseUrl,
    JWT_SECRET: randomBytes(32).toString("hex")
  }, "/healthz", 120_000)
  try {
    const post = (route: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${server.url}${route}`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify(body)
      })
    const wanted = Math.ceil((expectedRps * (WARMUP_SECONDS + MEASURE_SECONDS) * 1.25) / REQUESTS_PER_KEY)
    const keyCount = TARGETS.has("c") ? Math.min(MAX_KEYS, Math.max(KEYS_PER_USER, wanted)) : 0
    if (keyCount < wanted && TARGETS.has("c")) console.log(`  note: ${wanted} keys would be needed, creating the maximum of ${keyCount}`)
    // Searches are limited per account: (d) signs in as enough accounts that none reaches its limit.
    const searchersWanted = Math.ceil((expectedRps * (WARMUP_SECONDS + MEASURE_SECONDS)) / SEARCHES_PER_USER)
    const searchers = TARGETS.has("d") ? Math.min(MAX_SEARCHERS, searchersWanted) : 0
    if (searchers < searchersWanted && TARGETS.has("d")) {
      console.log(`  note: ${searchersWanted} accounts would be needed for (d), creating the maximum of ${searchers}`)
    }

    // Accounts as agents have them: a few keys each, so each list is a short one.
    const userCount = Math.max(Math.ceil(keyCount / KEYS_PER_USER), searchers)
    const tokens = await pooled(Array.from({ length: userCount }, (_, i) => i), 8, async (i) => {
      const email = `bench-${i}-${randomBytes(4).toString("hex")}@example.com`
      const password = randomBytes(12).toString("hex")
      const registered = await expectStatus(await post("/api/auth/register", { email, password, name: `Bench ${i}` }), 201, "register")
      field(registered, "userId", "register")
      const login = await expectStatus(await post("/api/auth/login", { email, password }), 200, "login")
      return field(login, "accessToken", "login")
    })

    // The enterprise plan, as a completed checkout would leave it (500 requests per minute per key).
    const db = new pg.Client({ connectionString: databaseUrl })
    await db.connect()
    try {
      const updated = await db.query(`UPDATE subscriptions SET plan = 'enterprise'`)
      if (updated.rowCount !== userCount) throw new BenchError(`expected ${userCount} subscription rows, updated ${updated.rowCount}`)
    } finally {
      await db.end()
    }

    const keyOwners = Math.ceil(keyCount / KEYS_PER_USER)
    const keys = await pooled(Array.from({ length: keyCount }, (_, i) => i), 8, async (i) => {
      const created = await expectStatus(
        await post("/v1/api-keys", { name: `bench ${i}` }, { authorization: `Bearer ${tokens[i % keyOwners]!}` }),
        201,
        "create API key"
      )
      return field(created, "apiKey", "create API key")
    })
    if (keyCount > 0) {
      console.log(`  ${keyCount} API keys over ${keyOwners} accounts on the enterprise plan, ${keyCount * REQUESTS_PER_KEY} requests of headroom`)
    }
    const results: { c?: Measurement; d?: SearchMeasurement } = {}
    if (keyCount > 0) results.c = await benchList(server, keys)
    if (searchers > 0) results.d = await benchSearch(server, tokens.slice(0, searchers))
    return results
  } catch (error) {
    throw error instanceof BenchError ? new BenchError(`${error.message}\nThe server's last output:\n${logTail(server.logFile)}`) : error
  } finally {
    await server.stop()
  }
}

const benchList = async (server: Server, keys: ReadonlyArray<string>) => {
    // One request by hand: the answer must be the key list, with the rate-limit headers.
    const probe = await fetch(`${server.url}${LIST_PATH}`, { headers: { "x-api-key": keys[0]! } })
    const listed = await expectStatus(probe, 200, `GET ${LIST_PATH}`)
    if (!Array.isArray(listed.data) || listed.data.length !== 2) {
      throw new BenchError(`GET ${LIST_PATH}: expected two keys in data, got ${JSON.stringify(listed).slice(0, 300)}`)
    }
    if (probe.headers.get("x-ratelimit-limit") !== "500") {
      throw new BenchError(`GET ${LIST_PATH}: expected X-RateLimit-Limit 500, got ${probe.headers.get("x-ratelimit-limit")}`)
    }

    return await measure(labels.c, server, LIST_PATH, keys.map((key) => ({ "x-api-key": key })))
}

interface SearchMeasurement extends Measurement {
  /** Mean time the server spent searching (its histogram), ms. */
  readonly searchMs: number
  /** Mean answer time less the mean search time, ms. */
  readonly bookkeepingMs: number
  /** One search at a time: the mean answer, its searching, and `GET /healthz`'s mean answer, ms. */
  readonly alone: { readonly answerMs: number; readonly searchMs: number; readonly healthzMs: number; readonly bookkeepingMs: number }
}

/** Searches (and health checks) sent one at a time, after as many unmeasured. */
const ALONE_REQUESTS = 200

/** The mean answer time of `send`, one request at a time, ms. */
const meanAlone = async (send: (i: number) => Promise<Response>, what: string) => {
  let total = 0
  for (let i = 0; i < 2 * ALONE_REQUESTS; i++) {
    const started = performance.now()
    const response = await send(i)
    await response.arrayBuffer()
    if (response.status !== 200) throw new BenchError(`${what}: expected 200, got ${response.status}`)
    if (i >= ALONE_REQUESTS) total += performance.now() - started
  }
  return total / ALONE_REQUESTS
}

/** What a search's bookkeeping costs by itself: searches one at a time, against `GET /healthz`. */
const searchAlone = async (server: Server, tokens: ReadonlyArray<string>) => {
  const healthzMs = await meanAlone(() => fetch(`${server.url}/healthz`), "GET /healthz")
  const before = await searchTime(server)
  const answerMs = await meanAlone((i) =>
    fetch(`${server.url}${SEARCH_PATH}`, {
      method: "POST",
      // The accounts the loaded run used least: it cycles through them in order.
      headers: { authorization: `Bearer ${tokens[tokens.length - 1 - (i % tokens.length)]!}`, "content-type": "application/json" },
      body: SEARCH_BODY
    }), `POST ${SEARCH_PATH}`)
  const after = await searchTime(server)
  const searchMs = ((after.sum - before.sum) / (after.count - before.count)) * 1000
  return { answerMs, searchMs, healthzMs, bookkeepingMs: answerMs - searchMs - healthzMs }
}

/** The server's `mailroom_search_duration_seconds` for text searches: sum and count so far. */
const searchTime = async (server: Server) => {
  const text = await (await fetch(`${server.url}/metrics`)).text()
  const read = (suffix: string) => {
    const line = text.split("\n").find((l) => l.startsWith(`mailroom_search_duration_seconds_${suffix}{`) && l.includes(`mode="text"`))
    return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1))
  }
  return { sum: read("sum"), count: read("count") }
}

const benchSearch = async (server: Server, tokens: ReadonlyArray<string>): Promise<SearchMeasurement> => {
  // One search by hand: an empty page, with the rate-limit headers.
  const probe = await fetch(`${server.url}${SEARCH_PATH}`, {
    method: "POST",
    headers: { authorization: `Bearer ${tokens[0]!}`, "content-type": "application/json" },
    body: SEARCH_BODY
  })
  const answered = await expectStatus(probe, 200, `POST ${SEARCH_PATH}`)
  if (!Array.isArray(answered.data)) throw new BenchError(`POST ${SEARCH_PATH}: expected a list in data, got ${JSON.stringify(answered).slice(0, 300)}`)
  console.log(`  ${tokens.length} accounts searching, ${tokens.length * SEARCHES_PER_USER} searches of headroom`)
  const before = await searchTime(server)
  const result = await measure(labels.d, server, SEARCH_PATH, tokens.map((token) => ({ authorization: `Bearer ${token}` })), SEARCH_BODY)
  const after = await searchTime(server)
  // The histogram counts warm-up and measurement alike: its mean covers both, as close as it gets.
  const searchMs = after.count > before.count ? ((after.sum - before.sum) / (after.count - before.count)) * 1000 : Number.NaN
  const alone = await searchAlone(server, tokens)
  return { ...result, searchMs, bookkeepingMs: result.mean - searchMs, alone }
}

// ---------------------------------------------------------------------------------------------
// Report

const fmtInt = (n: number) => Math.round(n).toLocaleString("en-US")
const fmtMs = (n: number) => (Number.isNaN(n) ? "-" : n.toFixed(2))
const ratio = (x: Measurement | undefined, y: Measurement | undefined) => (x && y ? (x.rps / y.rps).toFixed(3) : "-")

const main = async () => {
  console.log(
    `bench:api — node ${process.version}, ${os.cpus().length} cores, ${CONNECTIONS} connections, ` +
      `${WARMUP_SECONDS} s warm-up + ${MEASURE_SECONDS} s measured per target; Mailroom with ` +
      (ROLES === undefined ? "every role" : `ROLES=${ROLES} and NATS`)
  )
  const results: { a?: Measurement; b?: Measurement; c?: Measurement; d?: SearchMeasurement } = {}
  let failure: unknown
  try {
    if (TARGETS.has("a")) results.a = await benchBaseline(labels.a, "bench/servers/node-http.ts")
    if (TARGETS.has("b")) results.b = await benchBaseline(labels.b, "bench/servers/effect-httpapi.ts")
    // (c) cannot be faster than (b): (b)'s rate, with a margin, sizes the keys (8,000 if unmeasured).
    if (TARGETS.has("c") || TARGETS.has("d")) Object.assign(results, await benchMailroom("Mailroom", results.b?.rps ?? 8_000))
  } catch (error) {
    failure = error
    console.log("")
  } finally {
    await cleanUp()
  }

  console.log("")
  console.log(
    `${"target".padEnd(32)}${"req/s".padStart(10)}${"p50 ms".padStart(9)}${"p99 ms".padStart(9)}${"CPU µs".padStart(9)}` +
      `${"bytes".padStart(8)}  statuses`
  )
  for (const key of ["a", "b", "c", "d"] as const) {
    const m = results[key]
    if (!m) {
      console.log(`${labels[key].padEnd(32)}${"not measured".padStart(10)}`)
      continue
    }
    console.log(
      `${labels[key].padEnd(32)}${fmtInt(m.rps).padStart(10)}${fmtMs(m.p50).padStart(9)}${fmtMs(m.p99).padStart(9)}` +
        `${fmtInt(m.cpuPerResponse).padStart(9)}${fmtInt(m.bytesPerResponse).padStart(8)}  ${describeStatuses(m.statuses)}`
    )
  }
  console.log("")
  console.log(
    `ratios (req/s): b/a ${ratio(results.b, results.a)}   c/a ${ratio(results.c, results.a)}   c/b ${ratio(results.c, results.b)}` +
      `   d/b ${ratio(results.d, results.b)}`
  )
  // The same comparison by the servers' own CPU per response: what other load on the machine moves least.
  const cpuRatio = (x: Measurement | undefined, y: Measurement | undefined) =>
    x && y ? (y.cpuPerResponse / x.cpuPerResponse).toFixed(3) : "-"
  console.log(`ratios (responses per server CPU second): c/b ${cpuRatio(results.c, results.b)}   d/b ${cpuRatio(results.d, results.b)}`)
  if (results.d) {
    console.log(
      `(d) per search: mean answer ${fmtMs(results.d.mean)} ms, of which searching ${fmtMs(results.d.searchMs)} ms ` +
        `(server histogram), bookkeeping ${fmtMs(results.d.bookkeepingMs)} ms`
    )
    const alone = results.d.alone
    console.log(
      `(d) one search at a time (${ALONE_REQUESTS}): mean answer ${fmtMs(alone.answerMs)} ms, searching ${fmtMs(alone.searchMs)} ms, ` +
        `GET /healthz ${fmtMs(alone.healthzMs)} ms: bookkeeping ${fmtMs(alone.bookkeepingMs)} ms`
    )
  }

  let missed = false
  if (results.b && results.c) {
    const throughputOk = results.c.rps >= 0.6 * results.b.rps
    const latencyOk = results.c.p99 < 10
    missed = !throughputOk || !latencyOk
    console.log(`target (c) >= 0.6 x (b) req/s: ${throughputOk ? "PASS" : "FAIL"} (c/b = ${ratio(results.c, results.b)})`)
    console.log(`target p99(c) < 10 ms:         ${latencyOk ? "PASS" : "FAIL"} (${fmtMs(results.c.p99)} ms)`)
  } else {
    console.log("targets (c): not judged ((b) and (c) are both needed)")
  }
  if (results.b && results.d) {
    const throughputOk = results.d.rps >= 0.6 * results.b.rps
    const latencyOk = results.d.p99 < 10
    // What a search's bookkeeping costs, measured without the queue a saturated server adds to it.
    const bookkeepingOk = results.d.alone.bookkeepingMs < 2
    missed ||= !throughputOk || !latencyOk || !bookkeepingOk
    console.log(`target (d) >= 0.6 x (b) req/s: ${throughputOk ? "PASS" : "FAIL"} (d/b = ${ratio(results.d, results.b)})`)
    console.log(`target p99(d) < 10 ms:         ${latencyOk ? "PASS" : "FAIL"} (${fmtMs(results.d.p99)} ms)`)
    console.log(`target bookkeeping(d) < 2 ms:  ${bookkeepingOk ? "PASS" : "FAIL"} (${fmtMs(results.d.alone.bookkeepingMs)} ms, one search at a time)`)
  }

  if (failure !== undefined) {
    console.error(`\nbench:api FAILED: ${failure instanceof BenchError ? failure.message : String(failure instanceof Error ? failure.stack : failure)}`)
    process.exitCode = 1
  } else if (missed) {
    process.exitCode = 2
  }
}

// `on`, not `once`: tsx repeats a signal it did not see handled at once, and a signal with no
// listener left would end the process before the database is dropped.
let interrupted = false
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    if (interrupted) return
    interrupted = true
    console.error(`\n${signal}: stopping servers and dropping the bench database`)
    running?.stop()
    void cleanUp().finally(() => process.exit(130))
  })
}

await main()
