/**
 * What every request must satisfy before a route reads it, so that no input reaches a place where it
 * can only fail as a 500 (issue 14, "no 500s from input"). One check at the edge, not one per route:
 *
 * - **A body is JSON.** A request body on any route but the local payment pages (HTML forms) must be
 *   `application/json` or a `+json` type, in UTF-8; anything else — a form, multipart, text, or a body
 *   with no `Content-Type` at all — is 415 UNSUPPORTED_MEDIA_TYPE. Left alone, the platform guesses: it
 *   reads a missing type as JSON, a form as an object and multipart as files, and a route would act on
 *   whatever came out. An empty body is no body, whatever type it claims.
 * - **JSON nests at most 64 levels.** Deeper values are refused (400 VALIDATION_ERROR, `details.body`)
 *   before any schema sees them: a decode error describes the value it rejects, one stack frame per level.
 * - **No text holds NUL (U+0000)**, which PostgreSQL `text` cannot store. A NUL in a body string or key,
 *   a query parameter or a path parameter is 400 VALIDATION_ERROR with `details` naming the field (for
 *   the dashboard's bodies under `details.field_errors`, as surface.ts tells field errors there).
 * - **No body text holds a lone surrogate** (`"\ud800"`: half of a character, which JSON's escapes can
 *   write and no UTF-8 can): stored, it became U+FFFD, so a label or name read back was not the one
 *   written, and what events carried of it was not valid UTF-8. Refused as a NUL is.
 * - **A body is UTF-8.** Bytes that are not (Latin-1's "é" as one byte, a cut character) are 400
 *   VALIDATION_ERROR on `details.body` naming the first one and where it is: read as text, each became
 *   U+FFFD and the request was taken with its characters lost.
 *
 * - **A query parameter a route reads is given once.** Twice (`?limit=1&limit=2`) is 400
 *   VALIDATION_ERROR on it ("must be given once"); the decoder would have said "must be a string".
 *
 * Path and query parameters are named from the HttpApi contract, so a new route is covered without a change here.
 */
import { Headers, HttpApi, HttpMethod, type HttpServerError, HttpServerRequest } from "@effect/platform"
import { Effect, Option, SchemaAST, Stream } from "effect"
import { type ApiError, UnsupportedMediaType, ValidationError } from "../../services/errors.ts"
import { firstInvalidUtf8 } from "../../services/mail/charsets.ts"
import { MailroomApi } from "./api.ts"
import { SessionAuthentication } from "./security.ts"
import { paymentForms } from "./billing/payment-pages.ts"
import { unsubscribeForms } from "./outbound/unsubscribe-pages.ts"
import { forwardingForms } from "./forwarding/pages.ts"
import { forSurface, type Surface } from "./surface.ts"

const MAX_JSON_DEPTH = 64

/**
 * The pages that take a form (POST), not JSON (pages.ts): their bodies are left to them. Matched
 * exactly as the pages link to themselves; any other spelling is held to the JSON rule.
 */
const readsForm = (method: string, pathname: string) =>
  method === "POST" && [...paymentForms, ...unsubscribeForms, ...forwardingForms].some((form) => form.test(pathname))

const NUL = "\u0000"
export const NO_NUL = "must not contain NUL characters (\\u0000)"
const NO_LONE_SURROGATE = "must be valid Unicode: it holds half of a character (a lone surrogate such as \\ud800)"
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

/** A field name as it can be shown: a NUL in a key is spelled out. */
const shown = (name: string) => name.replaceAll(NUL, "\\u0000")

// ---------------------------------------------------------------------------------------------
// The contract's routes, to name path parameters and to know which surface answers

interface Route {
  readonly method: string
  readonly segments: ReadonlyArray<string>
  readonly surface: Surface
  /** The query parameters the route reads (each takes one value). */
  readonly queryFields: ReadonlySet<string>
}

const contractRoutes = (): ReadonlyArray<Route> => {
  const found: Array<Route> = []
  HttpApi.reflect(MailroomApi, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, group }) => {
      found.push({
        method: endpoint.method,
        segments: endpoint.path.split("/").filter((segment) => segment.length > 0),
        // The dashboard groups are the ones behind a session; they tell field errors their own way.
        surface: [...group.middlewares].some((tag) => tag.key === SessionAuthentication.key) ? "dashboard" : "api",
        queryFields: new Set(
          Option.match(endpoint.urlParamsSchema, {
            onNone: () => [],
            onSome: (schema) => SchemaAST.getPropertySignatures(SchemaAST.encodedAST(schema.ast)).flatMap(({ name }) => typeof name === "string" ? [name] : [])
          })
        )
      })
    }
  })
  return found
}

const routes = contractRoutes()

const decodeSegment = (segment: string) => {
  try {
    return decodeURIComponent(segment)
  } catch {
    return segment
  }
}

/**
 * The route `method` and `segments` (decoded) reach, matched as leniently as the router matches
 * (case, empty segments), preferring literal segments over parameters; with its parameters.
 */
const findRoute = (method: string, segments: ReadonlyArray<string>) => {
  const wanted = method === "HEAD" ? "GET" : method
  let best: { readonly route: Route; readonly params: Record<string, string>; readonly literals: number } | undefined
  for (const route of routes) {
    if (route.method !== wanted || route.segments.length !== segments.length) continue
    const params: Record<string, string> = {}
    let literals = 0
    let matches = true
    for (let i = 0; i < segments.length && matches; i++) {
      const expected = route.segments[i]!
      if (expected.startsWith(":")) params[expected.slice(1)] = segments[i]!
      else if (expected.toLowerCase() === segments[i]!.toLowerCase()) literals++
      else matches = false
    }
    if (matches && (best === undefined || literals > best.literals)) best = { route, params, literals }
  }
  return best
}

// ---------------------------------------------------------------------------------------------
// Media type

const accepted = { accepted: "application/json", charset: "utf-8" }

/** A Content-Type's media type without its parameters, lower case. */
const essenceOf = (header: string) => header.split(";")[0]!.trim().toLowerCase()

const isJsonType = (essence: string) => essence === "application/json" || /^application\/[a-z0-9!#$&^_.-]+\+json$/.test(essence)

/** The media type (its essence, lower case) of a body, or why it is refused. */
const mediaType = (header: string | undefined): string | UnsupportedMediaType => {
  if (header === undefined || header.trim() === "") {
    return new UnsupportedMediaType({
      message: "The request body has no Content-Type: send it as JSON with Content-Type: application/json",
      details: { ...accepted, received: null }
    })
  }
  const essence = essenceOf(header)
  const parameters = header.split(";").slice(1).map((part) => part.trim().toLowerCase())
  const charset = parameters.find((parameter) => parameter.startsWith("charset="))?.slice("charset=".length).replace(/^"|"$/g, "")
  if (!isJsonType(essence) || (charset !== undefined && charset !== "utf-8" && charset !== "utf8")) {
    return new UnsupportedMediaType({
      message: `Request bodies are JSON: send Content-Type: application/json, not ${header.slice(0, 100)}`,
      details: { ...accepted, received: header.slice(0, 200) }
    })
  }
  return essence
}

// ---------------------------------------------------------------------------------------------
// JSON text

/** Whether the JSON `text` opens more than `limit` arrays or objects inside one another. One pass, no parse. */
const nestsDeeperThan = (text: string, limit: number): boolean => {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 92) i++ // a backslash: skip what it escapes
      else if (c === 34) inString = false
    } else if (c === 34) inString = true
    else if (c === 91 || c === 123) {
      if (++depth > limit) return true
    } else if (c === 93 || c === 125) depth--
  }
  return false
}

/** What a string or key may not hold, if `text` holds it. */
const textProblem = (text: string): string | undefined =>
  text.includes(NUL) ? NO_NUL : LONE_SURROGATE.test(text) ? NO_LONE_SURROGATE : undefined

/** The path to the first string or key in `value` that `textProblem` refuses, and why. Recursion is bounded by the depth check. */
const refusedPath = (value: unknown, path: ReadonlyArray<string>): { readonly path: ReadonlyArray<string>; readonly problem: string } | undefined => {
  if (typeof value === "string") {
    const problem = textProblem(value)
    return problem === undefined ? undefined : { path, problem }
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = refusedPath(value[i], [...path, String(i)])
      if (found) return found
    }
    return undefined
  }
  if (typeof value === "object" && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      const problem = textProblem(key)
      if (problem !== undefined) return { path: [...path, key], problem }
      const found = refusedPath(item, [...path, key])
      if (found) return found
    }
  }
  return undefined
}

const fieldError = (surface: Surface, field: string, message: string) =>
  forSurface(surface, new ValidationError({ message: `Invalid request: ${field} ${message}`, details: { [field]: message } }))

/** The field of `value` (a path such as `to.0`) holding the first NUL or lone surrogate, if any, and why it is refused. */
export const refusedText = (value: unknown): { readonly field: string; readonly problem: string } | undefined => {
  const found = refusedPath(value, [])
  return found === undefined
    ? undefined
    : { field: found.path.length === 0 ? "body" : found.path.map(shown).join("."), problem: found.problem }
}

/**
 * What is wrong with a JSON body's text, if anything. Text that is not JSON is left to the decoder
 * (400 BAD_REQUEST). Without `strings`, a NUL or lone surrogate is left to the route (MCP refuses it as a tool's error).
 */
const bodyProblem = (text: string, surface: () => Surface, strings: boolean): ValidationError | undefined => {
  if (nestsDeeperThan(text, MAX_JSON_DEPTH)) {
    return fieldError(surface(), "body", `must not nest arrays or objects more than ${MAX_JSON_DEPTH} levels deep`)
  }
  // A NUL or a surrogate reaches a string only through its escape; the parse is paid only when one may be there.
  if (!strings || !/\\u(?:0000|d[89a-f])/i.test(text)) return undefined
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return undefined
  }
  const refused = refusedText(parsed)
  return refused === undefined ? undefined : fieldError(surface(), refused.field, refused.problem)
}

// ---------------------------------------------------------------------------------------------
// UTF-8

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

/** A body's bytes as text, or why they are refused: they are not UTF-8. */
const bodyText = (bytes: Uint8Array, surface: () => Surface): string | ValidationError => {
  try {
    return utf8.decode(bytes)
  } catch {
    const at = firstInvalidUtf8(bytes)
    const byte = bytes[at]?.toString(16).toUpperCase().padStart(2, "0")
    const where = byte === undefined ? "it ends inside a character" : `byte 0x${byte} at offset ${at} is not`
    return fieldError(surface(), "body", `must be UTF-8: ${where} (send text as UTF-8, as Content-Type: application/json says)`)
  }
}

/**
 * `request` with its body already read as `text`: what routes read (`text`, and `json` and the rest
 * through it) is that text, not the consumed stream again; so is a copy `modify` makes (a router
 * that rewrites the URL).
 */
const withBody = (request: HttpServerRequest.HttpServerRequest, text: string): HttpServerRequest.HttpServerRequest => {
  const read = Effect.succeed(text)
  const bytes = () => new TextEncoder().encode(text)
  const modify: HttpServerRequest.HttpServerRequest["modify"] = (options) => withBody(request.modify(options), text)
  return new Proxy(request, {
    get: (target, property, receiver) =>
      property === "text"
        ? read
        : property === "arrayBuffer"
        ? Effect.sync(() => bytes().buffer)
        : property === "stream"
        ? Stream.sync(bytes)
        : property === "modify"
        ? modify
        : Reflect.get(target, property, receiver)
  })
}

/**
 * Why a query parameter's name or value as written in the URL (`raw`) is refused, if it is: its
 * %-escapes must spell UTF-8, as the body must be UTF-8. Read with replacement characters, a Latin-1
 * client's `q=caf%E9` searched for "caf�" and found nothing, saying nothing. A `%` not followed by two
 * hex digits is a `%` (as URLSearchParams reads it), not an escape.
 */
const queryEscapeProblem = (raw: string): string | undefined => {
  for (const run of raw.match(/(?:%[0-9A-Fa-f]{2})+/g) ?? []) {
    // A run of well-formed escapes: decodeURIComponent refuses it only when its bytes are not UTF-8.
    try {
      decodeURIComponent(run)
    } catch {
      return `must be UTF-8 once its %-escapes are decoded: ${run} is not (é is %C3%A9 in UTF-8)`
    }
  }
  return undefined
}

// ---------------------------------------------------------------------------------------------

/** Whether a body is declared: a length over 0, or chunks (which may yet turn out to be none). */
const bodyDeclared = (request: HttpServerRequest.HttpServerRequest): "none" | "length" | "chunked" => {
  if (!HttpMethod.hasBody(request.method)) return "none"
  if (request.headers["transfer-encoding"] !== undefined) return "chunked"
  return Number(request.headers["content-length"] ?? 0) > 0 ? "length" : "none"
}

/**
 * Screen `request`: fails with the error to answer, or succeeds with the request the routes are to
 * read (its body already read, so a route reading it again gets the same text).
 */
export const screen = (
  request: HttpServerRequest.HttpServerRequest
): Effect.Effect<HttpServerRequest.HttpServerRequest, ApiError | HttpServerError.RequestError> =>
  Effect.gen(function*() {
    const queryAt = request.url.indexOf("?")
    const pathname = queryAt === -1 ? request.url : request.url.slice(0, queryAt)
    const segments = pathname.split("/").filter((segment) => segment.length > 0).map(decodeSegment)

    // Path: name the parameter when the contract knows the route.
    if (segments.some((segment) => segment.includes(NUL))) {
      const params = findRoute(request.method, segments)?.params ?? {}
      const param = Object.entries(params).find(([, value]) => value.includes(NUL))?.[0]
      return yield* fieldError("api", param ?? "path", NO_NUL)
    }

    // Query string. A parameter the route reads takes one value: given twice, which one was meant is
    // unknown (the decoder would say it "must be a string", of a list the client never wrote).
    if (queryAt !== -1) {
      const search = request.url.slice(queryAt + 1)
      if (search.includes("%")) {
        for (const pair of search.split("&")) {
          const equals = pair.indexOf("=")
          const [rawKey, rawValue] = equals === -1 ? [pair, ""] : [pair.slice(0, equals), pair.slice(equals + 1)]
          const problem = queryEscapeProblem(rawKey) ?? queryEscapeProblem(rawValue)
          if (problem === undefined) continue
          // Named as decoded (a name's own bad escape shown as U+FFFD).
          const name = new URLSearchParams(`${rawKey}=`).keys().next().value ?? rawKey
          return yield* fieldError("api", shown(name), problem)
        }
      }
      const query = new URLSearchParams(search)
      for (const [key, value] of query) {
        if (key.includes(NUL) || value.includes(NUL)) return yield* fieldError("api", shown(key), NO_NUL)
      }
      // The route is looked up only when some parameter is given twice: most requests repeat none.
      const twice = [...new Set(query.keys())].filter((key) => query.getAll(key).length > 1)
      const route = twice.length === 0 ? undefined : findRoute(request.method, segments)?.route
      const repeated = route === undefined ? undefined : twice.find((key) => route.queryFields.has(key))
      // Told as any query parameter's problem is, the same on both surfaces (errors.ts).
      if (repeated !== undefined) return yield* fieldError("api", repeated, "must be given once")
    }

    const declared = bodyDeclared(request)
    if (readsForm(request.method, pathname)) return request
    if (declared === "none") {
      // Nothing to read, whatever Content-Type says: read as JSON, an empty body is what no body is. (Left
      // as it came, an empty multipart body without a boundary failed in the platform's parser: a 500.)
      const claimed = request.headers["content-type"]
      return claimed === undefined || isJsonType(essenceOf(claimed))
        ? request
        : request.modify({ headers: Headers.set(request.headers, "content-type", "application/json") })
    }

    const type = mediaType(request.headers["content-type"])
    if (type instanceof UnsupportedMediaType) {
      // Some clients send an empty chunked body on a POST that has nothing to say: no body, no rule.
      if (declared === "chunked" && (yield* request.text).length === 0) return request
      return yield* type
    }
    // The platform reads only `application/json` as JSON; a `+json` type is JSON too.
    const reading = type === "application/json"
      ? request
      : request.modify({ headers: Headers.set(request.headers, "content-type", "application/json") })
    const surface = () => findRoute(request.method, segments)?.route.surface ?? "api"
    const text = bodyText(new Uint8Array(yield* reading.arrayBuffer), surface)
    if (text instanceof ValidationError) return yield* text
    // MCP answers a tool call's NUL or lone surrogate as the tool's refusal (src/http/mcp/http.ts), which a model reads.
    const problem = bodyProblem(text, surface, pathname !== "/mcp")
    if (problem) return yield* problem
    return withBody(reading, text)
  })
