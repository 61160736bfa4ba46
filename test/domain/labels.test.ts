/**
 * Labels and read state in process, over the suite's migrated database (issue 17, DESIGN.md §4b):
 * what a change may do (fact labels, names, empty or contradictory changes), how it composes with
 * the labels an email has, batches of 100 all or none across accounts, the list filters, and the
 * `email.labels_changed` event each changed email raises.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Duration, Effect, Layer, Queue } from "effect"
import * as MemoryBus from "../../layers/memory-bus.ts"
import { Bus, decodeJson } from "../../services/bus/bus.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { Emails } from "../../services/mail/emails.ts"
import { addedLabelProblem, applyChange, checkChange, labelProblem } from "../../services/mail/label-rules.ts"
import { Labels } from "../../services/mail/labels.ts"
import { testDatabase } from "../support/database.ts"
import { insertEmail, insertMailbox } from "../support/seed-mail.ts"
import { insertUser } from "../support/users.ts"

const services = Layer.mergeAll(Labels.Default, Emails.Default).pipe(
  Layer.provideMerge(MemoryBus.layer),
  Layer.provide(DependencyHealth.Default),
  Layer.provideMerge(testDatabase)
)

const firstPage = { limit: 100, offset: 0 }
const newest = { field: "received_at", direction: "desc" } as const

const failure = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.flip(effect) as Effect.Effect<any, A, any>

layer(services, { timeout: "120 seconds" })("Labels", (it) => {
  it("label names: 1-64 characters, no commas, control characters or surrounding spaces, not only invisible ones", () => {
    expect(labelProblem("follow-up")).toBeUndefined()
    expect(labelProblem("Ärger / 重要")).toBeUndefined()
    expect(labelProblem("x".repeat(64))).toBeUndefined()
    expect(labelProblem("")).toBe("must not be empty")
    expect(labelProblem("x".repeat(65))).toBe("must be at most 64 characters")
    expect(labelProblem(" padded")).toBe("must not start or end with a space")
    expect(labelProblem("a,b")).toBe("must not contain a comma")
    expect(labelProblem("line\nbreak")).toBe("must not contain control characters")
    expect(labelProblem("invoice\u202Efdp.exe")).toBe("must not contain line or paragraph separators or direction overrides")
    expect(labelProblem("\u200b")).toBe("must contain a visible character")
    expect(labelProblem("\u200b\u0301\u200d")).toBe("must contain a visible character")
    expect(labelProblem("\u200bx")).toBeUndefined()
    expect(labelProblem("👍🏽")).toBeUndefined()
    // One added has no empty level between slashes (an IMAP folder no mail program can open); one stored may still be named.
    const emptyLevel = "must not start or end with / or hold //: / separates a label's levels (folders over IMAP), and none may be empty"
    for (const label of ["/lead", "trail/", "a//b", "/", "a/b/"]) {
      expect(labelProblem(label)).toBeUndefined()
      expect(addedLabelProblem(label)).toBe(emptyLevel)
    }
    expect(addedLabelProblem("Clients/Acme/2026")).toBeUndefined()
    expect(addedLabelProblem("a,b")).toBe("must not contain a comma")
    // However the change comes (the API, MCP, a filter): refused naming add_labels; taking one off is a change.
    expect(Effect.runSync(Effect.flip(checkChange({ add: ["ok", "a//b"], remove: [] })))).toMatchObject({
      _tag: "ValidationError",
      details: { add_labels: `"a//b" ${emptyLevel}` }
    })
    expect(Effect.runSync(checkChange({ add: [], remove: ["a//b"] }))).toEqual({ add: [], remove: ["a//b"] })
  })

  it("a change keeps the order of the labels an email has and appends new ones once", () => {
    expect(applyChange(["inbound", "unread", "a"], { add: ["b", "a"], remove: ["unread"] })).toEqual(["inbound", "a", "b"])
    expect(applyChange(["inbound"], { add: [], remove: ["missing"] })).toEqual(["inbound"])
  })

  it.effect("removing unread marks an email handled, custom labels come and go, and each change is announced", () =>
    Effect.gen(function*() {
      const labels = yield* Labels
      const emails = yield* Emails
      const bus = yield* Bus
      const announced = yield* Queue.unbounded<any>()
      yield* bus.consume({
        name: "labels-test",
        stream: "events",
        filter: "events.email.labels_changed",
        handler: (message) => Queue.offer(announced, decodeJson(message.data))
      }).pipe(Effect.forkScoped)
      const mailbox = yield* insertMailbox(yield* insertUser())
      const { id } = yield* insertEmail(mailbox, { subject: "Invoice", receivedMinutesAgo: 1 })

      const [updated] = yield* labels.update(mailbox.owner.userId, [id], { add: ["billing", "billing"], remove: ["unread"] })
      expect(updated!.labels).toEqual(["inbound", "billing"])
      expect((yield* emails.get(mailbox.owner.userId, id)).labels).toEqual(["inbound", "billing"])

      const event = yield* Queue.take(announced).pipe(Effect.timeout(Duration.seconds(10)))
      expect(event).toMatchObject({
        event: "email.labels_changed",
        namespace: mailbox.owner.userId,
        data: { email_id: id, mailbox_id: mailbox.mailboxId, labels: ["inbound", "billing"], added: ["billing"], removed: ["unread"] }
      })

      // A change that changes nothing is answered, and announces nothing.
      yield* labels.update(mailbox.owner.userId, [id], { add: ["billing"], remove: [] })
      const [again] = yield* labels.update(mailbox.owner.userId, [id], { add: ["unread"], remove: ["billing"] })
      expect(again!.labels).toEqual(["inbound", "unread"])
      const next = yield* Queue.take(announced).pipe(Effect.timeout(Duration.seconds(10)))
      expect(next.data).toMatchObject({ added: ["unread"], removed: ["billing"] })
      expect(yield* Queue.size(announced)).toBe(0)
    }).pipe(Effect.scoped))

  it.effect("fact labels cannot be added or removed; empty and contradictory changes are refused", () =>
    Effect.gen(function*() {
      const labels = yield* Labels
      const mailbox = yield* insertMailbox(yield* insertUser())
      const { id } = yield* insertEmail(mailbox, { subject: "Facts", receivedMinutesAgo: 1 })
      const userId = mailbox.owner.userId

      expect(yield* failure(labels.update(userId, [id], { add: [], remove: ["inbound"] }))).toMatchObject({
        status: 400,
        code: "LABEL_READ_ONLY",
        details: { labels: ["inbound"] }
      })
      expect(yield* failure(labels.update(userId, [id], { add: ["sent"], remove: [] }))).toMatchObject({
        code: "LABEL_READ_ONLY",
        details: { labels: ["sent"] }
      })
      expect(yield* failure(labels.update(userId, [id], { add: [], remove: [] }))).toMatchObject({
        status: 400,
        code: "VALIDATION_ERROR",
        details: { add_labels: expect.any(String) }
      })
      expect(yield* failure(labels.update(userId, [id], { add: ["x", "y"], remove: ["x"] }))).toMatchObject({
        code: "VALIDATION_ERROR",
        details: { remove_labels: "x is in add_labels too: a label is added or removed, not both" }
      })
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ labels: Array<string> }>`SELECT labels FROM emails WHERE id = ${id}`
      expect(rows[0]!.labels).toEqual(["inbound", "unread"])
    }))

  it.effect("a batch of 100 changes all of them; one email of another account fails the batch and changes none", () =>
    Effect.gen(function*() {
      const labels = yield* Labels
      const emails = yield* Emails
      const mailbox = yield* insertMailbox(yield* insertUser("pro"))
      const stranger = yield* insertMailbox(yield* insertUser())
      const ids: Array<string> = []
      for (let i = 0; i < 100; i++) ids.push((yield* insertEmail(mailbox, { subject: `Batch ${i}`, receivedMinutesAgo: i + 1 })).id)
      const foreign = (yield* insertEmail(stranger, { subject: "Not yours", receivedMinutesAgo: 1 })).id

      const refused = yield* failure(labels.update(mailbox.owner.userId, [...ids.slice(0, 99), foreign], { add: ["triaged"], remove: [] }))
      expect(refused).toMatchObject({ status: 404, code: "NOT_FOUND", details: { email_id: foreign } })
      const untouched = yield* emails.list(mailbox.owner.userId, mailbox.mailboxId, firstPage, newest, { labels: ["triaged"] })
      expect(untouched.total).toBe(0)

      const updated = yield* labels.update(mailbox.owner.userId, ids, { add: ["triaged"], remove: ["unread"] })
      expect(updated).toHaveLength(100)
      expect(new Set(updated.map((row) => row.labels.join(",")))).toEqual(new Set(["inbound,triaged"]))
      // The stranger's email is theirs alone.
      expect(yield* failure(labels.update(mailbox.owner.userId, [foreign], { add: ["mine"], remove: [] }))).toMatchObject({
        status: 404,
        details: { email_id: foreign }
      })
    }))

  it.effect("a thread's change reaches every email of it, announcing those it changed; another's thread, or a deleted mailbox's, is 404", () =>
    Effect.gen(function*() {
      const labels = yield* Labels
      const emails = yield* Emails
      const bus = yield* Bus
      const mailbox = yield* insertMailbox(yield* insertUser())
      const userId = mailbox.owner.userId
      // This mailbox's events only: the stream holds the other tests' too.
      const announced = yield* Queue.unbounded<any>()
      yield* bus.consume({
        name: "thread-labels-test",
        stream: "events",
        filter: "events.email.labels_changed",
        handler: (message) => {
          const event = decodeJson(message.data) as { data: { mailbox_id: string } }
          return event.data.mailbox_id === mailbox.mailboxId ? Queue.offer(announced, event) : Effect.void
        }
      }).pipe(Effect.forkScoped)
      const threadId = `thr_${crypto.randomUUID()}`
      const read = yield* insertEmail(mailbox, { subject: "Plans", receivedMinutesAgo: 30, threadId, labels: ["inbound"] })
      const unread = yield* insertEmail(mailbox, { subject: "Re: Plans", receivedMinutesAgo: 20, threadId })
      const other = yield* insertEmail(mailbox, { subject: "Elsewhere", receivedMinutesAgo: 10 })

      const updated = yield* labels.updateThread(userId, threadId, { add: ["trip"], remove: ["unread"] })
      expect(new Map(updated.map((row) => [row.id, row.labels]))).toEqual(new Map([[read.id, ["inbound", "trip"]], [unread.id, ["inbound", "trip"]]]))
      const changes = [yield* Queue.take(announced), yield* Queue.take(announced)].map((event) => event.data)
      expect(changes.map((data) => [data.email_id, data.added, data.removed]).sort()).toEqual(
        [[read.id, ["trip"], []], [unread.id, ["trip"], ["unread"]]].sort()
      )
      expect((yield* emails.get(userId, other.id)).labels).toEqual(["inbound", "unread"])
      const [listed] = (yield* emails.threads(userId, mailbox.mailboxId, firstPage, { field: "last_received_at", direction: "asc" })).threads
      expect(listed).toMatchObject({ thread_id: threadId, unread_count: 0, labels: ["inbound", "trip"] })

      // The rules of a change hold as for emails; refused, it changes nothing.
      expect(yield* failure(labels.updateThread(userId, threadId, { add: [], remove: ["inbound"] }))).toMatchObject({ code: "LABEL_READ_ONLY" })
      const stranger = yield* insertUser()
      expect(yield* failure(labels.updateThread(stranger.userId, threadId, { add: ["mine"], remove: [] }))).toMatchObject({
        status: 404,
        code: "NOT_FOUND",
        details: { thread_id: threadId }
      })
      const sql = yield* SqlClient.SqlClient
      yield* sql`UPDATE mailboxes SET status = 'deleted', deleted_at = now() WHERE id = ${mailbox.mailboxId}`
      expect(yield* failure(labels.updateThread(userId, threadId, { add: ["x"], remove: [] }))).toMatchObject({ status: 404 })
      expect(yield* Queue.size(announced)).toBe(0)
    }).pipe(Effect.scoped))

  it.effect("a batch of threads changes every email of each, all or none; a thread not the caller's fails it and is named", () =>
    Effect.gen(function*() {
      const labels = yield* Labels
      const emails = yield* Emails
      const mailbox = yield* insertMailbox(yield* insertUser())
      const userId = mailbox.owner.userId
      const thread = (n: number) => `thr_batch_${mailbox.mailboxId}_${n}`
      const a = yield* insertEmail(mailbox, { subject: "Plans", receivedMinutesAgo: 30, threadId: thread(1) })
      const b = yield* insertEmail(mailbox, { subject: "Re: Plans", receivedMinutesAgo: 20, threadId: thread(1) })
      const c = yield* insertEmail(mailbox, { subject: "Invoice", receivedMinutesAgo: 10, threadId: thread(2) })
      const untouched = yield* insertEmail(mailbox, { subject: "Other", receivedMinutesAgo: 5, threadId: thread(3) })
      const elsewhere = yield* insertMailbox(yield* insertUser())
      const theirs = yield* insertEmail(elsewhere, { subject: "Theirs", receivedMinutesAgo: 5, threadId: thread(4) })

      expect(yield* failure(labels.updateThreads(userId, [thread(1), thread(4)], { add: ["done"], remove: [] }))).toMatchObject({
        status: 404,
        code: "NOT_FOUND",
        details: { thread_id: thread(4) }
      })
      expect(yield* failure(labels.updateThreads(userId, ["thr_unknown", thread(4)], { add: ["done"], remove: [] }))).toMatchObject({
        status: 404,
        message: "Threads not found",
        details: { thread_ids: ["thr_unknown", thread(4)] }
      })
      expect((yield* emails.get(userId, a.id)).labels).toEqual(["inbound", "unread"])

      const updated = yield* labels.updateThreads(userId, [thread(1), thread(2)], { add: ["done"], remove: ["unread"] })
      expect(new Map(updated.map((row) => [row.id, row.labels]))).toEqual(
        new Map([[a.id, ["inbound", "done"]], [b.id, ["inbound", "done"]], [c.id, ["inbound", "done"]]])
      )
      expect((yield* emails.get(userId, untouched.id)).labels).toEqual(["inbound", "unread"])
      expect((yield* emails.get(elsewhere.owner.userId, theirs.id)).labels).toEqual(["inbound", "unread"])
      // The rules of a change hold for a batch as for one thread.
      expect(yield* failure(labels.updateThreads(userId, [thread(1), thread(2)], { add: [], remove: ["inbound"] }))).toMatchObject({
        code: "LABEL_READ_ONLY"
      })
    }))

  it.effect("list filters: every one of labels, none of exclude_labels, read state; counts follow the filter", () =>
    Effect.gen(function*() {
      const emails = yield* Emails
      const mailbox = yield* insertMailbox(yield* insertUser())
      const userId = mailbox.owner.userId
      const a = yield* insertEmail(mailbox, { subject: "A", receivedMinutesAgo: 3, labels: ["inbound", "unread", "work", "urgent"] })
      const b = yield* insertEmail(mailbox, { subject: "B", receivedMinutesAgo: 2, labels: ["inbound", "work"] })
      const c = yield* insertEmail(mailbox, { subject: "C", receivedMinutesAgo: 1, labels: ["inbound", "unread", "home"] })
      const listed = (filter: Parameters<typeof emails.list>[4]) =>
        Effect.map(emails.list(userId, mailbox.mailboxId, firstPage, newest, filter), (page) => ({
          ids: page.emails.map((email) => email.email_id),
          total: page.total
        }))

      expect(yield* listed({ labels: ["work"] })).toEqual({ ids: [b.id, a.id], total: 2 })
      expect(yield* listed({ labels: ["work", "urgent"] })).toEqual({ ids: [a.id], total: 1 })
      expect(yield* listed({ excludeLabels: ["work"] })).toEqual({ ids: [c.id], total: 1 })
      expect(yield* listed({ unread: true })).toEqual({ ids: [c.id, a.id], total: 2 })
      expect(yield* listed({ unread: false })).toEqual({ ids: [b.id], total: 1 })
      expect(yield* listed({ labels: ["work"], unread: true, excludeLabels: ["home"] })).toEqual({ ids: [a.id], total: 1 })
      expect(yield* listed({})).toMatchObject({ total: 3 })
      const page = yield* emails.list(userId, mailbox.mailboxId, firstPage, newest, { labels: ["home"] })
      expect(page.emails[0]!.labels).toEqual(["inbound", "unread", "home"])
    }))
})
