/**
 * The published OpenAPI document (`/v1/openapi.json`, /docs): what HttpApi generates from the
 * contract, finished by `publish(groups)`, an `OpenApi.Transform` on the API (api.ts), with what
 * the generator cannot know from the contract alone:
 *
 * - **Credentials.** Our middlewares read their credentials themselves (middleware.ts: one
 *   authentication and one rate-limit count, whichever credential came), so their tags do not
 *   declare `security:`, which would make the platform try each scheme in turn with its own
 *   decoding. The schemes are declared here with `HttpApiSecurity`, and each operation lists the
 *   ones its group's middleware accepts.
 * - **Decode errors.** HttpApi documents its `HttpApiDecodeError` on every route, but the server
 *   never sends it: errors.ts answers it as 400 VALIDATION_ERROR in SPEC's envelope, which every
 *   route declares. It is left out, with the components only it used.
 * - **Error answers** name the codes they carry and when, one line per code.
 * - **Rate-limit headers** on every answer of the API's paths (SPEC "Rate limits"), `Retry-After` on
 *   its 429s and 503s: the middleware sets them, no endpoint declares them.
 * - **Schema ids.** The generator marks each `Schema.Unknown` with the same `$id` (`/schemas/unknown`):
 *   a document holding it twice is refused by JSON Schema validators (one id, two schemas), so those
 *   ids are left out; each is an empty schema, any value.
 * - **Bodies that may be left out** (optional-body.ts) are not `required`.
 * - **Body refusals.** 413 PAYLOAD_TOO_LARGE and 415 UNSUPPORTED_MEDIA_TYPE are declared on the whole
 *   API (api.ts: the edge, middleware and input-rules.ts, answers them before any handler), but only a
 *   body is refused so: they are documented on the routes that take one (a request body, or a body the
 *   handler reads itself, which then declares them), and on those whose handler answers them itself
 *   (a draft or a meeting's mail past the plan's size), not on the rest.
 * - **Webhooks**: the event payloads receivers get (SPEC "Events"), under OpenAPI 3.1's `webhooks`.
 */
import { HttpApi, HttpApiBuilder, type HttpApiGroup, HttpApiSecurity, HttpApiSwagger, HttpServerResponse, OpenApi } from "@effect/platform"
import { Context, Effect, Layer, Option, SchemaAST } from "effect"
import { eventKinds, EventPayloads } from "../../services/webhooks/schemas.ts"
import { withoutGeneratedTitles } from "./json-schema.ts"
import { isOptionalBody } from "./optional-body.ts"
import { ApiAuthentication, SESSION_COOKIE, SessionAuthentication } from "./security.ts"

// ---------------------------------------------------------------------------------------------
// Credentials

const schemes = {
  apiKey: HttpApiSecurity.apiKey({ key: "X-API-Key", in: "header" }).pipe(
    HttpApiSecurity.annotate(OpenApi.Description, "An API key (made with POST /v1/api-keys)")
  ),
  bearer: HttpApiSecurity.bearer.pipe(
    HttpApiSecurity.annotate(
      OpenApi.Description,
      "`Authorization: Bearer <token>`: an API key or a login's access token on /v1 routes; an access token on the dashboard's /api routes"
    )
  ),
  session: HttpApiSecurity.apiKey({ key: SESSION_COOKIE, in: "cookie" }).pipe(
    HttpApiSecurity.annotate(
      OpenApi.Description,
      "The dashboard session cookie set by login (/api routes); a cookie-authenticated write must come with this site's Origin header"
    )
  )
}

type Scheme = keyof typeof schemes

/** What each authenticating middleware (security.ts) accepts: any one of these. */
const accepted: Record<string, ReadonlyArray<Scheme>> = {
  [ApiAuthentication.key]: ["apiKey", "bearer"],
  [SessionAuthentication.key]: ["session", "bearer"]
}

/** `security` as OpenAPI spells it. */
const securityScheme = (security: HttpApiSecurity.HttpApiSecurity) => {
  const meta = Option.match(Context.getOption(security.annotations, OpenApi.Description), {
    onNone: () => ({}),
    onSome: (description) => ({ description })
  })
  switch (security._tag) {
    case "ApiKey":
      return { ...meta, type: "apiKey", name: security.key, in: security.in }
    case "Bearer":
      return { ...meta, type: "http", scheme: "bearer" }
    case "Basic":
      return { ...meta, type: "http", scheme: "basic" }
  }
}

/** `operationId → security requirements` for every endpoint of `api`, from the middleware it runs behind. */
const requirements = <Id extends string, Groups extends HttpApiGroup.HttpApiGroup.Any, E, R>(api: HttpApi.HttpApi<Id, Groups, E, R>) => {
  const found = new Map<string, Array<Record<string, Array<string>>>>()
  HttpApi.reflect(api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, group, middleware }) => {
      const names = [...middleware].flatMap((tag) => accepted[tag.key] ?? [])
      // The generator's default operationId (OpenApi.fromApi).
      found.set(group.topLevel ? endpoint.name : `${group.identifier}.${endpoint.name}`, names.map((name) => ({ [name]: [] })))
    }
  })
  return found
}

/** The operationIds of `api`'s endpoints whose body may be left out (optional-body.ts). */
const optionalBodies = <Id extends string, Groups extends HttpApiGroup.HttpApiGroup.Any, E, R>(api: HttpApi.HttpApi<Id, Groups, E, R>) => {
  const found = new Set<string>()
  HttpApi.reflect(api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, group }) => {
      if (Option.exists(endpoint.payloadSchema, (schema) => isOptionalBody(schema.ast))) {
        found.add(group.topLevel ? endpoint.name : `${group.identifier}.${endpoint.name}`)
      }
    }
  })
  return found
}

/**
 * `operationId → statuses` that `api`'s routes declare themselves (their endpoint's or group's errors),
 * among those only a body is refused with: what stays documented on a route that declares no body.
 */
const BODY_STATUSES = ["413", "415"]

const ownBodyRefusals = <Id extends string, Groups extends HttpApiGroup.HttpApiGroup.Any, E, R>(api: HttpApi.HttpApi<Id, Groups, E, R>) => {
  const found = new Map<string, Set<string>>()
  HttpApi.reflect(api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, errors, group }) => {
      const own = BODY_STATUSES.filter((status) => errors.has(Number(status)))
      found.set(group.topLevel ? endpoint.name : `${group.identifier}.${endpoint.name}`, new Set(own))
    }
  })
  return found
}

// ---------------------------------------------------------------------------------------------
// Error answers

const DECODE_ERROR = "#/components/schemas/HttpApiDecodeError"

type Json = Record<string, any>

const componentOf = (spec: Json, ref: string): Json | undefined => spec.components.schemas[ref.replace("#/components/schemas/", "")]

/** An error answer without HttpApi's decode error, described by the codes it carries. */
const finishError = (spec: Json, response: Json) => {
  const content = response.content?.["application/json"]
  if (content === undefined) return
  const members: Array<Json> = (content.schema.anyOf ?? [content.schema]).filter((member: Json) => member.$ref !== DECODE_ERROR)
  content.schema = members.length === 1 ? members[0] : { anyOf: members }
  const lines = members.flatMap((member) => {
    const description = member.$ref ? componentOf(spec, member.$ref)?.description : member.description
    return typeof description === "string" ? [`- ${description}`] : []
  })
  if (lines.length > 0) response.description = lines.join("\n")
}

/** Every `$ref` under `value`. */
const refsIn = (value: unknown, into: Set<string>): Set<string> => {
  if (Array.isArray(value)) value.forEach((item) => refsIn(item, into))
  else if (typeof value === "object" && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      if (key === "$ref" && typeof item === "string") into.add(item)
      else refsIn(item, into)
    }
  }
  return into
}

/** Drop the schema components nothing refers to any more (what only HttpApiDecodeError used). */
const pruneComponents = (spec: Json) => {
  const schemas: Json = spec.components.schemas
  const { components: _, ...rest } = spec
  const used = refsIn(rest, new Set())
  // Components refer to components: follow them until nothing new turns up.
  for (let size = -1; size !== used.size;) {
    size = used.size
    for (const ref of [...used]) refsIn(componentOf(spec, ref), used)
  }
  for (const name of Object.keys(schemas)) {
    if (!used.has(`#/components/schemas/${name}`)) delete schemas[name]
  }
}

// ---------------------------------------------------------------------------------------------
// Rate-limit headers

const RATE_LIMIT_HEADERS: Record<string, string> = {
  "X-RateLimit-Limit": "Maximum requests in the current window (the limit that refused a 429)",
  "X-RateLimit-Remaining": "Requests remaining in the window",
  "X-RateLimit-Reset": "Unix timestamp (seconds) when the window ends"
}

const RETRY_AFTER = "Seconds to wait before trying again"

const headerComponents = () =>
  Object.fromEntries(
    Object.entries({ ...RATE_LIMIT_HEADERS, "Retry-After": RETRY_AFTER }).map((
      [name, description]
    ) => [name, { description, required: true, schema: { type: "integer", minimum: 0 } }])
  )

/** The headers an answer of the API's paths carries: the limit's, and on a 429 or a 503 when to try again. */
const limitHeaders = (status: string) =>
  Object.fromEntries(
    [...Object.keys(RATE_LIMIT_HEADERS), ...(status === "429" || status === "503" ? ["Retry-After"] : [])].map((name) => [name, {
      $ref: `#/components/headers/${name}`
    }])
  )

/** The paths whose answers carry rate-limit headers (server.ts): not the operators' nor the payment provider's. */
const limitedPath = (path: string) => /^\/(?:v1|api)\//.test(path) && path !== "/v1/billing/webhook"

// ---------------------------------------------------------------------------------------------
// Schema ids

/** `value` without the generator's shared `$id`s. */
const withoutSharedIds = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(withoutSharedIds)
  if (typeof value !== "object" || value === null) return value
  return Object.fromEntries(
    Object.entries(value)
      .filter(([key, field]) => !(key === "$id" && typeof field === "string" && field.startsWith("/schemas/")))
      .map(([key, field]) => [key, withoutSharedIds(field)])
  )
}

// ---------------------------------------------------------------------------------------------
// Webhooks

const SIGNATURE_HEADERS = [
  {
    name: "X-Service-Signature",
    description: "`sha256=<hex>`: HMAC-SHA256 of the raw body keyed with the webhook's secret; compare in constant time"
  },
  { name: "webhook-id", description: "The event's id, the same on every retry (Standard Webhooks)" },
  { name: "webhook-timestamp", description: "Unix seconds of this attempt (Standard Webhooks)" },
  { name: "webhook-signature", description: "`v1,<base64>` over `id.timestamp.body` (Standard Webhooks)" }
]

const webhooks = () =>
  Object.fromEntries(eventKinds.map((kind) => {
    const payload = EventPayloads[kind].ast
    const description = SchemaAST.getDescriptionAnnotation(payload).pipe(Option.getOrElse(() => kind))
    const identifier = SchemaAST.getIdentifierAnnotation(payload).pipe(Option.getOrThrow)
    return [kind, {
      post: {
        operationId: `webhook.${kind}`,
        tags: ["Webhook events"],
        summary: `${kind} event`,
        description: `${description}. Sent to every active webhook subscribed to ${kind}, ` +
          "as a POST with this JSON body. A non-2xx answer is retried: 3 attempts in all, at once, after 500 ms and after " +
          "1000 ms, 10 s each.",
        security: [],
        parameters: SIGNATURE_HEADERS.map((header) => ({ ...header, in: "header", required: true, schema: { type: "string" } })),
        requestBody: {
          required: true,
          content: { "application/json": { schema: { $ref: `#/components/schemas/${identifier}` } } }
        },
        responses: {
          "200": { description: "Received (any 2xx will do)" },
          "400": { description: "Refused (any non-2xx answer is retried)" }
        }
      }
    }]
  }))

// ---------------------------------------------------------------------------------------------

/** The transform: the generated document, finished as the module comment says. */
export const publish = <Id extends string, Groups extends HttpApiGroup.HttpApiGroup.Any, E, R>(api: HttpApi.HttpApi<Id, Groups, E, R>) => (spec: Json): Json => {
  const security = requirements(api)
  const bodiesLeftOut = optionalBodies(api)
  const bodyRefusals = ownBodyRefusals(api)
  spec.components.securitySchemes = Object.fromEntries(
    Object.entries(schemes).map(([name, scheme]) => [name, securityScheme(scheme)])
  )
  spec.components.headers = headerComponents()
  for (const [path, operations] of Object.entries<Json>(spec.paths)) {
    for (const operation of Object.values<Json>(operations)) {
      operation.security = security.get(operation.operationId) ?? []
      if (operation.requestBody !== undefined && bodiesLeftOut.has(operation.operationId)) operation.requestBody.required = false
      if (operation.requestBody === undefined) {
        const own = bodyRefusals.get(operation.operationId)
        for (const status of BODY_STATUSES) if (!own?.has(status)) delete operation.responses[status]
      }
      for (const [status, response] of Object.entries<Json>(operation.responses)) {
        if (Number(status) >= 400) finishError(spec, response)
        if (limitedPath(path)) response.headers = { ...response.headers, ...limitHeaders(status) }
      }
    }
  }
  spec.webhooks = webhooks()
  spec.tags.push({ name: "Webhook events", description: "What Mailroom POSTs to your webhook endpoints, signed with the endpoint's secret" })
  pruneComponents(spec)
  return withoutGeneratedTitles(withoutSharedIds(spec) as Json)
}

// ---------------------------------------------------------------------------------------------
// Serving it

/**
 * `GET /v1/openapi.json` and `GET /docs` (the platform's Swagger UI), each made by its first request
 * and kept: generating and finishing the document costs ~0.3 s of CPU, which every process paid at
 * start when the platform's `HttpApiBuilder.middlewareOpenApi` and `HttpApiSwagger.layer` were mounted
 * (they build their answers as they are mounted). The Swagger page is the platform's own, mounted on
 * a router of its own the first time it is asked for.
 */
export const OpenApiRoutesLive = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    const api = yield* HttpApi.Api
    const document = yield* Effect.cached(Effect.orDie(Effect.suspend(() => HttpServerResponse.json(OpenApi.fromApi(api.api)))))
    const swagger = yield* Effect.cached(
      HttpApiBuilder.Router.router.pipe(
        Effect.provide(HttpApiSwagger.layer({ path: "/docs" }).pipe(
          Layer.provideMerge(HttpApiBuilder.Router.Live),
          Layer.provide(Layer.succeed(HttpApi.Api, api))
        ))
      )
    )
    yield* router.get("/v1/openapi.json", document)
    yield* router.get("/docs", Effect.orDie(Effect.flatten(swagger)))
  })
)
