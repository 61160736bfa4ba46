/**
 * How the process writes its log: Effect's pretty logger for a terminal (`LOG_FORMAT=pretty`, the
 * default; a node running some roles names them on each line), or one JSON object per line for a log pipeline (`LOG_FORMAT=json`) with `level`, `time`,
 * `message`, `role`, `node`, the fiber's log annotations, `trace_id`/`span_id` inside a traced span
 * and `error` (the cause, rendered) when the line carries one. Chosen once, here, for the process.
 *
 * What may be logged: ids, sizes, codes, durations. Never secrets (API keys, passwords, tokens,
 * webhook secrets), message bodies or, at `info`, addresses: test/ops/logs.test.ts reads every line
 * of a whole session at `debug` and checks.
 */
import * as os from "node:os"
import { Cause, Context, FiberRef, FiberRefs, HashMap, Inspectable, Layer, List, Logger, Option, Tracer } from "effect"
import type { AppConfigShape } from "./config.ts"

/** Which process wrote a line: host and pid, unique among the nodes of a cluster at a time. */
export const nodeId = `${os.hostname()}:${process.pid}`

const textOf = (part: unknown): string => (typeof part === "string" ? part : Inspectable.toStringUnknown(part, 0))

/** One log line as a JSON object. */
export const jsonLine = (
  base: { readonly role: string; readonly node: string },
  options: Logger.Logger.Options<unknown>
): Record<string, unknown> => {
  const parts = Array.isArray(options.message) ? options.message : [options.message]
  const line: Record<string, unknown> = {
    level: options.logLevel.label.toLowerCase(),
    time: options.date.toISOString(),
    message: parts.filter((part) => typeof part === "string").join(" "),
    role: base.role,
    node: base.node
  }
  const extra = parts.filter((part) => typeof part !== "string")
  if (extra.length > 0) line.details = extra.length === 1 ? extra[0] : extra
  for (const [key, value] of HashMap.toEntries(options.annotations)) {
    if (!(key in line)) line[key] = value
  }
  const span = Context.getOption(FiberRefs.getOrDefault(options.context, FiberRef.currentContext), Tracer.ParentSpan)
  // Spans of a disabled tracer carry placeholder ids ("noop", "native"): nothing to correlate.
  if (Option.isSome(span) && /^[0-9a-f]{32}$/.test(span.value.traceId)) {
    line.trace_id = span.value.traceId
    line.span_id = span.value.spanId
  }
  if (!Cause.isEmpty(options.cause)) line.error = Cause.pretty(options.cause)
  if (!List.isNil(options.spans)) line.spans = List.toArray(options.spans).map((s) => s.label)
  return line
}

const jsonLogger = (config: AppConfigShape) => {
  const base = { role: config.roles.join(","), node: nodeId }
  return Logger.make<unknown, void>((options) => {
    let text: string
    try {
      text = JSON.stringify(jsonLine(base, options))
    } catch {
      // A value JSON cannot hold (a cycle, a bigint): keep the line, render the value as text.
      text = JSON.stringify({ ...jsonLine(base, { ...options, message: textOf(options.message) }), details: undefined })
    }
    process.stdout.write(`${text}\n`)
  })
}

/**
 * The pretty logger, each line's message led by the process's roles (`[smtp] SMTP listening on …`):
 * nodes of a cluster writing to one terminal or journal are told apart, as JSON lines are by `role`.
 */
const rolesPrettyLogger = (config: AppConfigShape) => {
  const prefix = `[${config.roles.join(",")}]`
  return Logger.prettyLoggerDefault.pipe(Logger.mapInput((message: unknown) => {
    const parts = Array.isArray(message) ? message : [message]
    return typeof parts[0] === "string" ? [`${prefix} ${parts[0]}`, ...parts.slice(1)] : [prefix, ...parts]
  }))
}

/** `logger` in place of the pretty one `runMain` installed (and of Effect's default). */
const instead = <A>(logger: Logger.Logger<unknown, A>) =>
  Layer.merge(Logger.replace(Logger.prettyLoggerDefault, logger), Logger.remove(Logger.defaultLogger))

/**
 * The process's logger. `NodeRuntime.runMain` installs the pretty logger; JSON replaces it. A process
 * running only some roles (a node of a cluster) names them on each pretty line; one running them all
 * (`npm start`) has nothing to tell apart. (`Logger.replace` adds the replacement whichever was
 * installed, and removes the pretty one.)
 */
export const loggerLayer = (config: AppConfigShape) =>
  config.logFormat === "json" ? instead(jsonLogger(config)) : config.allRoles ? Layer.empty : instead(rolesPrettyLogger(config))

