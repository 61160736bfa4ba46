/**
 * API keys in process, over the suite's migrated database (SPEC "API keys", DESIGN.md §4): the full
 * key once and only a hash kept, plan and rate limit following the owner, expiry and revocation as
 * the Authenticator sees them, and the list's owner, sort and pages; a key limited to some mailboxes,
 * as its principal carries the limit and MailboxReach and the lists of every mailbox hold it to them
 * (over HTTP: test/api/limited-keys.test.ts).
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Duration, Effect, Layer, Option, Queue, Redacted } from "effect"
import { Administration } from "../../services/accounts/administration.ts"
import { Authenticator } from "../../services/accounts/authenticator.ts"
import { Principals } from "../../services/accounts/principals.ts"
import { MailboxReach } from "../../services/accounts/reach.ts"
import { AccountSettings } from "../../services/accounts/settings.ts"
import { Bus, decodeJson } from "../../services/bus/bus.ts"
import { sweepOutbox } from "../../services/bus/outbox.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { ApiKeys } from "../../services/keys/api-keys.ts"
import { Emails } from "../../services/mail/emails.ts"
import { testDatabase } from "../support/database.ts"
import { insertEmail, insertMailbox } from "../support/seed-mail.ts"
import { makeRefusingBus } from "../support/refusing-bus.ts"
import { testSecret } from "../support/services.ts"
import { insertUser } from "../support/users.ts"
import { sleep } from "../support/wait.ts"

const refusingBus = makeRefusingBus()
const services = Layer.mergeAll(ApiKeys.Default, Authenticator.Default, Administration.Default, MailboxReach.Default, Emails.Default).pipe(
  Layer.provideMerge(Principals.Default),
  Layer.provideMerge(refusingBus.layer),
  Layer.provide(Layer.merge(Layer.succeed(AccountSettings, { jwtSecret: Redacted.make(testSecret()) }), DependencyHealth.Default)),
  Layer.provideMerge(testDatabase)
)

const firstPage = { limit: 20, offset: 0 }
const newest = { field: "createdAt", direction: "desc" } as const

/** The owner an API key acts for now, or the refusal. */
const authenticate = (apiKey: string) =>
  Effect.flatMap(Authenticator, (auth) => auth.authenticate({ kind: "apiKey", secret: apiKey })).pipe(
    Effect.map(({ principal }) => principal)
  )

layer(services, { timeout: "120 seconds" })("ApiKeys", (it) => {
  it.scoped("create shows the full key once, keeps only its hash, and announces api_key.created", () =>
    Effect.gen(function*() {
      const keys = yield* ApiKeys
      const sql = yield* SqlClient.SqlClient
      const bus = yield* Bus
      const announced = yield* Queue.unbounded<unknown>()
      yield* bus.consume({
        name: "api-keys-test",
        stream: "events",
        filter: "events.api_key.created",
        handler: (message) => Queue.offer(announced, decodeJson(message.data))
      })
      const user = yield* insertUser("free")

      const created = yield* keys.create(user.userId, { name: "ci" })
      expect(created).toEqual({
        keyId: expect.stringMatching(/^key_/),
        name: "ci",
        apiKey: expect.stringMatching(/^mr_/),
        keyPrefix: expect.any(String),
        plan: "free",
        rateLimit: 20,
        createdAt: expect.any(String),
        expirationTs: null,
        mailboxIds: null,
        permission: "full_access"
      })
      expect(created.apiKey.startsWith(created.keyPrefix.replace(/\*+$/, ""))).toBe(true)
      expect(created.keyPrefix.replace(/\*+$/, "").length).toBeLessThan(created.apiKey.length / 2)
      const stored = yield* sql`SELECT * FROM api_keys WHERE id = ${created.keyId}`
      expect(JSON.stringify(stored)).not.toContain(created.apiKey)
      expect((yield* authenticate(created.apiKey)).userId).toBe(user.userId)

      const listed = yield* keys.list(user.userId, firstPage, newest)
      expect(listed.keys).toEqual([{
        keyId: created.keyId,
        name: "ci",
        keyPrefix: created.keyPrefix,
        plan: "free",
        rateLimit: 20,
        lastUsed: expect.any(String),
        createdAt: created.createdAt,
        expirationTs: null,
        mailboxIds: null,
        permission: "full_access"
      }])

      const event = yield* Queue.take(announced).pipe(Effect.timeout(Duration.seconds(10)))
      expect(event).toMatchObject({
        event: "api_key.created",
        namespace: user.userId,
        data: { keyId: created.keyId, name: "ci", keyPrefix: created.keyPrefix, mailboxIds: null, permission: "full_access" }
      })
      expect(JSON.stringify(event)).not.toContain(created.apiKey)

      // Made while the bus is down: made all the same, and announced once it is back (the outbox's sweep).
      const unheard = yield* refusingBus.whileRefusing(keys.create(user.userId, { name: "during an outage" }))
      expect((yield* authenticate(unheard.apiKey)).userId).toBe(user.userId)
      expect(yield* Queue.poll(announced)).toMatchObject({ _tag: "None" })
      yield* sql`UPDATE outbox SET attempted_at = now() - interval '1 minute' WHERE msg_id = ${`api_key.created:${unheard.keyId}`}`
      expect(yield* sweepOutbox).toBe(1)
      expect(yield* Queue.take(announced).pipe(Effect.timeout(Duration.seconds(10)))).toMatchObject({
        event: "api_key.created",
        data: { keyId: unheard.keyId, name: "during an outage" }
      })
    }))

  it.effect("a key's plan and rate limit follow its owner's current plan", () =>
    Effect.gen(function*() {
      const keys = yield* ApiKeys
      const sql = yield* SqlClient.SqlClient
      const user = yield* insertUser("free")
      const created = yield* keys.create(user.userId, { name: "grows" })
      yield* sql`UPDATE subscriptions SET plan = 'pro' WHERE user_id = ${user.userId}`
      const [listed] = (yield* keys.list(user.userId, firstPage, newest)).keys
      expect(listed).toMatchObject({ keyId: created.keyId, plan: "pro", rateLimit: 100 })
      expect((yield* authenticate(created.apiKey)).plan).toBe("pro")
    }))

  it.effect("expirationDays sets expirationTs; a key past it no longer authenticates", () =>
    Effect.gen(function*() {
      const keys = yield* ApiKeys
      const sql = yield* SqlClient.SqlClient
      const user = yield* insertUser("free")
      const before = Date.now()
      const created = yield* keys.create(user.userId, { name: "short-lived", expirationDays: 30 })
      const expires = new Date(created.expirationTs!).getTime()
      expect(expires).toBeGreaterThanOrEqual(before + 30 * 86_400_000)
      expect(expires).toBeLessThanOrEqual(Date.now() + 30 * 86_400_000)
      expect((yield* authenticate(created.apiKey)).userId).toBe(user.userId)

      // The expiry as the cached key holds it: a key that ends in 1.5 s works until then (cached,
      // with the bus heard, for longer than that), and is refused once it has passed.
      const soon = yield* keys.create(user.userId, { name: "ends soon", expirationDays: 1 })
      yield* sql`UPDATE api_keys SET expires_at = now() + interval '1.5 seconds' WHERE id = ${soon.keyId}`
      expect((yield* authenticate(soon.apiKey)).userId).toBe(user.userId)
      yield* Effect.promise(() => sleep(1600)) // real time: it.effect runs on the test clock
      expect(yield* Effect.flip(authenticate(soon.apiKey))).toMatchObject({ code: "UNAUTHORIZED", status: 401 })
      // The operator's `mailroom usage` counts the keys that still work: not the expired one.
      expect((yield* (yield* Administration).counts(user.userId)).keys).toBe(1)
    }))

  it.effect("revoke answers {keyId, revoked: true}; the key stops authenticating and leaves the list; only the owner revokes", () =>
    Effect.gen(function*() {
      const keys = yield* ApiKeys
      const owner = yield* insertUser("free")
      const stranger = yield* insertUser("free")
      const doomed = yield* keys.create(owner.userId, { name: "doomed" })
      const kept = yield* keys.create(owner.userId, { name: "kept" })

      const notTheirs = yield* Effect.flip(keys.revoke(stranger.userId, doomed.keyId))
      expect(notTheirs).toMatchObject({ code: "NOT_FOUND", status: 404 })
      expect((yield* authenticate(doomed.apiKey)).userId).toBe(owner.userId)

      expect(yield* keys.revoke(owner.userId, doomed.keyId)).toEqual({ keyId: doomed.keyId, revoked: true })
      expect(yield* Effect.flip(authenticate(doomed.apiKey))).toMatchObject({ code: "UNAUTHORIZED", status: 401 })
      expect((yield* authenticate(kept.apiKey)).userId).toBe(owner.userId)
      const listed = yield* keys.list(owner.userId, firstPage, newest)
      expect(listed.keys.map((k) => k.keyId)).toEqual([kept.keyId])
      expect(listed.meta.total).toBe(1)

      expect(yield* Effect.flip(keys.revoke(owner.userId, doomed.keyId))).toMatchObject({ code: "NOT_FOUND", status: 404 })
      expect(yield* Effect.flip(keys.revoke(owner.userId, "key_missing"))).toMatchObject({ code: "NOT_FOUND", status: 404 })
    }))

  it.effect("the list holds the caller's keys only, sorted by the field asked for and paged with SPEC's meta", () =>
    Effect.gen(function*() {
      const keys = yield* ApiKeys
      const sql = yield* SqlClient.SqlClient
      const user = yield* insertUser("free")
      const other = yield* insertUser("free")
      yield* keys.create(other.userId, { name: "someone else's" })
      const bravo = yield* keys.create(user.userId, { name: "bravo" })
      const alpha = yield* keys.create(user.userId, { name: "alpha" })
      const charlie = yield* keys.create(user.userId, { name: "charlie" })
      // Creation times a day apart: alpha oldest, then charlie, then bravo.
      yield* sql`UPDATE api_keys SET created_at = now() - interval '3 days' WHERE id = ${alpha.keyId}`
      yield* sql`UPDATE api_keys SET created_at = now() - interval '2 days' WHERE id = ${charlie.keyId}`
      yield* sql`UPDATE api_keys SET created_at = now() - interval '1 day' WHERE id = ${bravo.keyId}`

      const names = (result: { readonly keys: ReadonlyArray<{ readonly name: string }> }) => result.keys.map((k) => k.name)
      const byName = yield* keys.list(user.userId, firstPage, { field: "name", direction: "asc" })
      expect(names(byName)).toEqual(["alpha", "bravo", "charlie"])
      expect(byName.meta).toEqual({ total: 3, limit: 20, offset: 0, hasMore: false })
      expect(names(yield* keys.list(user.userId, firstPage, { field: "name", direction: "desc" }))).toEqual(["charlie", "bravo", "alpha"])
      expect(names(yield* keys.list(user.userId, firstPage, newest))).toEqual(["bravo", "charlie", "alpha"])
      expect(names(yield* keys.list(user.userId, firstPage, { field: "createdAt", direction: "asc" }))).toEqual(["alpha", "charlie", "bravo"])

      const first = yield* keys.list(user.userId, { limit: 2, offset: 0 }, newest)
      expect(names(first)).toEqual(["bravo", "charlie"])
      expect(first.meta).toEqual({ total: 3, limit: 2, offset: 0, hasMore: true })
      const second = yield* keys.list(user.userId, { limit: 2, offset: 2 }, newest)
      expect(names(second)).toEqual(["alpha"])
      expect(second.meta).toEqual({ total: 3, limit: 2, offset: 2, hasMore: false })
      const beyond = yield* keys.list(user.userId, { limit: 2, offset: 10 }, newest)
      expect(beyond).toEqual({ keys: [], meta: { total: 3, limit: 2, offset: 10, hasMore: false } })
    }))

  it.effect("a key limited to some mailboxes: its principal carries them, and what lies outside is not found", () =>
    Effect.gen(function*() {
      const keys = yield* ApiKeys
      const auth = yield* Authenticator
      const reach = yield* MailboxReach
      const emails = yield* Emails
      const user = yield* insertUser()
      const mine = yield* insertMailbox(user)
      const other = yield* insertMailbox(user)
      const stranger = yield* insertMailbox(yield* insertUser())
      const myEmail = yield* insertEmail(mine, { subject: "Mine", receivedMinutesAgo: 2, threadId: "thr_reach_mine" })
      const otherEmail = yield* insertEmail(other, { subject: "Theirs", receivedMinutesAgo: 1, threadId: "thr_reach_other" })

      // Named twice, kept once; another account's mailbox is refused as an unknown one.
      const created = yield* keys.create(user.userId, { name: "agent", mailboxIds: [mine.mailboxId, mine.mailboxId] })
      expect(created.mailboxIds).toEqual([mine.mailboxId])
      const refused = yield* Effect.flip(keys.create(user.userId, { name: "agent", mailboxIds: [mine.mailboxId, stranger.mailboxId] }))
      expect(refused).toMatchObject({ code: "VALIDATION_ERROR", details: { mailboxIds: `not a mailbox of this account: ${stranger.mailboxId}` } })

      const { principal } = yield* auth.authenticate({ kind: "apiKey", secret: created.apiKey })
      expect(principal.mailboxes).toEqual(Option.some([mine.mailboxId]))
      const whole = yield* keys.create(user.userId, { name: "everything" })
      expect((yield* auth.authenticate({ kind: "apiKey", secret: whole.apiKey })).principal.mailboxes).toEqual(Option.none())

      yield* reach.mailbox(principal, mine.mailboxId)
      expect(yield* Effect.flip(reach.mailbox(principal, other.mailboxId))).toMatchObject({ code: "NOT_FOUND", details: { mailbox_id: other.mailboxId } })
      yield* reach.emails(principal, [myEmail.id])
      // An id of no email is refused as another mailbox's is: which ids exist is not told.
      expect(yield* Effect.flip(reach.emails(principal, [myEmail.id, "eml_unknown"]))).toMatchObject({ code: "NOT_FOUND", details: { email_id: "eml_unknown" } })
      expect(yield* Effect.flip(reach.emails(principal, [myEmail.id, otherEmail.id]))).toMatchObject({
        code: "NOT_FOUND",
        details: { email_id: otherEmail.id }
      })
      yield* reach.thread(principal, "thr_reach_mine")
      expect(yield* Effect.flip(reach.thread(principal, "thr_reach_other"))).toMatchObject({ code: "NOT_FOUND", details: { thread_id: "thr_reach_other" } })
      expect(yield* Effect.flip(reach.thread(principal, "thr_unknown"))).toMatchObject({ code: "NOT_FOUND", details: { thread_id: "thr_unknown" } })

      const page = { limit: 20, offset: 0 }
      const newestFirst = { field: "received_at", direction: "desc" } as const
      const all = yield* emails.listAll(user.userId, page, newestFirst)
      expect(all.emails.map((email) => email.email_id)).toEqual([otherEmail.id, myEmail.id])
      const limited = yield* emails.listAll(user.userId, page, newestFirst, { mailboxes: [mine.mailboxId] })
      expect(limited).toMatchObject({ total: 1, emails: [{ email_id: myEmail.id }] })
      const threads = yield* emails.threadsAll(user.userId, page, { field: "last_received_at", direction: "desc" }, { mailboxes: [mine.mailboxId] })
      expect(threads.threads.map((thread) => thread.thread_id)).toEqual(["thr_reach_mine"])
    }))
})
