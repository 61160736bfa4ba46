/**
 * Entry point: `npm start` (all roles, embedded defaults) or `ROLES=api|smtp|worker …` in a cluster;
 * `mailroom reindex [--all]` (`npm run reindex`) re-embeds mail for search (src/reindex.ts).
 * A bad setting stops the process with a message naming the variable; SIGTERM and SIGINT drain
 * in-flight work, then exit 0.
 */
import { NodeRuntime } from "@effect/platform-node"
import { ConfigError, Duration, Effect, Layer, Logger, Runtime } from "effect"
import { appLayer } from "./app.ts"
import { type AppConfigShape, loadConfig } from "./config.ts"
import { loggerLayer, nodeId } from "./logging.ts"
import { reindex } from "./reindex.ts"

const describe = (error: ConfigError.ConfigError): string =>
  ConfigError.reduceWithContext(error, undefined, {
    andCase: (_, left, right) => `${left}\n${right}`,
    orCase: (_, left, right) => `${left}\n${right}`,
    invalidDataCase: (_, path, message) => `${path.join(".")}: ${message}`,
    missingDataCase: (_, path, message) => `${path.join(".")}: ${message}`,
    sourceUnavailableCase: (_, path, message) => `${path.join(".")}: ${message}`,
    unsupportedCase: (_, path, message) => `${path.join(".")}: ${message}`
  })

/**
 * Print why, then exit 1. The exit waits for the write: stderr to a pipe is asynchronous, and an
 * immediate exit can lose the message (seen when several processes start at once).
 */
const stopWith = (message: string) =>
  Effect.async<never>(() => {
    process.stderr.write(message, () => process.exit(1))
  })

const main = Effect.gen(function*() {
  const config = yield* loadConfig.pipe(
    Effect.catchAll((error) =>
      stopWith(`mailroom: invalid configuration\n${describe(error)}\n`)
    )
  )
  const [command, ...flags] = process.argv.slice(2)
  if (command === "reindex") {
    return yield* reindex(config, { all: flags.includes("--all") }).pipe(
      Effect.catchAll((error) => stopWith(`mailroom: reindex failed\n${error.message}\n`)),
      Logger.withMinimumLogLevel(config.logLevel)
    )
  }
  if (command !== undefined) return yield* stopWith(`mailroom: unknown command ${command} (commands: reindex [--all])\n`)
  return yield* serve(config)
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
    const onSignal = (signal: NodeJS.Signals) => {
      const started = Date.now()
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
    return yield* Layer.launch(appLayer(config)).pipe(
      // A role that cannot start (a port in use, say) is an operator's problem: say what, not where.
      Effect.catchAll((error) =>
        stopWith(`mailroom: could not start\n${error instanceof Error ? error.message : String(error)}\n`)
      ),
      Effect.onInterrupt(() => Effect.logInfo("Shutdown complete"))
    )
  }).pipe(
    Effect.provide(loggerLayer(config)),
    Logger.withMinimumLogLevel(config.logLevel),
    // Spans go nowhere without an exporter; building them (with stack traces) costs every request.
    Effect.withTracerEnabled(false)
  )

NodeRuntime.runMain(main)
