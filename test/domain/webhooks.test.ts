/**
 * Webhook endpoints in process, over the suite's migrated database and a fake Dns (SPEC "Webhooks",
 * DESIGN.md §4): the secret shown in full only on create and on a change, the plan's endpoint limit,
 * URLs that must be https and public (as resolved now), updates, deletes, ownership and the list.
 * Deliveries are test/webhooks' subject, but for which endpoints the webhook actor sends an event to
 * while an account has more than its plan allows (back on free after a paid plan), here.
 */
import { expect, layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Clock, Context, Deferred, Effect, Either, Fiber, Layer, Schedule, Schema } from "effect"
import * as MemoryBus from "../../layers/memory-bus.ts"
import { Principals } from "../../services/accounts/principals.ts"
import { Billing } from "../../services/billing/billing.ts"
import { encodeJson } from "../../services/bus/bus.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { RecipientDirectory } from "../../services/mail/directory.ts"
import { sweep } from "../../services/maintenance/housekeeping.ts"
import { type PostRequest, TransportError, WebhookTransport } from "../../services/webhooks/attempts.ts"
import { CreateWebhookInput, eventKinds, EventPayloads } from "../../services/webhooks/schemas.ts"
import { verifyWebhook } from "../../services/webhooks/signatures.ts"
import { WebhookDelivery } from "../../services/webhooks/delivery.ts"
import { sampleEvent } from "../../services/webhooks/samples.ts"
import { WebhookSubscriptions } from "../../services/webhooks/subscriptions.ts"
import { WebhookSettings, WebhookTargets } from "../../services/webhooks/targets.ts"
import { Webhooks } from "../../services/webhooks/webhooks.ts"
import { decodeBody } from "../../src/http/surface.ts"
import { testDatabase } from "../support/database.ts"
import { uniqueName } from "../support/services.ts"
import { makeFakeDns } from "../support/fake-dns.ts"
import { insertUser, type TestUser } from "../support/users.ts"
import { insertMailbox } from "../support/seed-mail.ts"
import { until } from "../support/wait.ts"

const dns = makeFakeDns()
dns.records.addresses.set("hooks.example.com", [{ address: "93.184.216.34", family: 4 }, { address: "2606:2800:220:1::1", family: 6 }])
dns.records.addresses.set("other.example.com", [{ address: "93.184.216.35", family: 4 }])
dns.records.addresses.set("internal.example.com", [{ address: "10.1.2.3", family: 4 }])
dns.records.addresses.set("split.example.com", [{ address: "93.184.216.36", family: 4 }, { address: "fd00::1", family: 6 }])
dns.records.addresses.set("metadata.example.com", [{ address: "169.254.169.254", family: 4 }])
dns.records.down.add("flaky.example.com")

/** The network as the tests script it: every POST recorded, answered with the next status (or a refused connection). */
const posts: Array<PostRequest> = []
const answers: Array<number | "refused"> = []
const network = {
  posts,
  answers,
  /** While set, a POST is recorded but answered only once it is done (an endpoint slow to answer). */
  gate: undefined as Deferred.Deferred<void> | undefined,
  layer: Layer.succeed(WebhookTransport, {
    post: (request: PostRequest): Effect.Effect<{ readonly status: number }, TransportError> =>
      Effect.suspend(() => {
        posts.push(request)
        const answer = answers.shift() ?? 200
        const answered = answer === "refused" ? Effect.fail(new TransportError({ message: "connection refused" })) : Effect.succeed({ status: answer })
        return network.gate === undefined ? answered : Effect.zipRight(Deferred.await(network.gate), answered)
      })
  })
}

const webhooksWith = (allowPrivate: boolean) =>
  Webhooks.Default.pipe(
    Layer.provide(network.layer),
    Layer.provide(WebhookTargets.Default),
    Layer.provide(Layer.merge(dns.layer, Layer.succeed(WebhookSettings, { allowPrivate }))),
    Layer.provideMerge(WebhookSubscriptions.Default),
    Layer.provideMerge(MemoryBus.layer),
    Layer.provide(DependencyHealth.Default)
  )

const HOOK_URL = "https://hooks.example.com/mailroom"
const firstPage = { limit: 20, offset: 0 }
const newest = { field: "created_at", direction: "desc" } as const

const create = (owner: TestUser, input: { url: string; events: Array<string>; secret?: string }) =>
  Effect.flatMap(Webhooks, (webhooks) => webhooks.create(owner, input))

layer(testDatabase, { timeout: "120 seconds" })("Webhooks", (it) => {
  it.layer(webhooksWith(false))("public targets only (the default)", (it) => {
    it.effect("create answers the generated secret in full this once; every other answer carries only secret_masked", () =>
      Effect.gen(function*() {
        const webhooks = yield* Webhooks
        const owner = yield* insertUser("free")
        const created = yield* create(owner, { url: `  ${HOOK_URL} `, events: ["email.received", "email.processed", "email.received"] })
        expect(created).toEqual({
          webhook_id: expect.stringMatching(/^whk_/),
          url: HOOK_URL,
          events: ["email.received", "email.processed"],
          secret: expect.stringMatching(/^whsec_.{32,}$/),
          secret_masked: expect.any(String),
          active: true,
          created_at: expect.any(String),
          mailbox_ids: null,
          labels: null,
          held_by_plan: false
        })
        // The masked form shows at most the secret's last four characters.
        expect(created.secret_masked).toBe(`whsec_********${created.secret.slice(-4)}`)

        const { secret: _, ...shown } = created
        expect(yield* webhooks.get(owner.userId, created.webhook_id)).toEqual(shown)
        const { created_at, ...listed } = shown
        expect((yield* webhooks.list(owner.userId, firstPage, newest)).webhooks).toEqual([{ ...listed, createdAt: created_at }])
        const updated = yield* webhooks.update(owner.userId, created.webhook_id, { active: false })
        expect(updated).not.toHaveProperty("secret")
        expect(JSON.stringify(updated)).not.toContain(created.secret.slice(6, 20))
      }))

    it.effect("a secret the caller chose is kept; a short one is masked entirely", () =>
      Effect.gen(function*() {
        const long = yield* create(yield* insertUser("free"), { url: HOOK_URL, events: ["email.received"], secret: "my-own-signing-secret-1234" })
        expect(long).toMatchObject({ secret: "my-own-signing-secret-1234", secret_masked: "********1234" })
        const short = yield* create(yield* insertUser("free"), { url: HOOK_URL, events: ["email.received"], secret: "tiny-key" })
        expect(short).toMatchObject({ secret: "tiny-key", secret_masked: "********" })
      }))

    it.effect("a password in the URL is kept and used, and every answer shows it masked; the masked URL sent back changes nothing", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const webhooks = yield* Webhooks
        const owner = yield* insertUser("pro")
        const url = "https://agent:p%40ss:w0rd@hooks.example.com/in?x=1"
        const masked = "https://agent:********@hooks.example.com/in?x=1"
        const created = yield* create(owner, { url, events: ["email.received"] })
        expect(created.url).toBe(masked)
        expect((yield* webhooks.get(owner.userId, created.webhook_id)).url).toBe(masked)
        expect((yield* webhooks.list(owner.userId, firstPage, newest)).webhooks.map((w) => w.url)).toEqual([masked])
        const stored = () => Effect.map(sql<{ url: string }>`SELECT url FROM webhooks WHERE id = ${created.webhook_id}`, (rows) => rows[0]!.url)
        expect(yield* stored()).toBe(url)
        // A client that sends the whole webhook back as it read it leaves the password as it was.
        expect((yield* webhooks.update(owner.userId, created.webhook_id, { url: masked, active: false })).active).toBe(false)
        expect(yield* stored()).toBe(url)
        yield* webhooks.update(owner.userId, created.webhook_id, { url: "https://agent:new-one@hooks.example.com/in?x=1" })
        expect(yield* stored()).toBe("https://agent:new-one@hooks.example.com/in?x=1")
        // A user name alone, or none, is shown as it is.
        for (const plain of ["https://agent@hooks.example.com/in", HOOK_URL]) {
          expect((yield* webhooks.update(owner.userId, created.webhook_id, { url: plain })).url).toBe(plain)
        }
      }))

    it.effect("a URL changed past its masked password keeps the stored one for the same endpoint, and is refused (400 on url) for another: the mask is never stored", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const webhooks = yield* Webhooks
        const owner = yield* insertUser("pro")
        const created = yield* create(owner, { url: "https://agent:p%40ss@hooks.example.com/in", events: ["email.received"] })
        const stored = () => Effect.map(sql<{ url: string }>`SELECT url FROM webhooks WHERE id = ${created.webhook_id}`, (rows) => rows[0]!.url)
        // The client read the webhook and changed its path (the port written out is the same endpoint).
        const moved = yield* webhooks.update(owner.userId, created.webhook_id, { url: "https://agent:********@hooks.example.com:443/v2/in?x=1" })
        expect(moved.url).toBe("https://agent:********@hooks.example.com:443/v2/in?x=1")
        expect(yield* stored()).toBe("https://agent:p%40ss@hooks.example.com:443/v2/in?x=1")
        // Another host, port, scheme or user is another endpoint: its password is not the stored one's.
        for (const url of [
          "https://agent:********@elsewhere.example.com/v2/in",
          "https://agent:********@hooks.example.com:8443/v2/in",
          "http://agent:********@hooks.example.com/v2/in",
          "https://robot:********@hooks.example.com/v2/in"
        ]) {
          const refused = yield* Effect.flip(webhooks.update(owner.userId, created.webhook_id, { url }))
          expect(refused, url).toMatchObject({ code: "VALIDATION_ERROR", status: 400, details: { url: expect.stringContaining("the stored one is kept for the same scheme, user, host and port only") } })
        }
        expect(yield* stored()).toBe("https://agent:p%40ss@hooks.example.com:443/v2/in?x=1")
        // A webhook without a password has none to keep.
        const other = yield* insertUser("pro")
        const plain = yield* create(other, { url: HOOK_URL, events: ["email.received"] })
        const none = yield* Effect.flip(webhooks.update(other.userId, plain.webhook_id, { url: "https://agent:********@hooks.example.com/in" }))
        expect(none).toMatchObject({ code: "VALIDATION_ERROR", details: { url: expect.stringContaining("has none to keep") } })
      }))

    it.effect("events: at least one, each a known kind (400 VALIDATION_ERROR with details.events)", () =>
      Effect.gen(function*() {
        const decode = decodeBody(CreateWebhookInput, "api")
        for (const events of [[], ["email.received", "email.archived"]]) {
          expect(yield* Effect.flip(decode({ url: HOOK_URL, events })), JSON.stringify(events)).toMatchObject({
            code: "VALIDATION_ERROR",
            status: 400,
            details: { events: expect.any(String) }
          })
        }
        expect(yield* decode({ url: HOOK_URL, events: ["api_key.created"] })).toEqual({ url: HOOK_URL, events: ["api_key.created"] })
      }))

    it.effect("WEBHOOK_QUOTA (403): free has 1 endpoint and pro 25, with count, limit and plan; deleting one frees a slot", () =>
      Effect.gen(function*() {
        const webhooks = yield* Webhooks
        const free = yield* insertUser("free")
        const first = yield* create(free, { url: HOOK_URL, events: ["email.received"] })
        expect(yield* Effect.flip(create(free, { url: HOOK_URL, events: ["email.received"] }))).toMatchObject({
          code: "WEBHOOK_QUOTA",
          status: 403,
          details: { count: 1, limit: 1, plan: "free" }
        })
        yield* webhooks.remove(free.userId, first.webhook_id)
        yield* create(free, { url: HOOK_URL, events: ["email.received"] })

        const pro = yield* insertUser("pro")
        for (let i = 0; i < 25; i++) yield* create(pro, { url: `${HOOK_URL}/${i}`, events: ["email.received"] })
        expect(yield* Effect.flip(create(pro, { url: HOOK_URL, events: ["email.received"] }))).toMatchObject({
          code: "WEBHOOK_QUOTA",
          status: 403,
          details: { count: 25, limit: 25, plan: "pro" }
        })
        expect((yield* webhooks.list(pro.userId, firstPage, newest)).meta.total).toBe(25)
      }))

    it.effect("a HOOK_URL must be absolute https on a public address, as its host resolves now (400 VALIDATION_ERROR with details.url)", () =>
      Effect.gen(function*() {
        const owner = yield* insertUser("enterprise")
        for (
          const url of [
            "hooks.example.com/mailroom",
            "http://hooks.example.com/mailroom",
            "ftp://hooks.example.com/",
            "https://127.0.0.1/hook",
            "https://10.0.0.8/hook",
            "https://192.168.1.10/hook",
            "https://[::1]/hook",
            "https://[::ffff:127.0.0.1]/hook",
            "https://169.254.169.254/latest/meta-data",
            "https://localhost/hook",
            "https://internal.example.com/hook",
            "https://split.example.com/hook",
            "https://metadata.example.com/hook",
            "https://nowhere.example.com/hook",
            `https://hooks.example.com/${"x".repeat(2048)}`
          ]
        ) {
          expect(yield* Effect.flip(create(owner, { url, events: ["email.received"] })), url).toMatchObject({
            code: "VALIDATION_ERROR",
            status: 400,
            details: { url: expect.any(String) }
          })
        }
        expect((yield* Effect.flatMap(Webhooks, (w) => w.list(owner.userId, firstPage, newest))).webhooks).toEqual([])
        // A public IP address needs no lookup.
        expect((yield* create(owner, { url: "https://93.184.216.34/hook", events: ["email.received"] })).active).toBe(true)
      }))

    it.effect("a host whose DNS cannot answer now is 503 SERVICE_UNAVAILABLE, not a refusal of the HOOK_URL", () =>
      Effect.gen(function*() {
        const owner = yield* insertUser("free")
        expect(yield* Effect.flip(create(owner, { url: "https://flaky.example.com/hook", events: ["email.received"] }))).toMatchObject({
          code: "SERVICE_UNAVAILABLE",
          status: 503
        })
      }))

    it.effect("update changes url, events and active; a new secret is answered in full once; a private url is refused and nothing changes", () =>
      Effect.gen(function*() {
        const webhooks = yield* Webhooks
        const owner = yield* insertUser("free")
        const created = yield* create(owner, { url: HOOK_URL, events: ["email.received"] })

        const paused = yield* webhooks.update(owner.userId, created.webhook_id, { active: false })
        expect(paused).toEqual({
          webhook_id: created.webhook_id,
          url: HOOK_URL,
          events: ["email.received"],
          secret_masked: created.secret_masked,
          active: false,
          created_at: created.created_at,
          mailbox_ids: null,
          labels: null,
          held_by_plan: false
        })
        const moved = yield* webhooks.update(owner.userId, created.webhook_id, {
          url: "https://other.example.com/in",
          events: ["api_key.created", "email.processed"],
          active: true
        })
        expect(moved).toMatchObject({ url: "https://other.example.com/in", events: ["api_key.created", "email.processed"], active: true })
        expect(moved).not.toHaveProperty("secret")

        const rotated = yield* webhooks.update(owner.userId, created.webhook_id, { secret: "rotated-secret-value-9876" })
        expect(rotated).toMatchObject({ secret: "rotated-secret-value-9876", secret_masked: "********9876", active: true })
        expect(yield* webhooks.get(owner.userId, created.webhook_id)).not.toHaveProperty("secret")

        expect(yield* Effect.flip(webhooks.update(owner.userId, created.webhook_id, { url: "https://internal.example.com/x" }))).toMatchObject({
          code: "VALIDATION_ERROR",
          status: 400,
          details: { url: expect.any(String) }
        })
        expect(yield* webhooks.get(owner.userId, created.webhook_id)).toMatchObject({
          url: "https://other.example.com/in",
          secret_masked: "********9876"
        })
      }))

    it.effect("mailbox_ids: the account's active mailboxes only (400 VALIDATION_ERROR naming the others), each once; null on update widens it again", () =>
      Effect.gen(function*() {
        const webhooks = yield* Webhooks
        const owner = yield* insertUser("pro")
        const mine = yield* insertMailbox(owner)
        const theirs = yield* insertMailbox(yield* insertUser())
        const refused = yield* Effect.flip(webhooks.create(owner, { url: HOOK_URL, events: ["email.received"], mailbox_ids: [mine.mailboxId, theirs.mailboxId, "mbx_unknown"] }))
        expect(refused).toMatchObject({
          code: "VALIDATION_ERROR",
          details: { mailbox_ids: `not a mailbox of this account: ${theirs.mailboxId}, mbx_unknown` }
        })
        expect((yield* webhooks.list(owner.userId, firstPage, newest)).webhooks).toEqual([])
        const made = yield* webhooks.create(owner, { url: HOOK_URL, events: ["email.received"], mailbox_ids: [mine.mailboxId, mine.mailboxId] })
        expect(made.mailbox_ids).toEqual([mine.mailboxId])
        expect((yield* webhooks.get(owner.userId, made.webhook_id)).mailbox_ids).toEqual([mine.mailboxId])
        // Left out of an update, it stays; a refused one changes nothing.
        expect((yield* webhooks.update(owner.userId, made.webhook_id, { active: false })).mailbox_ids).toEqual([mine.mailboxId])
        expect(yield* Effect.flip(webhooks.update(owner.userId, made.webhook_id, { mailbox_ids: [theirs.mailboxId] }))).toMatchObject({
          code: "VALIDATION_ERROR"
        })
        expect((yield* webhooks.update(owner.userId, made.webhook_id, { mailbox_ids: null })).mailbox_ids).toBeNull()
        const decode = decodeBody(CreateWebhookInput, "api")
        expect(yield* Effect.flip(decode({ url: HOOK_URL, events: ["email.received"], mailbox_ids: [] }))).toMatchObject({
          code: "VALIDATION_ERROR",
          details: { mailbox_ids: "must list at least one mailbox id (null: every mailbox)" }
        })
      }))

    it.effect("labels: kept each once, left as they are by an update without them, null widens again; events go by the email's labels", () =>
      Effect.gen(function*() {
        const webhooks = yield* Webhooks
        const subscriptions = yield* WebhookSubscriptions
        const owner = yield* insertUser("pro")
        const made = yield* webhooks.create(owner, { url: HOOK_URL, events: ["email.received", "api_key.created"], labels: ["billing", "urgent", "billing"] })
        expect(made.labels).toEqual(["billing", "urgent"])
        expect((yield* webhooks.update(owner.userId, made.webhook_id, { active: true })).labels).toEqual(["billing", "urgent"])
        const heard = (kind: string, labels?: ReadonlyArray<string>) =>
          Effect.map(subscriptions.endpoints(owner.userId, kind, "mbx_any", labels), (endpoints) => endpoints.map((e) => e.id))
        expect(yield* heard("email.received", ["inbound", "urgent"])).toEqual([made.webhook_id])
        expect(yield* heard("email.received", ["inbound", "unread"])).toEqual([])
        // An event that carries no labels does not go to it.
        expect(yield* heard("api_key.created")).toEqual([])
        expect((yield* webhooks.update(owner.userId, made.webhook_id, { labels: null })).labels).toBeNull()
        expect(yield* heard("email.received", ["inbound", "unread"])).toEqual([made.webhook_id])
        expect(yield* heard("api_key.created")).toEqual([made.webhook_id])
      }))

    it.effect("delete answers a message; the webhook is then gone", () =>
      Effect.gen(function*() {
        const webhooks = yield* Webhooks
        const owner = yield* insertUser("free")
        const created = yield* create(owner, { url: HOOK_URL, events: ["email.received"] })
        expect(yield* webhooks.remove(owner.userId, created.webhook_id)).toEqual({ message: expect.any(String) })
        expect(yield* Effect.flip(webhooks.get(owner.userId, created.webhook_id))).toMatchObject({ code: "NOT_FOUND", status: 404 })
        expect(yield* Effect.flip(webhooks.remove(owner.userId, created.webhook_id))).toMatchObject({ code: "NOT_FOUND", status: 404 })
        expect((yield* webhooks.list(owner.userId, firstPage, newest)).meta.total).toBe(0)
      }))

    it.effect("someone else's webhook is 404 to get, update (even with a bad url), delete and its deliveries, and stays as it was", () =>
      Effect.gen(function*() {
        const webhooks = yield* Webhooks
        const owner = yield* insertUser("free")
        const stranger = yield* insertUser("free")
        const created = yield* create(owner, { url: HOOK_URL, events: ["email.received"] })
        const notFound = { code: "NOT_FOUND", status: 404 }
        expect(yield* Effect.flip(webhooks.get(stranger.userId, created.webhook_id))).toMatchObject(notFound)
        expect(yield* Effect.flip(webhooks.update(stranger.userId, created.webhook_id, { active: false }))).toMatchObject(notFound)
        expect(yield* Effect.flip(webhooks.update(stranger.userId, created.webhook_id, { url: "http://10.0.0.1/" }))).toMatchObject(notFound)
        expect(yield* Effect.flip(webhooks.deliveries(stranger.userId, created.webhook_id, firstPage))).toMatchObject(notFound)
        expect(yield* Effect.flip(webhooks.remove(stranger.userId, created.webhook_id))).toMatchObject(notFound)
        expect((yield* webhooks.list(stranger.userId, firstPage, newest)).webhooks).toEqual([])
        expect(yield* webhooks.get(owner.userId, created.webhook_id)).toMatchObject({ active: true, url: HOOK_URL })
      }))

    it.effect("the list sorts by url or creation time and pages with SPEC's meta", () =>
      Effect.gen(function*() {
        const webhooks = yield* Webhooks
        const owner = yield* insertUser("pro")
        const made = []
        for (const path of ["b", "c", "a"]) made.push(yield* create(owner, { url: `${HOOK_URL}/${path}`, events: ["email.received"] }))
        const urls = (result: { readonly webhooks: ReadonlyArray<{ readonly url: string }> }) => result.webhooks.map((w) => w.url.slice(-1))
        expect(urls(yield* webhooks.list(owner.userId, firstPage, { field: "url", direction: "asc" }))).toEqual(["a", "b", "c"])
        expect(urls(yield* webhooks.list(owner.userId, firstPage, { field: "url", direction: "desc" }))).toEqual(["c", "b", "a"])
        const page = yield* webhooks.list(owner.userId, { limit: 2, offset: 1 }, { field: "url", direction: "asc" })
        expect(urls(page)).toEqual(["b", "c"])
        expect(page.meta).toEqual({ total: 3, limit: 2, offset: 1, hasMore: false })
        const first = yield* webhooks.list(owner.userId, { limit: 1, offset: 0 }, { field: "url", direction: "asc" })
        expect(first.meta).toEqual({ total: 3, limit: 1, offset: 0, hasMore: true })
        expect(yield* webhooks.list(owner.userId, { limit: 5, offset: 9 }, newest)).toEqual({
          webhooks: [],
          meta: { total: 3, limit: 5, offset: 9, hasMore: false }
        })
      }))
    it.scoped("the webhook actor's view of an account's endpoints follows every create, update and delete: at once here, and over the bus in another process", () =>
      Effect.gen(function*() {
        const webhooks = yield* Webhooks
        const here = yield* WebhookSubscriptions
        // Another process's view: its own cache, hearing this one's changes on the bus.
        const there = Context.get(yield* Layer.build(WebhookSubscriptions.Default), WebhookSubscriptions)
        const owner = yield* insertUser("pro")
        const subscribed = (kind: string) => Effect.all([here.endpoints(owner.userId, kind, undefined), there.endpoints(owner.userId, kind, undefined)])
        /** This view at once; the other within the second promised (the bus takes a moment). */
        const both = (kind: string, expected: ReadonlyArray<{ id: string }>) =>
          Effect.gen(function*() {
            expect(yield* here.endpoints(owner.userId, kind, undefined)).toEqual(expected)
            const heard = yield* there.endpoints(owner.userId, kind, undefined).pipe(
              Effect.filterOrFail((found) => JSON.stringify(found) === JSON.stringify(expected)),
              Effect.retry(Schedule.spaced("10 millis").pipe(Schedule.upTo("1 second"))),
              Effect.either,
              // Wall-clock waits: the suite's TestClock would never move on.
              Effect.withClock(Clock.make())
            )
            expect(heard).toEqual(Either.right(expected))
          })
        expect(yield* subscribed("email.received")).toEqual([[], []])

        // What the views keep is not asked again: a row written behind their back is not seen.
        const sql = yield* SqlClient.SqlClient
        yield* sql`INSERT INTO webhooks (id, user_id, url, events, secret) VALUES ('whk_unseen', ${owner.userId}, ${HOOK_URL}, '{email.received}', 'whsec_unseen-secret-value')`
        expect(yield* subscribed("email.received")).toEqual([[], []])
        yield* sql`DELETE FROM webhooks WHERE id = 'whk_unseen'`

        const created = yield* create(owner, { url: HOOK_URL, events: ["email.received"] })
        yield* both("email.received", [{ id: created.webhook_id }])
        expect(yield* subscribed("email.processed")).toEqual([[], []])

        yield* webhooks.update(owner.userId, created.webhook_id, { events: ["email.processed"] })
        yield* both("email.processed", [{ id: created.webhook_id }])
        yield* both("email.received", [])

        yield* webhooks.update(owner.userId, created.webhook_id, { active: false })
        yield* both("email.processed", [])
        yield* webhooks.update(owner.userId, created.webhook_id, { active: true })
        yield* both("email.processed", [{ id: created.webhook_id }])

        yield* webhooks.remove(owner.userId, created.webhook_id)
        yield* both("email.processed", [])
      }))
  })

  it.layer(webhooksWith(true))("WEBHOOK_ALLOW_PRIVATE=true", (it) => {
    it.effect("allows plain http and loopback or private targets, and saves without resolving the host", () =>
      Effect.gen(function*() {
        const owner = yield* insertUser("pro")
        for (const url of ["http://127.0.0.1:8080/hook", "https://internal.example.com/hook", "http://receiver.localhost:9000/x", "https://nowhere.example.com/"]) {
          expect((yield* create(owner, { url, events: ["email.received"] })).url, url).toBe(url)
        }
        expect(yield* Effect.flip(create(owner, { url: "ftp://127.0.0.1/", events: ["email.received"] }))).toMatchObject({
          code: "VALIDATION_ERROR",
          details: { url: expect.any(String) }
        })
      }))
  })

  it.layer(webhooksWith(false))("by hand: a test event, a delivery sent again", (it) => {
    /** A webhook's delivery that ended `status` after `attempts` attempts, its event logged (or not, as if expired). */
    const delivery = (owner: TestUser, webhookId: string, status: string, options: { attempts?: number; logged?: boolean } = {}) =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const id = `dlv_${Math.random().toString(36).slice(2)}`
        const eventId = `email.received:${id}`
        const body = JSON.stringify({ event: "email.received", timestamp: "2026-11-29T08:00:00.000Z", data: { email_id: "eml_1" } })
        if (options.logged !== false) {
          yield* sql`INSERT INTO event_log (event_id, user_id, kind, mailbox_id, payload) VALUES (${eventId}, ${owner.userId}, 'email.received', NULL, ${body})`
        }
        const attempts = options.attempts ?? 3
        yield* sql`INSERT INTO webhook_deliveries (id, webhook_id, event_id, event, status, attempts, completed_at)
                   VALUES (${id}, ${webhookId}, ${eventId}, 'email.received', ${status}, ${attempts}, CASE WHEN ${status} = 'pending' THEN NULL ELSE now() END)`
        for (let n = 1; n <= attempts; n++) {
          yield* sql`INSERT INTO webhook_attempts (delivery_id, attempt, status_code, duration_ms, error, attempted_at)
                     VALUES (${id}, ${n}, 500, 3, 'HTTP 500', now())`
        }
        return { id, eventId, body }
      })

    it.effect("a test event is an example of the kind asked (the first subscribed by default), signed, posted once, logged nowhere", () =>
      Effect.gen(function*() {
        const webhooks = yield* Webhooks
        const owner = yield* insertUser("pro")
        const mailbox = yield* insertMailbox(owner)
        const created = yield* webhooks.create(owner, { url: HOOK_URL, events: ["email.bounced", "email.received"], mailbox_ids: [mailbox.mailboxId] })
        network.posts.length = 0

        const first = yield* webhooks.test(owner.userId, created.webhook_id, undefined)
        expect(first).toMatchObject({ event: "email.bounced", event_id: expect.stringMatching(/^test_/), succeeded: true, status_code: 200, error: null })
        const [sent] = network.posts
        expect(sent!.target.addresses[0]!.address).toBe("93.184.216.34")
        expect(sent!.headers).toMatchObject({ "x-mailroom-event": "email.bounced", "x-mailroom-attempt": "1", "webhook-id": first.event_id })
        expect(JSON.parse(sent!.body)).toEqual(first.payload)
        expect(verifyWebhook({ secret: created.secret, headers: sent!.headers, body: sent!.body })).toBe(true)
        // About the webhook's own mailbox, so a receiver routing by mailbox can be tried too.
        expect(first.payload.data).toMatchObject({ mailbox_id: mailbox.mailboxId, status: "bounced", recipient: expect.any(String) })

        // Every kind's example is that kind's payload, field for field.
        for (const kind of eventKinds) {
          const tested = yield* webhooks.test(owner.userId, created.webhook_id, kind)
          const payload: Schema.Schema<unknown, unknown> = EventPayloads[kind] as never
          expect(Schema.decodeUnknownEither(payload, { onExcessProperty: "error" })(tested.payload)._tag, kind).toBe("Right")
        }
        const sql = yield* SqlClient.SqlClient
        expect(yield* sql`SELECT id FROM webhook_deliveries WHERE webhook_id = ${created.webhook_id}`).toEqual([])
      }))

    it.effect("a test tells what went wrong (a status, a refused connection), tries a disabled webhook, and finds no one else's", () =>
      Effect.gen(function*() {
        const webhooks = yield* Webhooks
        const owner = yield* insertUser("pro")
        const created = yield* webhooks.create(owner, { url: HOOK_URL, events: ["email.received"] })
        yield* webhooks.update(owner.userId, created.webhook_id, { active: false })
        network.answers.push(401, "refused")
        expect(yield* webhooks.test(owner.userId, created.webhook_id, undefined))
          .toMatchObject({ event: "email.received", succeeded: false, status_code: 401, error: "HTTP 401" })
        expect(yield* webhooks.test(owner.userId, created.webhook_id, undefined))
          .toMatchObject({ succeeded: false, status_code: null, error: "connection refused" })
        const stranger = yield* insertUser("pro")
        expect(yield* Effect.flip(webhooks.test(stranger.userId, created.webhook_id, undefined)))
          .toMatchObject({ code: "NOT_FOUND", details: { webhook_id: created.webhook_id } })
      }))

    it.effect("a finished delivery sent again: the same event and webhook-id, the next attempt's number, and its outcome as the status", () =>
      Effect.gen(function*() {
        const webhooks = yield* Webhooks
        const owner = yield* insertUser("pro")
        const created = yield* webhooks.create(owner, { url: HOOK_URL, events: ["email.received"] })
        const failed = yield* delivery(owner, created.webhook_id, "failed")
        network.posts.length = 0

        const resent = yield* webhooks.resend(owner.userId, created.webhook_id, failed.id)
        expect(resent).toMatchObject({ delivery_id: failed.id, status: "succeeded", completed_at: expect.any(String) })
        expect(resent.attempts.map((a) => [a.attempt, a.status_code, a.error])).toEqual([
          [1, 500, "HTTP 500"], [2, 500, "HTTP 500"], [3, 500, "HTTP 500"], [4, 200, null]
        ])
        expect(network.posts).toHaveLength(1)
        expect(network.posts[0]!.body).toBe(failed.body)
        expect(network.posts[0]!.headers).toMatchObject({ "webhook-id": failed.eventId, "x-mailroom-attempt": "4" })
        expect(verifyWebhook({ secret: created.secret, headers: network.posts[0]!.headers, body: failed.body })).toBe(true)

        // Sent again when it had succeeded, and failing now: the status is the latest attempt's.
        network.answers.push(503)
        const again = yield* webhooks.resend(owner.userId, created.webhook_id, failed.id)
        expect(again.status).toBe("failed")
        expect(again.attempts.at(-1)).toMatchObject({ attempt: 5, status_code: 503, error: "HTTP 503" })
      }))

    it.effect("two resends of one delivery at once make one attempt: the second is 409 while the first is under way", () =>
      Effect.gen(function*() {
        const webhooks = yield* Webhooks
        const owner = yield* insertUser("pro")
        const created = yield* webhooks.create(owner, { url: HOOK_URL, events: ["email.received"] })
        const failed = yield* delivery(owner, created.webhook_id, "failed")
        network.posts.length = 0
        const gate = yield* Deferred.make<void>()
        network.gate = gate
        const first = yield* Effect.fork(webhooks.resend(owner.userId, created.webhook_id, failed.id))
        yield* Effect.promise(() => until("the first resend posted", async () => (network.posts.length === 1 ? true : undefined), 5_000, 5))
        expect(yield* Effect.flip(webhooks.resend(owner.userId, created.webhook_id, failed.id))).toMatchObject({
          code: "CONFLICT",
          details: { delivery_id: failed.id, status: "failed" }
        })
        network.gate = undefined
        yield* Deferred.succeed(gate, undefined)
        expect((yield* Fiber.join(first)).attempts.map((a) => a.attempt)).toEqual([1, 2, 3, 4])
        expect(network.posts).toHaveLength(1)
        // Once it has its outcome, the delivery can be sent again.
        expect((yield* webhooks.resend(owner.userId, created.webhook_id, failed.id)).attempts.map((a) => a.attempt)).toEqual([1, 2, 3, 4, 5])
      }))

    it.effect("not sent again: one under way, one of a disabled webhook, one whose event has expired; unknown ones are not found", () =>
      Effect.gen(function*() {
        const webhooks = yield* Webhooks
        const owner = yield* insertUser("pro")
        const created = yield* webhooks.create(owner, { url: HOOK_URL, events: ["email.received"] })
        network.posts.length = 0

        const pending = yield* delivery(owner, created.webhook_id, "pending", { attempts: 1 })
        expect(yield* Effect.flip(webhooks.resend(owner.userId, created.webhook_id, pending.id)))
          .toMatchObject({ code: "CONFLICT", details: { delivery_id: pending.id, status: "pending" } })
        const expired = yield* delivery(owner, created.webhook_id, "failed", { logged: false })
        expect(yield* Effect.flip(webhooks.resend(owner.userId, created.webhook_id, expired.id)))
          .toMatchObject({ code: "CONFLICT", details: { delivery_id: expired.id, event_id: expired.eventId } })
        const canceled = yield* delivery(owner, created.webhook_id, "canceled", { attempts: 1 })
        yield* webhooks.update(owner.userId, created.webhook_id, { active: false })
        expect(yield* Effect.flip(webhooks.resend(owner.userId, created.webhook_id, canceled.id)))
          .toMatchObject({ code: "CONFLICT", details: { webhook_id: created.webhook_id, active: false } })
        // Enabled again, the canceled delivery goes.
        yield* webhooks.update(owner.userId, created.webhook_id, { active: true })
        expect((yield* webhooks.resend(owner.userId, created.webhook_id, canceled.id)).status).toBe("succeeded")
        expect(network.posts).toHaveLength(1)

        expect(yield* Effect.flip(webhooks.resend(owner.userId, created.webhook_id, "dlv_missing")))
          .toMatchObject({ code: "NOT_FOUND", details: { delivery_id: "dlv_missing" } })
        // Another webhook's delivery is not this one's; another account's webhook is not found at all.
        const other = yield* webhooks.create(owner, { url: HOOK_URL, events: ["email.received"] })
        expect(yield* Effect.flip(webhooks.resend(owner.userId, other.webhook_id, canceled.id)))
          .toMatchObject({ code: "NOT_FOUND", details: { delivery_id: canceled.id } })
        const stranger = yield* insertUser("pro")
        expect(yield* Effect.flip(webhooks.resend(stranger.userId, created.webhook_id, canceled.id)))
          .toMatchObject({ code: "NOT_FOUND", details: { webhook_id: created.webhook_id } })
      }))
  })

  const actor = WebhookDelivery.Default.pipe(
    Layer.provide(network.layer),
    Layer.provide(WebhookTargets.Default),
    Layer.provide(Layer.merge(dns.layer, Layer.succeed(WebhookSettings, { allowPrivate: false }))),
    Layer.provideMerge(webhooksWith(false))
  )

  it.layer(actor)("the webhook actor", (it) => {
    it.effect("a webhook narrowed to other mailboxes while an event about one it left is retried gets no more attempts", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const webhooks = yield* Webhooks
        const { deliver } = yield* WebhookDelivery
        const owner = yield* insertUser("pro")
        const [kept, left] = [yield* insertMailbox(owner), yield* insertMailbox(owner)]
        const created = yield* webhooks.create(owner, { url: HOOK_URL, events: ["email.received"] })
        network.posts.length = 0
        network.answers.push(500, 500)
        const event = (mailboxId: string) => {
          const eventId = `email.received:${mailboxId}`
          return deliver(created.webhook_id, eventId, "email.received", JSON.stringify({ data: { mailbox_id: mailboxId } }), mailboxId)
        }
        const both = yield* Effect.fork(Effect.all([event(kept.mailboxId), event(left.mailboxId)], { concurrency: 2 }))
        // Both first attempts failed; the second ones wait 500 ms. The webhook is narrowed meanwhile.
        yield* Effect.promise(() => until("two first attempts", async () => (network.posts.length === 2 ? true : undefined), 5_000, 5))
        yield* webhooks.update(owner.userId, created.webhook_id, { mailbox_ids: [kept.mailboxId] })
        yield* Fiber.join(both)

        const logged = yield* sql<{ mailboxId: string; status: string; attempts: number }>`
          SELECT mailbox_id, status, attempts FROM webhook_deliveries WHERE webhook_id = ${created.webhook_id} ORDER BY status`
        expect(logged).toEqual([
          { mailboxId: left.mailboxId, status: "canceled", attempts: 1 },
          { mailboxId: kept.mailboxId, status: "succeeded", attempts: 2 }
        ])
        expect(network.posts.map((post) => JSON.parse(post.body).data.mailbox_id)).toEqual(
          expect.arrayContaining([kept.mailboxId, left.mailboxId, kept.mailboxId])
        )
        expect(network.posts).toHaveLength(3)
        // The live clock: the retry waits its real 500 ms while the test narrows the webhook.
      }).pipe(Effect.withClock(Clock.make())))
  })

  /** The actor with Billing, which changes plans as checkout, the portal and Stripe's events do, and tells the caches. */
  const billed = Billing.Default.pipe(
    Layer.provideMerge(Layer.merge(Principals.Default, RecipientDirectory.Default)),
    Layer.provideMerge(actor),
    Layer.provide(DependencyHealth.Default)
  )

  it.layer(billed)("the plan's limit at delivery time (more webhooks than the plan allows)", (it) => {
    /** Three pro webhooks, created b, a, c but made oldest first c, a, b: neither their ids' nor their creates' order. */
    const threeOnPro = Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const webhooks = yield* Webhooks
      const owner = yield* insertUser("pro")
      const made: Record<string, string> = {}
      for (const name of ["b", "a", "c"]) {
        made[name] = (yield* webhooks.create(owner, { url: `${HOOK_URL}/${name}`, events: ["api_key.created"] })).webhook_id
      }
      const age = { c: 3, a: 2, b: 1 } as const
      for (const [name, hours] of Object.entries(age)) {
        yield* sql`UPDATE webhooks SET created_at = now() - ${`${hours} hours`}::interval WHERE id = ${made[name]!}`
      }
      return { owner, made: made as Record<"a" | "b" | "c", string> }
    })

    /** An api_key.created event of the account through the actor as the bus hands it over; the webhooks (by path) it was posted to. */
    const deliveredTo = (userId: string) =>
      Effect.gen(function*() {
        const { handle } = yield* WebhookDelivery
        network.posts.length = 0
        const event = { ...sampleEvent("api_key.created", new Date()), namespace: userId }
        yield* handle({ subject: `events.${userId}.api_key.created`, data: encodeJson(event), msgId: uniqueName("evt"), deliveryCount: 1 })
        return network.posts.map((post) => post.target.url.pathname.split("/").pop()).sort()
      })

    /** What the API answers of each webhook: held_by_plan in the list, by path. */
    const heldInList = (userId: string) =>
      Effect.map(
        Effect.flatMap(Webhooks, (webhooks) => webhooks.list(userId, firstPage, { field: "url", direction: "asc" })),
        ({ webhooks }) => Object.fromEntries(webhooks.map((w) => [w.url.split("/").pop()!, { active: w.active, held_by_plan: w.held_by_plan }]))
      )

    it.effect("back on free, only the oldest active one is delivered to; the others are held back, kept, and every answer says so", () =>
      Effect.gen(function*() {
        const webhooks = yield* Webhooks
        const billing = yield* Billing
        const { made, owner } = yield* threeOnPro
        // Within pro's 25 every one is delivered to (and the actor's view of the account is now cached).
        expect(yield* deliveredTo(owner.userId)).toEqual(["a", "b", "c"])
        expect(yield* heldInList(owner.userId)).toEqual({
          a: { active: true, held_by_plan: false },
          b: { active: true, held_by_plan: false },
          c: { active: true, held_by_plan: false }
        })

        // The paid plan ends: free allows 1, the oldest (c).
        yield* billing.changePlan(owner.userId, "free")
        expect(yield* deliveredTo(owner.userId)).toEqual(["c"])
        expect(yield* heldInList(owner.userId)).toEqual({
          a: { active: true, held_by_plan: true },
          b: { active: true, held_by_plan: true },
          c: { active: true, held_by_plan: false }
        })
        // Held, not changed: get answers its settings as they were.
        expect(yield* webhooks.get(owner.userId, made.a)).toMatchObject({
          url: `${HOOK_URL}/a`,
          events: ["api_key.created"],
          active: true,
          held_by_plan: true
        })
        // A new one is refused as before, counting every one kept (the plan as the caller's credential now carries it).
        expect(yield* Effect.flip(webhooks.create({ userId: owner.userId, plan: "free" }, { url: `${HOOK_URL}/d`, events: ["api_key.created"] }))).toMatchObject({
          code: "WEBHOOK_QUOTA",
          status: 403,
          details: { count: 3, limit: 1, plan: "free" }
        })

        // Disabling the one delivered to lets the next in line (a) deliver; a disabled one is not held, just off.
        expect(yield* webhooks.update(owner.userId, made.c, { active: false })).toMatchObject({ active: false, held_by_plan: false })
        expect(yield* deliveredTo(owner.userId)).toEqual(["a"])
        expect(yield* heldInList(owner.userId)).toEqual({
          a: { active: true, held_by_plan: false },
          b: { active: true, held_by_plan: true },
          c: { active: false, held_by_plan: false }
        })
        // A held one may be disabled and enabled again; enabled, it is still held back.
        expect(yield* webhooks.update(owner.userId, made.b, { active: false })).toMatchObject({ active: false, held_by_plan: false })
        expect(yield* webhooks.update(owner.userId, made.b, { active: true })).toMatchObject({ active: true, held_by_plan: true })
        expect(yield* deliveredTo(owner.userId)).toEqual(["a"])
        // c enabled again is the oldest: it delivers, and a waits again.
        expect(yield* webhooks.update(owner.userId, made.c, { active: true })).toMatchObject({ active: true, held_by_plan: false })
        expect(yield* deliveredTo(owner.userId)).toEqual(["c"])

        // Deleting the one delivered to lets the next (a) deliver.
        yield* webhooks.remove(owner.userId, made.c)
        expect(yield* deliveredTo(owner.userId)).toEqual(["a"])
        expect(yield* webhooks.get(owner.userId, made.b)).toMatchObject({ held_by_plan: true })

        // Back on pro, every one delivers again at once.
        yield* billing.changePlan(owner.userId, "pro")
        expect(yield* deliveredTo(owner.userId)).toEqual(["a", "b"])
        expect(yield* heldInList(owner.userId)).toEqual({
          a: { active: true, held_by_plan: false },
          b: { active: true, held_by_plan: false }
        })
      }).pipe(Effect.withClock(Clock.make())))

    it.scoped("a paid plan that lapses (housekeeping) or a Stripe cancellation holds them back at once, here and over the bus on another node; enterprise holds none", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const billing = yield* Billing
        const here = yield* WebhookSubscriptions
        // Another worker's view: its own cache, told over the bus.
        const there = Context.get(yield* Layer.build(WebhookSubscriptions.Default), WebhookSubscriptions)
        const { made, owner } = yield* threeOnPro
        const views = Effect.all([here.endpoints(owner.userId, "api_key.created", undefined), there.endpoints(owner.userId, "api_key.created", undefined)])
        /** Both views (the other within the second promised) deliver to `ids`, oldest first. */
        const both = (ids: ReadonlyArray<string>) =>
          Effect.gen(function*() {
            const expected = ids.map((id) => ({ id }))
            expect(yield* here.endpoints(owner.userId, "api_key.created", undefined)).toEqual(expected)
            const heard = yield* there.endpoints(owner.userId, "api_key.created", undefined).pipe(
              Effect.filterOrFail((found) => JSON.stringify(found) === JSON.stringify(expected)),
              Effect.retry(Schedule.spaced("10 millis").pipe(Schedule.upTo("1 second"))),
              Effect.either
            )
            expect(heard).toEqual(Either.right(expected))
          })
        yield* both([made.c, made.a, made.b])
        yield* views

        // Canceled at the period's end, which has passed: housekeeping ends the plan.
        yield* sql`UPDATE subscriptions SET cancel_at_period_end = true, current_period_end = now() - interval '1 minute' WHERE user_id = ${owner.userId}`
        yield* sweep
        expect((yield* billing.subscription(owner.userId)).plan).toBe("free")
        yield* both([made.c])

        yield* billing.changePlan(owner.userId, "enterprise")
        yield* both([made.c, made.a, made.b])

        // Stripe says the subscription ended.
        yield* billing.applyEvent({
          eventId: uniqueName("evt"),
          eventType: "customer.subscription.deleted",
          kind: "subscription-ended",
          userId: owner.userId,
          customerId: undefined,
          subscriptionId: uniqueName("sub"),
          at: new Date()
        })
        expect((yield* billing.subscription(owner.userId)).plan).toBe("free")
        yield* both([made.c])
      }).pipe(Effect.withClock(Clock.make())))
  })
})
