/**
 * How the process writes its log: Effect's pretty logger for a terminal (`LOG_FORMAT=pretty`, the
 * default; a node running some roles names them on each line), or one JSON object per line for a log pipeline (`LOG_FORMAT=json`) with `level`, `time`,
 * `message`, `role`, `node`, the fiber's log annotations, `trace_id`/`span_id` inside a traced span
 * and `error` (the cause, rendered) when the line carries one. Chosen once, here, for the process.
 *
 * What may be logged: ids, sizes, codes, durations. Never secrets (API keys, passwords, tokens,
 * webhook secrets), message bodies or, at `info` and above, addresses: test/ops/observability.test.ts
 * reads every line of a whole session at `debug` and checks. Lines that mean to name an address log it
 * at `debug`; any other that comes to hold one (an SMTP reply quoted in a warning, an event id, a
 * refusal's reason) has its local part left out by the logger (`withoutAddresses`), whichever format.
 */
import * as os from "node:os"
import { Cause, Context, FiberRef, FiberRefs, HashMap, Inspectable, Layer, List, Logger, LogLevel, Option, Tracer } from "effect"
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

/**
 * An address: a local part (bare, or quoted) and a domain of at least two labels ending in a name, so
 * that `node@22` or a version's `x@1.2.3` stay as they are. Its domain is kept (`…@example.com`): which
 * domain mail goes to or comes from is what an operator needs, and no person's address.
 */
const ADDRESS = /(?:"[^"\r\n]*"|[^\s<>()[\]{}"',;:@\\]+)@((?:[\p{L}\p{N}](?:[\p{L}\p{N}-]*[\p{L}\p{N}])?\.)+\p{L}[\p{L}\p{N}-]*)/gu

/** `text` with each address's local part left out (most lines hold no @, and cost no more than looking for one). */
const withoutAddress = (text: string): string => (text.includes("@") ? text.replace(ADDRESS, "…@$1") : text)

const scrubbed = (value: unknown, depth = 0): unknown => {
  if (typeof value === "string") return withoutAddress(value)
  if (depth > 3 || typeof value !== "object" || value === null) return value
  if (Array.isArray(value)) return value.map((item) => scrubbed(item, depth + 1))
  if (Object.getPrototypeOf(value) !== Object.prototype) return value
  return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, scrubbed(item, depth + 1)]))
}

/** A cause rendered with its addresses' local parts left out, as one error that renders as that text. */
const scrubbedCause = (cause: Cause.Cause<unknown>): Cause.Cause<unknown> => {
  const text = Cause.pretty(cause)
  const scrubbedText = withoutAddress(text)
  if (scrubbedText === text) return cause
  const firstLine = scrubbedText.split("\n", 1)[0]!
  const colon = firstLine.indexOf(": ")
  const error = new Error(colon < 0 ? firstLine : firstLine.slice(colon + 2))
  error.name = colon < 0 ? "Error" : firstLine.slice(0, colon)
  error.stack = scrubbedText
  return Cause.die(error)
}

/**
 * `logger` writing no address at `info` and above: the message's parts, the annotations' values and
 * the cause have each address's local part left out. `debug` and `trace` lines keep them.
 */
export const withoutAddresses = <A>(logger: Logger.Logger<unknown, A>): Logger.Logger<unknown, A> =>
  Logger.mapInputOptions(logger, (options: Logger.Logger.Options<unknown>) =>
    LogLevel.lessThan(options.logLevel, LogLevel.Info) ? options : {
      ...options,
      message: scrubbed(options.message),
      annotations: HashMap.map(options.annotations, (value) => scrubbed(value)),
      cause: Cause.isEmpty(options.cause) ? options.cause : scrubbedCause(options.cause)
    })

/** `logger` in place of the pretty one `runMain` installed (and of Effect's default). */
const instead = <A>(logger: Logger.Logger<unknown, A>) =>
  Layer.merge(Logger.replace(Logger.prettyLoggerDefault, withoutAddresses(logger)), Logger.remove(Logger.defaultLogger))

/**
 * The process's logger. `NodeRuntime.runMain` installs the pretty logger; JSON replaces it. A process
 * running only some roles (a node of a cluster) names them on each pretty line; one running them all
 * (`npm start`) has nothing to tell apart. Each writes no address at `info` and above. (`Logger.replace`
 * adds the replacement whichever was installed, and removes the pretty one.)
 */
export const loggerLayer = (config: AppConfigShape) =>
  instead(config.logFormat === "json" ? jsonLogger(config) : config.allRoles ? Logger.prettyLoggerDefault : rolesPrettyLogger(config))

