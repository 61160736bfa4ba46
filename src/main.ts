/**
 * Entry point: `npm start` (all roles, embedded defaults) or `ROLES=api|smtp|worker …` in a cluster;
 * `mailroom reindex [--all]` (`npm run reindex`) re-embeds mail for search (src/reindex.ts).
 * A bad setting stops the process with a message naming the variable; SIGTERM and SIGINT drain
 * in-flight work, then exit 0.
 */
import { NodeRuntime } from "@effect/platform-node"
import { ConfigError, Effect, Layer, Logger } from "effect"
import { appLayer } from "./app.ts"
import { loadConfig } from "./config.ts"
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
  yield* Effect.logInfo(`Starting roles ${config.roles.join(", ")}`)
  return yield* Layer.launch(appLayer(config)).pipe(
    // A role that cannot start (a port in use, say) is an operator's problem: say what, not where.
    Effect.catchAll((error) =>
      stopWith(`mailroom: could not start\n${error instanceof Error ? error.message : String(error)}\n`)
    ),
    Logger.withMinimumLogLevel(config.logLevel),
    // Spans go nowhere without an exporter; building them (with stack traces) costs every request.
    Effect.withTracerEnabled(false)
  )
})

NodeRuntime.runMain(main)
