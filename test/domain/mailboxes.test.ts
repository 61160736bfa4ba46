/**
 * Mailboxes in process, over the suite's migrated database (SPEC "Mailboxes", "Mailbox error codes";
 * DESIGN.md §4): every address rule with its code, status and details, the plan quota, rename, delete
 * and the 30-day hold on a deleted address. The routes' wiring is test/api/mailboxes.test.ts's.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as MemoryBus from "../../layers/memory-bus.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { RecipientDirectory } from "../../services/mail/directory.ts"
import { Mailboxes, MailboxSettings, type Owner } from "../../services/mailboxes/mailboxes.ts"
import type { AddressRequest } from "../../services/mailboxes/rules.ts"
import { testDatabase } from "../support/database.ts"
import { uniqueName } from "../support/services.ts"
import { insertUser } from "../support/users.ts"

const SHARED = "agents.localhost"
const OTHER_SHARED = "pool.example"

const services = Mailboxes.Default.pipe(
  Layer.provide(Layer.succeed(MailboxSettings, {
    sharedDomains: [SHARED, OTHER_SHARED],
    // The operator's list, lower-cased (as the config layer gives it).
    disallowedNames: ["postmaster", "abuse", "billing-team"]
  })),
  Layer.provide(RecipientDirectory.Default.pipe(Layer.provide(MemoryBus.layer), Layer.provide(DependencyHealth.Default))),
  Layer.provideMerge(testDatabase)
)

let counter = 0
/** A local part no other test uses: letters and digits, 5 or more. */
const freshLocal = () => `agent${Date.now().toString(36)}${counter++}`

const create = (owner: Owner, request: AddressRequest) => Effect.flatMap(Mailboxes, (mailboxes) => mailboxes.create(owner, request))
const refusal = (owner: Owner, request: AddressRequest) => Effect.flip(create(owner, request))

/** A verified (or not) custom domain of `owner`'s, made with SQL: verification is the domains suite's subject. */
const insertDomain = (owner: Owner, verified: boolean) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const name = `${uniqueName("d").replace(/_/g, "-")}.example`
    yield* sql`INSERT INTO domains (id, user_id, name, verification_token, verified)
               VALUES (${uniqueName("dom")}, ${owner.userId}, ${name}, 'mailroom-verification=x', ${verified})`
    return name
  })

layer(services, { timeout: "120 seconds" })("Mailboxes", (it) => {
  it.effect("creates from local_part or email_address (bare or full); the local part keeps its case, the domain is lower-cased", () =>
    Effect.gen(function*() {
      const owner = yield* insertUser("pro")
      const local = `Mixed.${freshLocal()}`
      const mailbox = yield* create(owner, { local_part: `  ${local} `, domain: "Agents.LOCALHOST." })
      expect(mailbox).toEqual({
        mailbox_id: expect.stringMatching(/^mbx_/),
        email_address: `${local}@${SHARED}`,
        domain: SHARED,
        status: "active",
        namespace: owner.userId,
        created_at: expect.any(String),
        display_name: null
      })
      const bare = freshLocal()
      expect((yield* create(owner, { email_address: bare, domain: SHARED })).email_address).toBe(`${bare}@${SHARED}`)
      const full = freshLocal()
      expect((yield* create(owner, { email_address: `${full}@AGENTS.localhost`, domain: SHARED })).email_address).toBe(`${full}@${SHARED}`)
      // Both fields, naming the same local part in another case, are one request.
      const both = freshLocal()
      expect((yield* create(owner, { local_part: both, email_address: `${both.toUpperCase()}@${SHARED}`, domain: SHARED })).email_address)
        .toBe(`${both}@${SHARED}`)
    }))

  it.effect("MISSING_FIELDS (400): no domain, or neither local_part nor email_address; blank counts as missing", () =>
    Effect.gen(function*() {
      const owner = yield* insertUser("free")
      expect(yield* refusal(owner, { local_part: freshLocal() })).toMatchObject({
        code: "MISSING_FIELDS",
        status: 400,
        details: { missing_fields: ["domain"] }
      })
      expect(yield* refusal(owner, { domain: SHARED, local_part: "   " })).toMatchObject({
        code: "MISSING_FIELDS",
        status: 400,
        details: { missing_fields: ["local_part or email_address"] }
      })
      expect(yield* refusal(owner, {})).toMatchObject({
        code: "MISSING_FIELDS",
        details: { missing_fields: ["domain", "local_part or email_address"] }
      })
    }))

  it.effect("BAD_REQUEST (400): an email_address with nothing before the @, or two fields naming different local parts", () =>
    Effect.gen(function*() {
      const owner = yield* insertUser("free")
      expect(yield* refusal(owner, { email_address: `@${SHARED}`, domain: SHARED })).toMatchObject({ code: "BAD_REQUEST", status: 400 })
      expect(yield* refusal(owner, { local_part: "first-name", email_address: `other-name@${SHARED}`, domain: SHARED })).toMatchObject({
        code: "BAD_REQUEST",
        status: 400
      })
    }))

  it.effect("LOCAL_TOO_SHORT (422): under 5 characters after trimming, with min_length and actual_length; 5 is enough", () =>
    Effect.gen(function*() {
      const owner = yield* insertUser("free")
      expect(yield* refusal(owner, { local_part: "  abcd  ", domain: SHARED })).toMatchObject({
        code: "LOCAL_TOO_SHORT",
        status: 422,
        details: { min_length: 5, actual_length: 4 }
      })
      expect(yield* refusal(owner, { email_address: `ab@${SHARED}`, domain: SHARED })).toMatchObject({
        code: "LOCAL_TOO_SHORT",
        details: { min_length: 5, actual_length: 2 }
      })
      const five = `a${(counter++).toString(36).padStart(4, "0")}`.slice(0, 5)
      expect((yield* create(owner, { local_part: five, domain: SHARED })).email_address).toBe(`${five}@${SHARED}`)
    }))

  it.effect("INVALID_LOCAL (422): only letters, digits, '.', '_' and '-', not starting or ending with '.' or '-'", () =>
    Effect.gen(function*() {
      const owner = yield* insertUser("pro")
      for (const local of ["has space", "bang!name", "plus+tag", "quote\"d", ".leading", "trailing.", "-leading", "trailing-", "dou..ble", "x".repeat(65)]) {
        const error = yield* refusal(owner, { local_part: local, domain: SHARED })
        expect(error, local).toMatchObject({ code: "INVALID_LOCAL", status: 422, details: { local_part: local } })
      }
      for (const local of [`under_${freshLocal()}`, `dash-${freshLocal()}`, `dot.${freshLocal()}`, `_${freshLocal()}_`, "9".repeat(5) + freshLocal()]) {
        expect((yield* create(owner, { local_part: local, domain: SHARED })).email_address, local).toBe(`${local}@${SHARED}`)
      }
    }))

  it.effect("DISALLOWED_LOCAL (422): the operator's reserved names, in any case, on every domain", () =>
    Effect.gen(function*() {
      const owner = yield* insertUser("pro")
      const custom = yield* insertDomain(owner, true)
      for (const [local, domain] of [["postmaster", SHARED], ["Abuse", OTHER_SHARED], ["BILLING-TEAM", custom]] as const) {
        expect(yield* refusal(owner, { local_part: local, domain }), local).toMatchObject({
          code: "DISALLOWED_LOCAL",
          status: 422,
          details: { local_part: local }
        })
      }
      // Only the configured names: a name merely resembling one is fine.
      expect((yield* create(owner, { local_part: `postmaster-${freshLocal()}`, domain: SHARED })).status).toBe("active")
    }))

  it.effect("DOMAIN_MISMATCH (422): the host in email_address differs from domain, with domain_expected and domain_in_request", () =>
    Effect.gen(function*() {
      const owner = yield* insertUser("free")
      expect(yield* refusal(owner, { email_address: `${freshLocal()}@${OTHER_SHARED}`, domain: SHARED })).toMatchObject({
        code: "DOMAIN_MISMATCH",
        status: 422,
        details: { domain_expected: SHARED, domain_in_request: OTHER_SHARED }
      })
    }))

  it.effect("DOMAIN_NOT_ALLOWED (422): free uses the shared pool only; pro also its own verified domains, not unverified or others'", () =>
    Effect.gen(function*() {
      const free = yield* insertUser("free")
      const pro = yield* insertUser("pro")
      const freeOwned = yield* insertDomain(free, true)
      const verified = yield* insertDomain(pro, true)
      const unverified = yield* insertDomain(pro, false)

      expect((yield* create(free, { local_part: freshLocal(), domain: OTHER_SHARED })).domain).toBe(OTHER_SHARED)
      expect(yield* refusal(free, { local_part: freshLocal(), domain: freeOwned })).toMatchObject({
        code: "DOMAIN_NOT_ALLOWED",
        status: 422,
        details: { domain: freeOwned, plan: "free" }
      })
      expect(yield* refusal(free, { local_part: freshLocal(), domain: "nowhere.example" })).toMatchObject({
        code: "DOMAIN_NOT_ALLOWED",
        details: { domain: "nowhere.example", plan: "free" }
      })

      expect((yield* create(pro, { local_part: freshLocal(), domain: verified.toUpperCase() })).domain).toBe(verified)
      expect(yield* refusal(pro, { local_part: freshLocal(), domain: unverified })).toMatchObject({
        code: "DOMAIN_NOT_ALLOWED",
        details: { domain: unverified, plan: "pro" }
      })
      expect(yield* refusal(pro, { local_part: freshLocal(), domain: freeOwned })).toMatchObject({ code: "DOMAIN_NOT_ALLOWED" })
    }))

  it.effect("EMAIL_TAKEN (409): an address is unique across users whatever the case, with details.email_address", () =>
    Effect.gen(function*() {
      const first = yield* insertUser("free")
      const second = yield* insertUser("free")
      const local = freshLocal()
      yield* create(first, { local_part: local, domain: SHARED })
      for (const [owner, request] of [
        [second, { local_part: local.toUpperCase(), domain: SHARED }],
        [second, { email_address: `${local}@${SHARED.toUpperCase()}`, domain: SHARED }],
        [first, { local_part: local, domain: SHARED }]
      ] as const) {
        expect(yield* refusal(owner, request)).toMatchObject({
          code: "EMAIL_TAKEN",
          status: 409,
          details: { email_address: expect.stringMatching(new RegExp(`^${local}@${SHARED}$`, "i")) }
        })
      }
      // The same local part on another domain is another address.
      expect((yield* create(second, { local_part: local, domain: OTHER_SHARED })).email_address).toBe(`${local}@${OTHER_SHARED}`)
    }))

  it.effect("MAILBOX_QUOTA (403): a free account has 3 active mailboxes, with count, limit and plan; deleting one frees a slot", () =>
    Effect.gen(function*() {
      const mailboxes = yield* Mailboxes
      const free = yield* insertUser("free")
      const made = []
      for (let i = 0; i < 3; i++) made.push(yield* create(free, { local_part: freshLocal(), domain: SHARED }))
      const local = freshLocal()
      expect(yield* refusal(free, { local_part: local, domain: SHARED })).toMatchObject({
        code: "MAILBOX_QUOTA",
        status: 403,
        details: { count: 3, limit: 3, plan: "free" }
      })
      // The refused create made no mailbox.
      expect((yield* mailboxes.list(free)).length).toBe(3)

      yield* mailboxes.remove(free, made[0]!.mailbox_id, made[0]!.email_address)
      expect((yield* create(free, { local_part: local, domain: SHARED })).email_address).toBe(`${local}@${SHARED}`)

      const pro = yield* insertUser("pro")
      for (let i = 0; i < 4; i++) yield* create(pro, { local_part: freshLocal(), domain: SHARED })
      expect((yield* mailboxes.list(pro)).length).toBe(4)
    }))

  it.effect("concurrent creates cannot both take the last slot, nor both take one address", () =>
    Effect.gen(function*() {
      const mailboxes = yield* Mailboxes
      const free = yield* insertUser("free")
      for (let i = 0; i < 2; i++) yield* create(free, { local_part: freshLocal(), domain: SHARED })
      const lastSlot = yield* Effect.all(
        Array.from({ length: 4 }, () => Effect.either(create(free, { local_part: freshLocal(), domain: SHARED }))),
        { concurrency: "unbounded" }
      )
      expect(lastSlot.filter((result) => result._tag === "Right")).toHaveLength(1)
      for (const result of lastSlot.filter((r) => r._tag === "Left")) {
        expect(result.left).toMatchObject({ code: "MAILBOX_QUOTA", status: 403 })
      }
      expect(yield* mailboxes.list(free)).toHaveLength(3)

      const local = freshLocal()
      const racers = yield* Effect.forEach([1, 2, 3], () => insertUser("free"))
      const oneAddress = yield* Effect.all(
        racers.map((racer) => Effect.either(create(racer, { local_part: local, domain: SHARED }))),
        { concurrency: "unbounded" }
      )
      expect(oneAddress.filter((result) => result._tag === "Right")).toHaveLength(1)
      for (const result of oneAddress.filter((r) => r._tag === "Left")) {
        expect(result.left).toMatchObject({ code: "EMAIL_TAKEN", status: 409 })
      }
    }))

  it.effect("list: the caller's active mailboxes, newest first", () =>
    Effect.gen(function*() {
      const mailboxes = yield* Mailboxes
      const sql = yield* SqlClient.SqlClient
      const owner = yield* insertUser("pro")
      const other = yield* insertUser("pro")
      yield* create(other, { local_part: freshLocal(), domain: SHARED })
      const older = yield* create(owner, { local_part: freshLocal(), domain: SHARED })
      const gone = yield* create(owner, { local_part: freshLocal(), domain: SHARED })
      const newer = yield* create(owner, { local_part: freshLocal(), domain: SHARED })
      yield* sql`UPDATE mailboxes SET created_at = now() - interval '1 hour' WHERE id = ${older.mailbox_id}`
      yield* mailboxes.remove(owner, gone.mailbox_id, gone.email_address)
      expect((yield* mailboxes.list(owner)).map((m) => m.mailbox_id)).toEqual([newer.mailbox_id, older.mailbox_id])
    }))

  it.effect("listPage: one page of the active mailboxes in the order asked, and how many there are in all", () =>
    Effect.gen(function*() {
      const mailboxes = yield* Mailboxes
      const sql = yield* SqlClient.SqlClient
      const owner = yield* insertUser("pro")
      const older = yield* create(owner, { local_part: freshLocal(), domain: SHARED })
      const gone = yield* create(owner, { local_part: freshLocal(), domain: SHARED })
      const newer = yield* create(owner, { local_part: freshLocal(), domain: SHARED })
      yield* sql`UPDATE mailboxes SET created_at = now() - interval '1 hour' WHERE id = ${older.mailbox_id}`
      yield* mailboxes.remove(owner, gone.mailbox_id, gone.email_address)
      const ids = (page: { readonly mailboxes: ReadonlyArray<{ readonly mailbox_id: string }>; readonly total: number }) => ({
        ids: page.mailboxes.map((m) => m.mailbox_id),
        total: page.total
      })
      expect(ids(yield* mailboxes.listPage(owner, { limit: 1, offset: 0 }))).toEqual({ ids: [newer.mailbox_id], total: 2 })
      expect(ids(yield* mailboxes.listPage(owner, { limit: 1, offset: 1 }))).toEqual({ ids: [older.mailbox_id], total: 2 })
      expect(ids(yield* mailboxes.listPage(owner, { limit: 5, offset: 0 }, "asc"))).toEqual({ ids: [older.mailbox_id, newer.mailbox_id], total: 2 })
      expect(ids(yield* mailboxes.listPage(owner, { limit: 5, offset: 2 }))).toEqual({ ids: [], total: 2 })
    }))

  it.effect("check-email answers valid or the rule's code and details without creating; exclude_mailbox_id frees only the caller's own address", () =>
    Effect.gen(function*() {
      const mailboxes = yield* Mailboxes
      const owner = yield* insertUser("free")
      const other = yield* insertUser("free")
      const local = freshLocal()
      expect(yield* mailboxes.check(owner, { local_part: local, domain: SHARED }, undefined)).toEqual({
        valid: true,
        email_address: `${local}@${SHARED}`
      })
      expect(yield* mailboxes.list(owner)).toEqual([])

      expect(yield* mailboxes.check(owner, { local_part: "abc", domain: SHARED }, undefined)).toEqual({
        valid: false,
        code: "LOCAL_TOO_SHORT",
        message: expect.any(String),
        details: { min_length: 5, actual_length: 3 }
      })
      expect(yield* mailboxes.check(owner, { local_part: local, domain: "nowhere.example" }, undefined)).toMatchObject({
        valid: false,
        code: "DOMAIN_NOT_ALLOWED"
      })

      const mine = yield* create(owner, { local_part: local, domain: SHARED })
      const theirs = yield* create(other, { local_part: freshLocal(), domain: SHARED })
      expect(yield* mailboxes.check(owner, { local_part: local, domain: SHARED }, undefined)).toMatchObject({
        valid: false,
        code: "EMAIL_TAKEN",
        details: { email_address: `${local}@${SHARED}` }
      })
      expect(yield* mailboxes.check(owner, { local_part: local.toUpperCase(), domain: SHARED }, mine.mailbox_id)).toMatchObject({ valid: true })
      expect(yield* mailboxes.check(owner, { email_address: theirs.email_address, domain: SHARED }, theirs.mailbox_id)).toMatchObject({
        valid: false,
        code: "EMAIL_TAKEN"
      })
      // A missing domain is not an answer but a 400.
      expect(yield* Effect.flip(mailboxes.check(owner, { local_part: local }, undefined))).toMatchObject({
        code: "MISSING_FIELDS",
        status: 400
      })
    }))

  it.effect("rename keeps mailbox_id and answers the previous address; the same rules apply", () =>
    Effect.gen(function*() {
      const mailboxes = yield* Mailboxes
      const owner = yield* insertUser("free")
      const other = yield* insertUser("free")
      const mailbox = yield* create(owner, { local_part: freshLocal(), domain: SHARED })
      const theirs = yield* create(other, { local_part: freshLocal(), domain: SHARED })
      const local = freshLocal()

      const renamed = yield* mailboxes.rename(owner, mailbox.mailbox_id, { local_part: local, domain: OTHER_SHARED })
      expect(renamed).toEqual({
        previous_email_address: mailbox.email_address,
        mailbox: { mailbox_id: mailbox.mailbox_id, email_address: `${local}@${OTHER_SHARED}`, domain: OTHER_SHARED, status: "active", display_name: null }
      })
      expect((yield* mailboxes.list(owner)).map((m) => [m.mailbox_id, m.email_address])).toEqual([[mailbox.mailbox_id, `${local}@${OTHER_SHARED}`]])

      // Its own address in another case is not taken; someone else's is.
      expect((yield* mailboxes.rename(owner, mailbox.mailbox_id, { local_part: local.toUpperCase(), domain: OTHER_SHARED })).mailbox.email_address)
        .toBe(`${local.toUpperCase()}@${OTHER_SHARED}`)
      expect(yield* Effect.flip(mailboxes.rename(owner, mailbox.mailbox_id, { email_address: theirs.email_address, domain: SHARED })))
        .toMatchObject({ code: "EMAIL_TAKEN", status: 409 })
      expect(yield* Effect.flip(mailboxes.rename(owner, mailbox.mailbox_id, { local_part: "tiny", domain: SHARED }))).toMatchObject({
        code: "LOCAL_TOO_SHORT",
        status: 422
      })
      expect(yield* Effect.flip(mailboxes.rename(other, mailbox.mailbox_id, { local_part: freshLocal(), domain: SHARED }))).toMatchObject({
        code: "NOT_FOUND",
        status: 404
      })
      expect((yield* mailboxes.list(owner))[0]!.email_address).toBe(`${local.toUpperCase()}@${OTHER_SHARED}`)
    }))

  it.effect("delete needs confirm_email_address equal to the full address exactly (400 VALIDATION_ERROR); only the owner deletes", () =>
    Effect.gen(function*() {
      const mailboxes = yield* Mailboxes
      const owner = yield* insertUser("free")
      const other = yield* insertUser("free")
      const mailbox = yield* create(owner, { local_part: `Case${freshLocal()}`, domain: SHARED })
      const remove = (who: Owner, confirm: string | undefined) => mailboxes.remove(who, mailbox.mailbox_id, confirm)

      for (const confirm of [undefined, ""]) {
        expect(yield* Effect.flip(remove(owner, confirm))).toMatchObject({
          code: "VALIDATION_ERROR",
          status: 400,
          details: { confirm_email_address: expect.any(String) }
        })
      }
      for (const confirm of [mailbox.email_address.toLowerCase(), ` ${mailbox.email_address}`, mailbox.email_address.split("@")[0]!]) {
        expect(yield* Effect.flip(remove(owner, confirm)), confirm).toMatchObject({
          code: "VALIDATION_ERROR",
          status: 400,
          details: { confirm_email_address: expect.any(String) }
        })
      }
      expect(yield* Effect.flip(remove(other, mailbox.email_address))).toMatchObject({ code: "NOT_FOUND", status: 404 })
      expect((yield* mailboxes.list(owner)).map((m) => m.mailbox_id)).toEqual([mailbox.mailbox_id])

      expect(yield* remove(owner, mailbox.email_address)).toEqual({ deleted: true })
      expect(yield* mailboxes.list(owner)).toEqual([])
      expect(yield* Effect.flip(remove(owner, mailbox.email_address))).toMatchObject({ code: "NOT_FOUND", status: 404 })
      expect(yield* Effect.flip(mailboxes.rename(owner, mailbox.mailbox_id, { local_part: freshLocal(), domain: SHARED }))).toMatchObject({
        code: "NOT_FOUND"
      })
    }))

  it.effect("an address a rename left is held as a deleted one is: its owner's again at once, anyone else's after 30 days", () =>
    Effect.gen(function*() {
      const mailboxes = yield* Mailboxes
      const sql = yield* SqlClient.SqlClient
      const owner = yield* insertUser("free")
      const other = yield* insertUser("free")
      const mailbox = yield* create(owner, { local_part: freshLocal(), domain: SHARED })
      const left = mailbox.email_address
      yield* mailboxes.rename(owner, mailbox.mailbox_id, { local_part: freshLocal(), domain: OTHER_SHARED })

      // Mail may still be sent to the old address: nobody else may take it over yet.
      expect(yield* refusal(other, { email_address: left.toUpperCase(), domain: SHARED })).toMatchObject({ code: "EMAIL_TAKEN", status: 409 })
      expect(yield* mailboxes.check(other, { email_address: left, domain: SHARED }, undefined)).toMatchObject({ valid: false, code: "EMAIL_TAKEN" })
      expect(yield* Effect.flip(mailboxes.rename(other, (yield* create(other, { local_part: freshLocal(), domain: SHARED })).mailbox_id, {
        email_address: left,
        domain: SHARED
      }))).toMatchObject({ code: "EMAIL_TAKEN" })
      yield* sql`UPDATE released_addresses SET released_at = now() - interval '29 days' WHERE address_normalized = ${left.toLowerCase()}`
      expect(yield* refusal(other, { email_address: left, domain: SHARED })).toMatchObject({ code: "EMAIL_TAKEN" })
      // Its owner takes it back at once (renaming back, or a new mailbox).
      const back = yield* mailboxes.rename(owner, mailbox.mailbox_id, { email_address: left, domain: SHARED })
      expect(back.mailbox.email_address).toBe(left)
      // Renaming away again holds it afresh; once the hold has passed it is anyone's.
      yield* mailboxes.rename(owner, mailbox.mailbox_id, { local_part: freshLocal(), domain: OTHER_SHARED })
      expect(yield* refusal(other, { email_address: left, domain: SHARED })).toMatchObject({ code: "EMAIL_TAKEN" })
      yield* sql`UPDATE released_addresses SET released_at = now() - interval '30 days 1 minute' WHERE address_normalized = ${left.toLowerCase()}`
      expect(yield* create(other, { email_address: left, domain: SHARED })).toMatchObject({ email_address: left, namespace: other.userId })
    }))

  it.effect("a deleted address is free again for its owner at once, and for anyone else only after 30 days", () =>
    Effect.gen(function*() {
      const mailboxes = yield* Mailboxes
      const sql = yield* SqlClient.SqlClient
      const owner = yield* insertUser("free")
      const other = yield* insertUser("free")

      const kept = yield* create(owner, { local_part: freshLocal(), domain: SHARED })
      yield* mailboxes.remove(owner, kept.mailbox_id, kept.email_address)
      const again = yield* create(owner, { email_address: kept.email_address.toUpperCase(), domain: SHARED })
      expect(again.mailbox_id).not.toBe(kept.mailbox_id)

      const held = yield* create(owner, { local_part: freshLocal(), domain: SHARED })
      yield* mailboxes.remove(owner, held.mailbox_id, held.email_address)
      expect(yield* refusal(other, { email_address: held.email_address, domain: SHARED })).toMatchObject({ code: "EMAIL_TAKEN", status: 409 })
      expect(yield* mailboxes.check(other, { email_address: held.email_address, domain: SHARED }, undefined)).toMatchObject({
        valid: false,
        code: "EMAIL_TAKEN"
      })
      yield* sql`UPDATE mailboxes SET deleted_at = now() - interval '29 days' WHERE id = ${held.mailbox_id}`
      expect(yield* refusal(other, { email_address: held.email_address, domain: SHARED })).toMatchObject({ code: "EMAIL_TAKEN" })
      yield* sql`UPDATE mailboxes SET deleted_at = now() - interval '30 days 1 minute' WHERE id = ${held.mailbox_id}`
      const taken = yield* create(other, { email_address: held.email_address, domain: SHARED })
      expect(taken).toMatchObject({ email_address: held.email_address, namespace: other.userId })
      expect(taken.mailbox_id).not.toBe(held.mailbox_id)
    }))

  it.effect("forwarding to a mailbox's address, from any account, is suspended when the mailbox is deleted or renamed away", () =>
    Effect.gen(function*() {
      const mailboxes = yield* Mailboxes
      const sql = yield* SqlClient.SqlClient
      const owner = yield* insertUser("pro")
      const stranger = yield* insertUser("pro")
      const target = yield* create(owner, { local_part: freshLocal(), domain: SHARED })
      const moved = yield* create(owner, { local_part: freshLocal(), domain: SHARED })
      const mine = yield* create(owner, { local_part: freshLocal(), domain: SHARED })
      const theirs = yield* create(stranger, { local_part: freshLocal(), domain: SHARED })
      const forward = (from: { readonly mailbox_id: string; readonly namespace: string }, address: string) =>
        sql`INSERT INTO mailbox_forwards (mailbox_id, user_id, address, domain, token_sha256, confirmed_at)
            VALUES (${from.mailbox_id}, ${from.namespace}, ${address}, ${address.split("@")[1]!}, ${uniqueName("tok")}, now())`
      const [local] = target.email_address.split("@")
      yield* forward(mine, target.email_address)
      yield* forward(theirs, `${local}+copies@${SHARED}`)
      yield* forward(mine, moved.email_address)
      yield* forward(mine, `${local}x@${SHARED}`)
      yield* forward(mine, "person@elsewhere.example")
      const states = () =>
        sql<{ address: string; suspendedReason: string | null }>`
          SELECT address, suspended_reason FROM mailbox_forwards WHERE mailbox_id IN (${mine.mailbox_id}, ${theirs.mailbox_id}) ORDER BY address`

      yield* mailboxes.remove(owner, target.mailbox_id, target.email_address)
      const renamed = yield* mailboxes.rename(owner, moved.mailbox_id, { local_part: freshLocal(), domain: SHARED })
      expect(yield* states()).toEqual([
        { address: `${local}+copies@${SHARED}`, suspendedReason: `Not forwarded: the mailbox ${target.email_address} was deleted` },
        { address: target.email_address, suspendedReason: `Not forwarded: the mailbox ${target.email_address} was deleted` },
        { address: `${local}x@${SHARED}`, suspendedReason: null },
        { address: moved.email_address, suspendedReason: `Not forwarded: ${moved.email_address} was renamed to ${renamed.mailbox.email_address}` },
        { address: "person@elsewhere.example", suspendedReason: null }
      ].sort((a, b) => (a.address < b.address ? -1 : 1)))
    }))
})
