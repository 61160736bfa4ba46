/**
 * The OpenAPI document lists, on every route, the error codes SPEC says the route answers, under
 * SPEC's status, each with the envelope schema. Built in-process from the contract (no server).
 *
 * SPEC's error tables and the errors its endpoint rows name are read from SPEC.md itself when it is
 * reachable (`../shared/SPEC.md` beside the repository, as in CI, or the path in `SPEC_MD`), so a
 * code SPEC adds fails here until a route declares it; otherwise from the copy below.
 */
import { HttpApi, OpenApi } from "@effect/platform"
import { Ajv2020 } from "ajv/dist/2020.js"
import { Option, SchemaAST } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { MailroomApi } from "../../src/http/api.ts"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const specPath = process.env["SPEC_MD"] ?? path.join(root, "../shared/SPEC.md")
const spec = fs.existsSync(specPath) ? fs.readFileSync(specPath, "utf8") : undefined

/** SPEC "Errors": the general table and the mailbox table, as `code → status`. */
const SPEC_CODES: Record<string, number> = {
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  CONFLICT: 409,
  VALIDATION_ERROR: 400,
  VERIFICATION_FAILED: 400,
  DOMAIN_HAS_MAILBOXES: 409,
  RATE_LIMIT_EXCEEDED: 429,
  INTERNAL_ERROR: 500,
  SERVICE_UNAVAILABLE: 503,
  BAD_REQUEST: 400,
  MISSING_FIELDS: 400,
  MAILBOX_QUOTA: 403,
  EMAIL_TAKEN: 409,
  LOCAL_TOO_SHORT: 422,
  INVALID_LOCAL: 422,
  DISALLOWED_LOCAL: 422,
  DOMAIN_MISMATCH: 422,
  DOMAIN_NOT_ALLOWED: 422
}

/** SPEC's endpoint rows that name their errors: `METHOD path` → `[status, code]`. */
const SPEC_ROUTE_ERRORS: Array<{ route: string; status: number; code: string }> = [
  { route: "POST /api/auth/register", status: 400, code: "VALIDATION_ERROR" },
  { route: "POST /api/auth/register", status: 409, code: "CONFLICT" },
  { route: "POST /api/auth/login", status: 401, code: "UNAUTHORIZED" },
  { route: "POST /api/auth/refresh", status: 401, code: "UNAUTHORIZED" },
  { route: "DELETE /v1/api/mailboxes/{mailboxId}", status: 400, code: "BAD_REQUEST" },
  { route: "DELETE /v1/api/mailboxes/{mailboxId}", status: 400, code: "VALIDATION_ERROR" },
  { route: "POST /api/domains/{id}/verify", status: 400, code: "VERIFICATION_FAILED" },
  { route: "DELETE /api/domains/{id}", status: 409, code: "DOMAIN_HAS_MAILBOXES" }
]

/** Rows `| <status> | <CODE> | when |` of SPEC's error tables. */
const parseCodes = (text: string): Record<string, number> => {
  const codes: Record<string, number> = {}
  const section = text.slice(text.indexOf("\n## Errors"), text.indexOf("\n## ", text.indexOf("\n## Errors") + 1))
  for (const [, status, code] of section.matchAll(/^\|\s*(\d{3})\s*\|\s*([A-Z][A-Z_]+)\s*\|/gm)) codes[code!] = Number(status)
  return codes
}

/** `<status> <CODE>` named in an endpoint row (`| METHOD | \`path\` | ...`) or paragraph (`**METHOD \`path\`**...`). */
const parseRouteErrors = (text: string) => {
  const found: Array<{ route: string; status: number; code: string }> = []
  const rows = /^(?:\|\s*(GET|POST|PATCH|PUT|DELETE)\s*\|\s*`([^`]+)`|\*\*(GET|POST|PATCH|PUT|DELETE) `([^`]+)`)(.*)$/gm
  for (const match of text.matchAll(rows)) {
    const method = match[1] ?? match[3]!
    const route = `${method} ${(match[2] ?? match[4]!).replace(/\?.*$/, "")}`
    for (const [, status, code] of match[5]!.matchAll(/\b([45]\d\d) ([A-Z][A-Z_]{2,})\b/g)) {
      found.push({ route, status: Number(status), code: code! })
    }
  }
  return found
}

const specCodes = spec ? parseCodes(spec) : SPEC_CODES
const specRouteErrors = spec ? parseRouteErrors(spec) : SPEC_ROUTE_ERRORS

// ---------------------------------------------------------------------------------------------
// The document, read as a client would

type Json = any
const document: Json = OpenApi.fromApi(MailroomApi)

const resolve = (schema: Json): Json =>
  schema?.$ref ? resolve(document.components.schemas[schema.$ref.slice("#/components/schemas/".length)]) : schema

/** Every `error.code` a response schema can carry. */
const codesOf = (schema: Json): Array<string> => {
  const resolved = resolve(schema)
  if (resolved === undefined) return []
  if (resolved.anyOf) return resolved.anyOf.flatMap(codesOf)
  if (resolved.oneOf) return resolved.oneOf.flatMap(codesOf)
  return resolved.properties?.error?.properties?.code?.enum ?? []
}

interface Operation {
  readonly route: string
  readonly path: string
  readonly responses: Record<string, Json>
}

const operations: Array<Operation> = Object.entries<Json>(document.paths).flatMap(([path, methods]) =>
  Object.entries<Json>(methods).map(([method, operation]) => ({ route: `${method.toUpperCase()} ${path}`, path, responses: operation.responses }))
)

/** `status → codes` of one route. */
const errorsOf = (operation: Operation): Map<number, Array<string>> =>
  new Map(
    Object.entries(operation.responses)
      .filter(([status]) => Number(status) >= 400)
      .map(([status, response]) => [Number(status), codesOf(response.content?.["application/json"]?.schema)])
  )

const find = (route: string) => operations.find((operation) => operation.route === route)

/** A SPEC route as the document spells it: on `{app_url}` as written, on `{base_url}` under /v1. */
const documented = (route: string): Array<Operation> => {
  const [method, path] = route.split(" ")
  return [find(route), find(`${method} /v1${path}`)].filter((operation): operation is Operation => operation !== undefined)
}

// Routes by the credential they need (src/http/security.ts).
const OPEN = ["GET /healthz", "GET /readyz", "POST /v1/billing/webhook"]
const CLIENT_LIMITED = [
  "POST /api/auth/register",
  "POST /api/auth/login",
  "POST /api/auth/refresh",
  "POST /api/auth/password-reset",
  "POST /api/auth/password-reset/confirm",
  "POST /api/auth/email/confirm"
]
const authenticated = operations.filter((operation) => !OPEN.includes(operation.route) && !CLIENT_LIMITED.includes(operation.route))
const dashboard = authenticated.filter((operation) => operation.path.startsWith("/api/"))
const mailboxWrites = ["POST /v1/api/mailboxes", "POST /api/mailboxes", "PATCH /v1/api/mailboxes/{mailboxId}", "PATCH /api/mailboxes/{mailboxId}"]
const migrations = ["POST /v1/api/domains/{id}/migrate-mailboxes", "POST /api/domains/{id}/migrate-mailboxes"]

/** Where each of SPEC's codes must be declared (SPEC's tables say when, not where). */
const expectedRoutes: Record<string, ReadonlyArray<string>> = {
  UNAUTHORIZED: [...authenticated.map((operation) => operation.route), "POST /api/auth/login", "POST /api/auth/refresh"],
  FORBIDDEN: dashboard.map((operation) => operation.route),
  NOT_FOUND: operations.filter((operation) => operation.path.includes("{")).map((operation) => operation.route),
  CONFLICT: [
    "POST /api/auth/register",
    "POST /api/auth/email",
    "POST /api/auth/email/confirm",
    "POST /v1/api/domains",
    "POST /api/domains",
    "POST /v1/billing/checkout"
  ],
  VALIDATION_ERROR: operations.map((operation) => operation.route),
  VERIFICATION_FAILED: ["POST /v1/api/domains/{id}/verify", "POST /api/domains/{id}/verify"],
  DOMAIN_HAS_MAILBOXES: ["DELETE /v1/api/domains/{id}", "DELETE /api/domains/{id}"],
  RATE_LIMIT_EXCEEDED: [...authenticated, ...CLIENT_LIMITED.map((route) => ({ route }))].map((operation) => operation.route),
  INTERNAL_ERROR: operations.map((operation) => operation.route),
  SERVICE_UNAVAILABLE: operations.map((operation) => operation.route),
  BAD_REQUEST: operations.map((operation) => operation.route),
  MISSING_FIELDS: [...mailboxWrites, "GET /v1/api/mailboxes/check-email", "GET /api/mailboxes/check-email"],
  MAILBOX_QUOTA: ["POST /v1/api/mailboxes", "POST /api/mailboxes"],
  EMAIL_TAKEN: [...mailboxWrites, ...migrations],
  LOCAL_TOO_SHORT: mailboxWrites,
  INVALID_LOCAL: mailboxWrites,
  DISALLOWED_LOCAL: mailboxWrites,
  DOMAIN_MISMATCH: mailboxWrites,
  DOMAIN_NOT_ALLOWED: [...mailboxWrites, ...migrations]
}

describe("OpenAPI: SPEC's error codes on the routes that answer them", () => {
  it(`reads SPEC's error tables (${spec ? specPath : "built-in copy"})`, () => {
    expect(Object.keys(specCodes).length).toBeGreaterThanOrEqual(19)
    expect(specCodes["MAILBOX_QUOTA"]).toBe(403)
    expect(specRouteErrors.length).toBeGreaterThanOrEqual(8)
  })

  it.each(Object.entries(specCodes))("%s (%i) is declared, under its status, on every route that answers it", (code, status) => {
    const routes = expectedRoutes[code]
    expect(routes, `SPEC lists ${code}: say here which routes answer it`).toBeDefined()
    expect(routes!.length).toBeGreaterThan(0)
    for (const route of routes!) {
      const operation = find(route)
      expect(operation, `${route} is not in the document`).toBeDefined()
      expect(errorsOf(operation!).get(status) ?? [], `${route} ${status}`).toContain(code)
    }
    // And nowhere under another status.
    for (const operation of operations) {
      for (const [other, codes] of errorsOf(operation)) {
        if (other !== status) expect(codes, `${operation.route} ${other}`).not.toContain(code)
      }
    }
  })

  it("declares the errors SPEC's endpoint rows name", () => {
    for (const { code, route, status } of specRouteErrors) {
      const found = documented(route)
      expect(found.length, `${route} is not in the document`).toBeGreaterThan(0)
      for (const operation of found) expect(errorsOf(operation).get(status) ?? [], `${operation.route} ${status}`).toContain(code)
    }
  })

  it("every error answer is SPEC's envelope with a code", () => {
    for (const operation of operations) {
      for (const [status, codes] of errorsOf(operation)) {
        expect(codes.length, `${operation.route} ${status} names no code`).toBeGreaterThan(0)
        const schema = operation.responses[status].content["application/json"].schema
        for (const member of resolve(schema).anyOf ?? [schema]) {
          const envelope = resolve(member)
          expect(envelope.required, `${operation.route} ${status}`).toEqual(["success", "error"])
          expect(envelope.properties.success.enum).toEqual([false])
          expect(envelope.properties.error.required).toEqual(["code", "message"])
        }
      }
    }
  })
})

describe("OpenAPI: a reference people can use", () => {
  it("answers 400 with SPEC's envelope, never HttpApi's decode error", () => {
    expect(JSON.stringify(document)).not.toContain("HttpApiDecodeError")
    expect(errorsOf(find("POST /v1/api-keys")!).get(400)).toEqual(expect.arrayContaining(["VALIDATION_ERROR", "BAD_REQUEST"]))
  })

  it("every $ref points at a component the document has", () => {
    const refs = JSON.stringify(document).match(/"\$ref":"[^"]+"/g) ?? []
    expect(refs.length).toBeGreaterThan(0)
    for (const ref of new Set(refs)) {
      const target = JSON.parse(`{${ref}}`).$ref as string
      const [, kind, name] = target.match(/^#\/components\/(schemas|headers)\/(.+)$/) ?? []
      expect(kind, ref).toBeDefined()
      expect(document.components[kind!][name!], ref).toBeDefined()
    }
  })

  it("no two schemas share an $id (JSON Schema validators refuse such a document)", () => {
    const ids = JSON.stringify(document).match(/"\$id":"[^"]+"/g) ?? []
    expect(ids.length).toBe(new Set(ids).size)
  })

  it("every answer of the API's paths declares the rate-limit headers it carries, and a 429 or 503 Retry-After", () => {
    const limited = operations.filter((operation) => /^\/(v1|api)\//.test(operation.path) && operation.route !== "POST /v1/billing/webhook")
    expect(limited.length).toBeGreaterThan(200)
    for (const operation of limited) {
      for (const [status, response] of Object.entries<Json>(operation.responses)) {
        const expected = ["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", ...(["429", "503"].includes(status) ? ["Retry-After"] : [])]
        expect(Object.keys(response.headers ?? {}).sort(), `${operation.route} ${status}`).toEqual(expected.sort())
      }
    }
    for (const route of OPEN) {
      const operation = find(route)!
      for (const response of Object.values<Json>(operation.responses)) expect(response.headers, route).toBeUndefined()
    }
  })

  it("declares the credentials, and each route the ones its middleware accepts", () => {
    expect(document.components.securitySchemes).toEqual({
      apiKey: expect.objectContaining({ type: "apiKey", in: "header", name: "X-API-Key" }),
      bearer: expect.objectContaining({ type: "http", scheme: "bearer" }),
      session: expect.objectContaining({ type: "apiKey", in: "cookie", name: "mailroom_session" })
    })
    const securityOf = (route: string) => {
      const [method, path] = route.split(" ")
      return document.paths[path!][method!.toLowerCase()].security
    }
    for (const operation of authenticated) {
      const expected = operation.path.startsWith("/api/") ? [{ session: [] }, { bearer: [] }] : [{ apiKey: [] }, { bearer: [] }]
      expect(securityOf(operation.route), operation.route).toEqual(expected)
    }
    for (const route of [...OPEN, ...CLIENT_LIMITED]) expect(securityOf(route), route).toEqual([])
  })

  it("every operation has a summary and a description; the document names its server", () => {
    for (const [path, methods] of Object.entries<Json>(document.paths)) {
      for (const [method, operation] of Object.entries<Json>(methods)) {
        expect(operation.summary, `${method} ${path}`).toMatch(/\w/)
        expect(operation.description, `${method} ${path}`).toMatch(/\w/)
      }
    }
    expect(document.servers).toEqual([expect.objectContaining({ url: "/" })])
  })

  it("a binary answer names the media type the server sends it in, never a range such as */*", () => {
    const answers = operations.flatMap((operation) =>
      Object.entries<Json>(operation.responses).flatMap(([status, response]) =>
        Object.keys(response.content ?? {}).filter((type) => type !== "application/json").map((type) => `${operation.route} ${status} ${type}`)
      )
    )
    // What the handlers set (src/http/emails/http.ts, events/http.ts), as test/api/export.test.ts and
    // test/smtp/inbound.test.ts read them from a started server. An attachment goes with its own type,
    // which no contract can name: it is documented as the bytes it is, its description says which type comes.
    expect(answers.sort()).toEqual([
      "GET /api/emails/{emailId}/attachments/{attachmentId} 200 application/octet-stream",
      "GET /api/emails/{emailId}/raw 200 message/rfc822",
      "GET /api/events 200 text/event-stream",
      "GET /api/mailboxes/{mailboxId}/export 200 application/mbox",
      "GET /v1/api/emails/{emailId}/attachments/{attachmentId} 200 application/octet-stream",
      "GET /v1/api/emails/{emailId}/raw 200 message/rfc822",
      "GET /v1/api/mailboxes/{mailboxId}/export 200 application/mbox",
      "GET /v1/events 200 text/event-stream"
    ])
    const attachment = find("GET /v1/api/emails/{emailId}/attachments/{attachmentId}")!.responses["200"]
    expect(attachment.description).toMatch(/attachment's own media type/)
  })

  it("413 and 415, what only a body is refused with, are declared on the routes that take one, and not on the rest", () => {
    // Routes whose handler reads a body the contract does not declare: Stripe's signed JSON, a test's optional {"event"}.
    const readingTheirOwn = ["POST /v1/billing/webhook", "POST /v1/api/webhooks/{id}/test", "POST /api/webhooks/{id}/test"]
    // Routes without a body whose handler answers 413 itself: the mail they send is past the plan's size.
    const sendingMail = [
      "POST /v1/api/mailboxes/{mailboxId}/drafts/{draftId}/send",
      "POST /api/mailboxes/{mailboxId}/drafts/{draftId}/send",
      "POST /v1/api/emails/{emailId}/unsubscribe",
      "POST /api/emails/{emailId}/unsubscribe",
      "POST /v1/api/meetings/{meetingId}/cancel",
      "POST /api/meetings/{meetingId}/cancel"
    ]
    const withBody = operations.filter((operation) => {
      const [method, path] = operation.route.split(" ")
      return document.paths[path!][method!.toLowerCase()].requestBody !== undefined
    }).map((operation) => operation.route)
    expect(withBody.length).toBeGreaterThan(50)
    for (const operation of operations) {
      const errors = errorsOf(operation)
      const body = withBody.includes(operation.route) || readingTheirOwn.includes(operation.route)
      expect(errors.get(415) ?? [], `${operation.route} 415`).toEqual(body ? ["UNSUPPORTED_MEDIA_TYPE"] : [])
      expect(errors.get(413) ?? [], `${operation.route} 413`).toEqual(body || sendingMail.includes(operation.route) ? ["PAYLOAD_TOO_LARGE"] : [])
    }
    const bodiless = operations.filter((operation) => /^(GET|DELETE) /.test(operation.route) && !withBody.includes(operation.route))
    expect(bodiless.length).toBeGreaterThan(100)
    for (const operation of bodiless) expect([413, 415].filter((status) => errorsOf(operation).has(status)), operation.route).toEqual([])
  })

  it("VALIDATION_ERROR's and BAD_REQUEST's details are typed: each field's message a string, or that map under field_errors", () => {
    const ajv = new Ajv2020({ strict: false })
    for (const code of ["VALIDATION_ERROR", "BAD_REQUEST"]) {
      const schema = resolve(find("POST /v1/api-keys")!.responses["400"].content["application/json"].schema).anyOf
        .map(resolve).find((member: Json) => member.properties.error.properties.code.enum[0] === code)
      const accepts = (details: unknown) =>
        ajv.validate({ ...schema, components: document.components }, { success: false, error: { code, message: "no", details } })
      expect({
        fields: accepts({ name: "must be a string", "messages.0.to": "is required" }),
        dashboard: accepts({ field_errors: { local_part: "must be a string" } }),
        number: accepts({ limit: 5 }),
        list: accepts({ labels: ["inbound"] }),
        nestedNumber: accepts({ field_errors: { local_part: 5 } }),
        mapElsewhere: accepts({ to: { name: "is required" } })
      }, code).toEqual({ fields: true, dashboard: true, number: false, list: false, nestedNumber: false, mapElsewhere: false })
    }
  })

  it("a draft's edit and send type their CONFLICT's details (draft_id, status, updated_at, if_updated_at); every other CONFLICT is as it was", () => {
    const ajv = new Ajv2020({ strict: false })
    const conflictOf = (route: string) => resolve(find(route)!.responses["409"].content["application/json"].schema)
    const drafts = [
      "PATCH /v1/api/mailboxes/{mailboxId}/drafts/{draftId}",
      "PATCH /api/mailboxes/{mailboxId}/drafts/{draftId}",
      "POST /v1/api/mailboxes/{mailboxId}/drafts/{draftId}/send",
      "POST /api/mailboxes/{mailboxId}/drafts/{draftId}/send"
    ]
    const at = "2026-12-07T09:00:00.123Z"
    for (const route of drafts) {
      const schema = conflictOf(route)
      expect(schema.properties.error.properties.details, route).toMatchObject({
        required: ["draft_id"],
        properties: {
          draft_id: { type: "string" },
          status: { enum: ["draft", "sending", "sent"] },
          updated_at: { type: "string" },
          if_updated_at: { type: "string" }
        }
      })
      const accepts = (details: unknown) =>
        ajv.validate({ ...schema, components: document.components }, { success: false, error: { code: "CONFLICT", message: "no", details } })
      // What services/outbound/drafts.ts answers: changed since the version named, sent or being sent, being sent.
      expect({
        changed: accepts({ draft_id: "drf_1", status: "draft", updated_at: at, if_updated_at: "2026-12-07T10:00:00+01:00" }),
        sent: accepts({ draft_id: "drf_1", status: "sent" }),
        sending: accepts({ draft_id: "drf_1" }),
        noDraft: accepts({ status: "sent" }),
        timeAsNumber: accepts({ draft_id: "drf_1", status: "draft", updated_at: Date.parse(at) }),
        unknownStatus: accepts({ draft_id: "drf_1", status: "queued" })
      }, route).toEqual({ changed: true, sent: true, sending: true, noDraft: false, timeAsNumber: false, unknownStatus: false })
    }
    // Every other operation's CONFLICT keeps the general one: a draft's deletion, an account's registration.
    const others = operations.filter((operation) => errorsOf(operation).get(409)?.includes("CONFLICT") && !drafts.includes(operation.route))
    expect(others.map((operation) => operation.route)).toEqual(expect.arrayContaining(["DELETE /v1/api/mailboxes/{mailboxId}/drafts/{draftId}", "POST /api/auth/register"]))
    for (const operation of others) {
      const schema = operation.responses["409"].content["application/json"].schema
      expect((schema.anyOf ?? [schema]).map((member: Json) => member.$ref), operation.route).toContain("#/components/schemas/Conflict")
      expect(JSON.stringify(schema), operation.route).not.toContain("DraftConflict")
    }
    expect(document.components.schemas.Conflict.properties.error.properties.details).toEqual({ type: "object", required: [], properties: {}, additionalProperties: {} })
  })

  it("list routes take limit and offset", () => {
    const lists = operations.filter((operation) => JSON.stringify(operation.responses["200"] ?? {}).includes("#/components/schemas/ListMeta"))
    expect(lists.map((operation) => operation.route)).toEqual(
      expect.arrayContaining(["GET /v1/api-keys", "GET /v1/api/webhooks", "GET /v1/api/mailboxes/{mailboxId}/emails"])
    )
    for (const operation of lists) {
      const [method, path] = operation.route.split(" ")
      const names = document.paths[path!][method!.toLowerCase()].parameters.filter((p: Json) => p.in === "query").map((p: Json) => p.name)
      expect(names, operation.route).toEqual(expect.arrayContaining(["limit", "offset"]))
    }
  })

  it("a body of a route Mailroom defined refuses a field it does not have (a misspelt dry_run would change mail); SPEC's own routes keep their bodies as SPEC has them", () => {
    // SPEC's routes (accounts, billing, webhooks, mailboxes, domains): a field SPEC does not name is
    // ignored there, as the independent SPEC checks expect. Keys are strict too: a misspelt expiry
    // ("expirationTs") made a key that never expires.
    const spec = /^\/(?:api\/auth|v1\/billing|api\/billing|v1\/api\/webhooks|api\/webhooks|v1\/api\/mailboxes\/?:?[a-zA-Z]*$|api\/mailboxes\/?:?[a-zA-Z]*$|v1\/api\/domains|api\/domains)/
    const loose: Array<string> = []
    HttpApi.reflect(MailroomApi, {
      onGroup: () => {},
      onEndpoint: ({ endpoint }) => {
        for (const payload of Option.toArray(endpoint.payloadSchema)) {
          const options = SchemaAST.getParseOptionsAnnotation(payload.ast)
          const strict = Option.isSome(options) && options.value.onExcessProperty === "error"
          if (!strict && !spec.test(endpoint.path)) loose.push(`${endpoint.method} ${endpoint.path}`)
        }
      }
    })
    expect(loose).toEqual([])
  })

  it("a request body's schema refuses what the server refuses by its rules, so a generated client or validator can too", () => {
    const ajv = new Ajv2020({ strict: false, allErrors: true })
    const accepts = (route: string, body: Json): boolean => {
      const [method = "", path = ""] = route.split(" ")
      const schema = document.paths[path][method.toLowerCase()].requestBody.content["application/json"].schema
      return ajv.validate({ ...schema, components: document.components }, body)
    }
    const key = { name: "ci" }
    const webhook = { url: "https://example.com/hook", events: ["email.received"] }
    const checkout = { plan: "pro", successUrl: "https://example.com/ok", cancelUrl: "https://example.com/no" }
    const account = { email: "ada@example.com", password: "correct horse", name: "Ada" }
    // What is sent as it should be passes, each refusal of the server's rules (SPEC "Limits" among them) fails.
    expect([accepts("POST /v1/api-keys", key), accepts("POST /v1/api/webhooks", webhook), accepts("POST /v1/billing/checkout", checkout), accepts("POST /api/auth/register", account)])
      .toEqual([true, true, true, true])
    expect({
      emptyKeyName: accepts("POST /v1/api-keys", { name: "  " }),
      longKeyName: accepts("POST /v1/api-keys", { name: "k".repeat(101) }),
      noEvents: accepts("POST /v1/api/webhooks", { ...webhook, events: [] }),
      unknownEvent: accepts("POST /v1/api/webhooks", { ...webhook, events: ["nope"] }),
      shortSecret: accepts("POST /v1/api/webhooks", { ...webhook, secret: "x" }),
      spacedSecret: accepts("POST /v1/api/webhooks", { ...webhook, secret: "has spaces in it" }),
      longDisplayName: accepts("POST /v1/api/mailboxes", { local_part: "ada", display_name: "n".repeat(101) }),
      emptyName: accepts("POST /api/auth/register", { ...account, name: "" }),
      freeCheckout: accepts("POST /v1/billing/checkout", { ...checkout, plan: "free" })
    }).toEqual({
      emptyKeyName: false,
      longKeyName: false,
      noEvents: false,
      unknownEvent: false,
      shortSecret: false,
      spacedSecret: false,
      longDisplayName: false,
      emptyName: false,
      freeCheckout: false
    })
  })

  it("describes the event payloads under webhooks, as receivers get them", () => {
    expect(Object.keys(document.webhooks).sort()).toEqual(["api_key.created", "email.bounced", "email.complained", "email.deleted", "email.delivery_delayed", "email.failed", "email.labels_changed", "email.processed", "email.received", "email.sent", "email.unsubscribed", "invitation.received", "meeting.answered", "schedule.reminder"])
    for (const [kind, item] of Object.entries<Json>(document.webhooks)) {
      const payload = resolve(item.post.requestBody.content["application/json"].schema)
      expect(payload.required, kind).toEqual(["event", "timestamp", "data"])
      expect(payload.properties.event.enum).toEqual([kind])
      expect(item.post.parameters.map((p: Json) => p.name)).toContain("X-Service-Signature")
    }
    const received = resolve(document.webhooks["email.received"].post.requestBody.content["application/json"].schema)
    expect(Object.keys(received.properties.data.properties).sort()).toEqual(
      ["authentication", "authentication_results", "cc", "date", "direction", "domain", "email_id", "extracted", "from", "from_name", "has_attachments", "labels", "mailbox_id", "message_id", "reply_to", "spam", "subject", "thread_id", "to"]
    )
    // The verdicts are documented field by field (issue 20), so a receiver can rely on them.
    const authentication = resolve(received.properties.data.properties.authentication.anyOf.find((s: Json) => s.type !== "null"))
    expect(Object.keys(authentication.properties).sort()).toEqual(["arc", "dkim", "dmarc", "spf"])
    // Every verdict's fields are always there (null where nothing applies): none reads as optional.
    for (const verdict of ["spf", "dmarc", "arc"]) {
      const schema = resolve(authentication.properties[verdict])
      expect(schema.required, verdict).toEqual(Object.keys(schema.properties))
    }
    // And so is extracted content (issue 17, item 5), in the email too.
    const extracted = resolve(received.properties.data.properties.extracted.anyOf.find((s: Json) => s.type !== "null"))
    expect(Object.keys(extracted.properties).sort()).toEqual(["codes", "links", "reply_text"])
    expect(resolve(extracted.properties.links.items).properties.kind.anyOf.find((s: Json) => s.type !== "null").enum)
      .toEqual(["confirmation", "sign_in", "password_reset", "unsubscribe"])
    expect(resolve(document.components.schemas.Email).properties.extracted).toBeDefined()
  })
})
