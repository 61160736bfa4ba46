/**
 * Entry point: `npm start` (all roles, embedded defaults) or `ROLES=api|smtp|worker|indexer|mta …` in a cluster;
 * `mailroom <command>` runs an operator's command (src/cli.ts lists them; `mailroom reindex [--all]`
 * re-embeds mail for search, src/reindex.ts).
 * A bad setting stops the process with a message naming the variable; SIGTERM and SIGINT drain
 * in-flight work, then exit 0.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { ConfigError, Deferred, Duration, Effect, Layer, Logger, LogLevel, Runtime } from "effect"
import { type AppConfigShape, configFailure, loadConfigFor, settingsFrom } from "./config.ts"
import { loggerLayer, nodeId } from "./logging.ts"
import { commands, usage, UsageError } from "./usage.ts"

// The server and the commands are loaded when asked for: `mailroom help` need not load them all.
const load = {
  app: Effect.promise(() => import("./app.ts")),
  cli: Effect.promise(() => import("./cli.ts")),
  reindex: Effect.promise(() => import("./reindex.ts")),
  tracing: Effect.promise(() => import("./tracing.ts"))
}

/**
 * An error and what caused it, as one line each: "Could not connect to PostgreSQL at ..." says little without
 * its cause ("getaddrinfo ENOTFOUND db.internal"), and a server that could not listen says nothing
 * but through its cause ("listen EADDRINUSE: address already in use 127.0.0.1:3000").
 */
const reasons = (error: unknown): string => {
  const lines: Array<string> = []
  let current: unknown = error
  for (let depth = 0; depth < 5 && current !== undefined && current !== null; depth++) {
    const message = current instanceof Error ? current.message : typeof current === "string" ? current : ""
    if (message.trim() !== "" && !lines.includes(message.trim())) lines.push(message.trim())
    // A connection to a name with both an IPv6 and an IPv4 address fails as an AggregateError with no
    // message of its own: each attempt's says why ("connect ECONNREFUSED ::1:5432").
    if (current instanceof AggregateError) {
      for (const inner of current.errors) {
        const said = inner instanceof Error ? inner.message.trim() : ""
        if (said !== "" && !lines.includes(said)) lines.push(said)
      }
    }
    current = typeof current === "object" && "cause" in current ? (current as { readonly cause?: unknown }).cause : undefined
  }
  return lines.length === 0 ? String(error) : lines.join("\n")
}

/**
 * Print why, then exit 1. The exit waits for the write: stderr to a pipe is asynchronous, and an
 * immediate exit can lose the message (seen when several processes start at once).
 */
const stopWith = (message: string) =>
  Effect.async<never>(() => {
    process.stderr.write(message, () => process.exit(1))
  })

/** A wrong command line: why, and where the commands are listed; exit 2. */
const usageError = (message: string) =>
  Effect.async<never>(() => {
    process.stderr.write(`mailroom: ${message}\nRun \`mailroom help\` for the commands.\n`, () => process.exit(2))
  })

const main = Effect.gen(function*() {
  const [command = "serve", ...args] = process.argv.slice(2)
  if (command === "help" || command === "--help" || command === "-h") {
    return yield* Effect.sync(() => process.stdout.write(usage))
  }
  if (!(commands as ReadonlyArray<string>).includes(command)) return yield* usageError(`unknown command ${command}`)
  const config = yield* loadConfigFor(command).pipe(
    Effect.withConfigProvider(settingsFrom(process.env)),
    Effect.catchAll((error) => stopWith(configFailure(error)))
  )
  if (command === "serve") {
    if (args.length > 0) return yield* usageError(`serve takes no arguments (got ${args.join(" ")})`)
    return yield* serve(config)
  }
  if (command === "reindex") {
    const unknown = args.filter((arg) => arg !== "--all")
    if (unknown.length > 0) return yield* usageError(`reindex takes only --all (got ${unknown.join(" ")})`)
    // \`npm run reindex --all\` hands --all to npm, which passes it on as npm_config_all.
    const all = args.includes("--all") || process.env.npm_config_all === "true"
    const { reindex } = yield* load.reindex
    return yield* reindex(config, { all }).pipe(
      Effect.catchAll((error) => stopWith(`mailroom: reindex failed\n${reasons(error)}\n`)),
      Logger.withMinimumLogLevel(config.logLevel)
    )
  }
  const { runCommand } = yield* load.cli
  return yield* runCommand(config, command, args).pipe(
    Effect.catchAll((error) =>
      error instanceof UsageError
        ? usageError(error.message)
        : ConfigError.isConfigError(error)
        ? stopWith(configFailure(error))
        : stopWith(`mailroom: ${[command, ...args.slice(0, 1)].join(" ")} failed: ${reasons(error)}\n`)
    ),
    Effect.provide(loggerLayer(config)),
    // Commands print their results; the log says only what went wrong.
    Logger.withMinimumLogLevel(LogLevel.Warning)
  )
})

/**
 * Run the roles until SIGTERM or SIGINT. `runMain` then interrupts this fiber: every role drains as
 * its scope closes (SMTP answers new connections 421 and finishes DATA in flight, consumers finish
 * or return their message, HTTP finishes the requests in flight), and the process exits 0. Past
 * SHUTDOWN_TIMEOUT the process exits 1 with whatever was still running cut off.
 */
const serve = (config: AppConfigShape) =>
  Effect.gen(function*() {
    const runtime = yield* Effect.runtime<never>()
    const stopping = yield* Deferred.make<void>()
    const onSignal = (signal: NodeJS.Signals) => {
      const started = Date.now()
      Runtime.runSync(runtime)(Deferred.succeed(stopping, undefined))
      Runtime.runFork(runtime)(
        Effect.logInfo(`${signal}: shutting down, draining for up to ${Duration.format(config.shutdownTimeout)}`)
      )
      setTimeout(() => {
        Runtime.runSync(runtime)(Effect.logError(`Shutdown took longer than SHUTDOWN_TIMEOUT (${Date.now() - started} ms): exiting`))
        process.exit(1)
      }, Duration.toMillis(config.shutdownTimeout)).unref()
    }
    process.once("SIGTERM", onSignal)
    process.once("SIGINT", onSignal)
    yield* Effect.logInfo(`Starting roles ${config.roles.join(", ")} (node ${nodeId})`)
    const { appLayer } = yield* load.app
    return yield* Layer.launch(appLayer(config, Deferred.await(stopping))).pipe(
      // A role that cannot start (a port in use, say) is an operator's problem: say what, not where;
      // in the JSON log too, where a pipeline looks for why a node stopped (level fatal).
      // A setting only a role's making reads (DKIM_PRIVATE_KEY's file) is refused as any setting is.
      Effect.catchAll((error) => {
        const said = ConfigError.isConfigError(error) ? configFailure(error) : `mailroom: could not start\n${reasons(error)}\n`
        return Effect.zipRight(
          config.logFormat === "json" ? Effect.logFatal("Could not start", { reasons: said.trim() }) : Effect.void,
          stopWith(said)
        )
      }),
      Effect.onInterrupt(() => Effect.logInfo("Shutdown complete"))
    )
  }).pipe(
    Effect.provide(loggerLayer(config)),
    Logger.withMinimumLogLevel(config.logLevel),
    // With an OTLP endpoint spans are exported (src/tracing.ts); without one they would go nowhere,
    // and building them costs every request.
    (effect) => Effect.flatMap(load.tracing, ({ withTracing }) => withTracing(config)(effect))
  )

NodeRuntime.runMain(main)
