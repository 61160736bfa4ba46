/**
 * Opening the database (layers/postgres.ts `firstAnswer`): a server DATABASE_URL names is given 5 s
 * to answer and is then said unreachable, as PostgreSQL at its address; the embedded database
 * (layers/pglite.ts `poolOptions`), this process's own, is waited for while it comes up, saying so
 * every 15 s, and only after 10 minutes said to have failed, in its own terms (its directory, what to
 * check), never as "PostgreSQL at <socket>". Before, the embedded database's first connection gave up
 * after 5 s and failed one start in five on a loaded machine.
 *
 * The database here is a stand-in that accepts the connection and says nothing until released (then
 * it carries the bytes to the PostgreSQL server, in the PostgreSQL + NATS run): the waits are the
 * TestClock's, not the wall clock's.
 */
import { describe, expect, it } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Cause, Duration, Effect, Exit, Fiber, Layer, Logger, LogLevel, Option, Redacted, TestClock } from "effect"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import * as Pglite from "../../layers/pglite.ts"
import * as Postgres from "../../layers/postgres.ts"

const serverUrl = process.env.DATABASE_URL

interface StandIn {
  /** Resolves once a client has connected. */
  readonly connected: Promise<void>
  /** Carry the held connection's bytes to `upstream` (a PostgreSQL server) from now on. */
  readonly release: (upstream: { readonly host: string; readonly port: number }) => void
  readonly close: () => Promise<void>
}

/** A server at `address` (a port, or a socket path) that accepts connections and answers nothing until released. */
const silentServer = (address: { readonly port: 0 } | { readonly path: string }) =>
  Effect.acquireRelease(
    Effect.async<StandIn & { readonly port: number }>((resume) => {
      const held: Array<net.Socket> = []
      let upstream: { readonly host: string; readonly port: number } | undefined
      let connected!: () => void
      const connectedOnce = new Promise<void>((resolve) => (connected = resolve))
      const carry = (client: net.Socket, to: { readonly host: string; readonly port: number }) => {
        const server = net.connect(to.port, to.host)
        client.pipe(server).pipe(client)
        client.on("error", () => server.destroy())
        server.on("error", () => client.destroy())
      }
      const server = net.createServer((client) => {
        client.on("error", () => {})
        if (upstream !== undefined) return carry(client, upstream)
        client.pause()
        held.push(client)
        connected()
      })
      const listening = () =>
        resume(Effect.succeed({
          port: "port" in address ? (server.address() as net.AddressInfo).port : 0,
          connected: connectedOnce,
          release: (to) => {
            upstream = to
            for (const client of held.splice(0)) {
              client.resume()
              carry(client, to)
            }
          },
          close: () =>
            new Promise<void>((resolve) => {
              for (const client of held) client.destroy()
              server.close(() => resolve())
            })
        }))
      if ("path" in address) server.listen(address.path, listening)
      else server.listen(0, "127.0.0.1", listening)
    }),
    (standIn) => Effect.promise(standIn.close)
  )

/** A directory of its own, removed afterwards. */
const temporaryDirectory = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "mailroom-connect-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

/** Build `layer` in a fiber of its own, its log lines recorded in `lines`. */
const building = <E>(layer: Layer.Layer<SqlClient.SqlClient, E>, lines: Array<string>) =>
  Effect.forkScoped(
    Layer.build(layer).pipe(
      Effect.flatMap((context) => Effect.provide(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT 1 AS one`), context)),
      Effect.provide(Logger.replace(Logger.defaultLogger, Logger.make(({ message }) => lines.push(Array.isArray(message) ? message.join(" ") : String(message))))),
      Logger.withMinimumLogLevel(LogLevel.Debug)
    )
  )

/** Move the TestClock by `by`, then let the fibers woken run (a wall-clock moment). */
const wait = (by: Duration.DurationInput) =>
  TestClock.adjust(by).pipe(Effect.zipRight(Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 100)))))

const failureOf = <A, E>(fiber: Fiber.Fiber<A, E>) =>
  Effect.map(Fiber.await(fiber), (exit) => (Exit.isFailure(exit) ? Option.getOrThrow(Exit.causeOption(exit)) : undefined))

const messagesOf = (error: unknown): Array<string> => {
  const said: Array<string> = []
  for (let current = error; current instanceof Error; current = current.cause) said.push(current.message)
  return said
}

describe("opening the database", () => {
  it.scoped("a server DATABASE_URL names is given 5 s to answer, then said unreachable as PostgreSQL at its address", () =>
    Effect.gen(function*() {
      const standIn = yield* silentServer({ port: 0 })
      const lines: Array<string> = []
      const fiber = yield* building(Postgres.layer({ url: Redacted.make(`postgres://postgres@127.0.0.1:${standIn.port}/mailroom`) }), lines)
      yield* Effect.promise(() => standIn.connected)
      yield* wait("4900 millis")
      expect(fiber.unsafePoll()).toBeNull()
      yield* wait("200 millis")
      const cause = yield* failureOf(fiber)
      const error = cause === undefined ? undefined : Option.getOrUndefined(Cause.failureOption(cause))
      expect(messagesOf(error)).toEqual([`Could not connect to PostgreSQL at 127.0.0.1:${standIn.port}, database mailroom`, "No answer within 5s"])
      expect(lines).toEqual([])
    }))

  it.scoped("the embedded database is waited for, saying so every 15 s, and after 10 minutes said to have failed in its own terms", () =>
    Effect.gen(function*() {
      const socketDir = yield* temporaryDirectory
      const standIn = yield* silentServer({ path: path.join(socketDir, ".s.PGSQL.5432") })
      const dataDir = "/srv/mailroom-data/pglite"
      const lines: Array<string> = []
      const fiber = yield* building(Postgres.pooledClient(Pglite.poolOptions(dataDir, socketDir)), lines)
      yield* Effect.promise(() => standIn.connected)
      // Long past a server's 5 s: still waiting.
      yield* wait("1 minute")
      expect(fiber.unsafePoll()).toBeNull()
      expect(lines).toEqual([15, 30, 45, 60].map((s) =>
        `Waiting for the embedded database in ${dataDir} to answer (${s} s so far): it is slow to start on a busy machine`
      ))
      yield* wait("539 seconds")
      expect(fiber.unsafePoll()).toBeNull()
      yield* wait("2 seconds")
      const cause = yield* failureOf(fiber)
      const said = messagesOf(cause === undefined ? undefined : Option.getOrUndefined(Cause.failureOption(cause)))
      expect(said[0]).toBe(
        `The embedded database in ${dataDir} opened but did not answer within 10m: check that this machine has CPU and memory to spare ` +
          `(its load, free memory), then start again; if it happens again, leave ${dataDir} as it is and report it`
      )
      expect(said.join("\n")).not.toMatch(/PostgreSQL|5432/)
    }))

  it.scoped.skipIf(serverUrl === undefined)("the embedded database that answers after a minute is used", () =>
    Effect.gen(function*() {
      const socketDir = yield* temporaryDirectory
      const standIn = yield* silentServer({ path: path.join(socketDir, ".s.PGSQL.5432") })
      const lines: Array<string> = []
      const fiber = yield* building(Postgres.pooledClient(Pglite.poolOptions("/srv/mailroom-data/pglite", socketDir)), lines)
      yield* Effect.promise(() => standIn.connected)
      yield* wait("1 minute")
      expect(fiber.unsafePoll()).toBeNull()
      const server = new URL(serverUrl!)
      standIn.release({ host: server.hostname, port: Number(server.port || 5432) })
      expect(yield* Fiber.join(fiber)).toEqual([{ one: 1 }])
      expect(lines).toHaveLength(4)
    }), 30_000)
})
