/**
 * Live events over Server-Sent Events and a WebSocket (issue 17): a client without a public URL hears its account's
 * events as they happen, with the webhook's id and payload, filtered by kind and mailbox, and
 * resumes after a reconnection with exactly what it missed. Each refusal answers SPEC's envelope.
 * The cross-process case (an event made by a worker in another process reaching a stream on the api
 * node) is test/cluster/cluster.test.ts's.
 */
import http from "node:http"
import { beforeAll, describe, expect, it } from "vitest"
import { withApiKey } from "../support/accounts.ts"
import { upgrade } from "../support/billing.ts"
import { type Box, newBox } from "../support/mailboxes.ts"
import { sendMail } from "../support/send-mail.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { openEvents } from "../support/sse.ts"
import { withKey, withToken } from "../support/typed-client.ts"
import { sleep, until } from "../support/wait.ts"
import { openSocket } from "../support/ws.ts"

let suite: SuiteServer

useSuiteServer((s) => {
  suite = s
})

const deliver = (to: string, subject: string) => sendMail(suite.server.smtpPort, { to, subject, text: `About ${subject}` })

const stream = (apiKey: string, query = "", headers: Record<string, string> = {}) =>
  openEvents(`${suite.url}/v1/events${query}`, { "x-api-key": apiKey, ...headers })

const label = (apiKey: string, emailId: string, add: string) =>
  withKey(suite.url, { apiKey })
    .PATCH("/v1/api/emails/{emailId}", { params: { path: { emailId } }, body: { add_labels: [add] } })
    .then((reply) => expect(reply.response.status).toBe(200))

describe("GET /v1/events", () => {
  let box: Box
  let other: Box

  beforeAll(async () => {
    const user = await withApiKey(suite.url)
    await upgrade(suite.url, user.apiKey, "pro")
    box = await newBox(suite.url, { user })
    other = await newBox(suite.url, { user })
  })

  it("streams an arriving email as the webhook would send it: id, kind, payload", async () => {
    const events = await stream(box.user.apiKey, "?types=email.received")
    try {
      expect(events.status).toBe(200)
      expect(events.headers.get("cache-control")).toContain("no-cache")
      await deliver(box.address, "Live one")
      const frame = await events.next()
      expect(frame.event).toBe("email.received")
      expect(frame.id).toMatch(/\S+/)
      const payload = JSON.parse(frame.data!)
      expect(Object.keys(payload).sort()).toEqual(["data", "event", "timestamp"])
      expect(payload.event).toBe("email.received")
      expect(payload.data).toMatchObject({ mailbox_id: box.mailboxId, subject: "Live one", labels: ["inbound", "unread", "unauthenticated"] })
      expect(events.seen()[0]).toEqual({ retry: 2000 })
    } finally {
      events.close()
    }
  })

  it("filters by kind and by mailbox", async () => {
    const labelsOnly = await stream(box.user.apiKey, "?types=email.labels_changed")
    const otherBox = await stream(box.user.apiKey, `?mailbox_id=${other.mailboxId}`)
    try {
      await deliver(box.address, "Filtered")
      await deliver(other.address, "For the other box")
      const filtered = await until("the email listed", async () => {
        const list = await withKey(suite.url, box.user).GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
        return list.data!.data.find((email) => email.subject === "Filtered")
      })
      await label(box.user.apiKey, filtered.email_id, "seen-by-test")

      const changed = await labelsOnly.next()
      expect(changed.event).toBe("email.labels_changed")
      expect(JSON.parse(changed.data!).data).toMatchObject({ email_id: filtered.email_id, added: ["seen-by-test"] })

      const forOther = await otherBox.next()
      expect(forOther.event).toBe("email.received")
      expect(JSON.parse(forOther.data!).data).toMatchObject({ mailbox_id: other.mailboxId, subject: "For the other box" })

      // Nothing else reaches either: the received mail of `box`, the other kinds.
      expect(await labelsOnly.drain(1000)).toEqual([])
      const rest = await otherBox.drain(0)
      expect(rest.every((frame) => JSON.parse(frame.data!).data.mailbox_id === other.mailboxId)).toBe(true)
    } finally {
      labelsOnly.close()
      otherBox.close()
    }
  })

  it("filters by label: events about an email carrying one (a filter's, or one added later), none that carry none", async () => {
    const filter = await withKey(suite.url, box.user).POST("/v1/api/filters", {
      body: { mailbox_id: box.mailboxId, conditions: { subject_contains: ["receipt"] }, actions: { add_labels: ["receipts"] } }
    })
    expect(filter.response.status).toBe(201)
    const receipts = await stream(box.user.apiKey, "?types=email.received,email.labels_changed&labels=receipts,urgent")
    try {
      await deliver(box.address, "Lunch plans")
      await deliver(box.address, "Your receipt")
      const first = await receipts.next()
      expect(first.event).toBe("email.received")
      expect(JSON.parse(first.data!).data).toMatchObject({ subject: "Your receipt", labels: expect.arrayContaining(["receipts"]) })
      const lunch = await until("lunch listed", async () => {
        const list = await withKey(suite.url, box.user).GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
        return list.data!.data.find((email) => email.subject === "Lunch plans")
      })
      await label(box.user.apiKey, lunch.email_id, "urgent")
      const second = await receipts.next()
      expect(second.event).toBe("email.labels_changed")
      expect(JSON.parse(second.data!).data).toMatchObject({ subject: "Lunch plans", added: ["urgent"] })
      // Lunch's own arrival carried neither label.
      expect(await receipts.drain(1000)).toEqual([])
    } finally {
      receipts.close()
      await withKey(suite.url, box.user).DELETE("/v1/api/filters/{filterId}", { params: { path: { filterId: filter.data!.data.filter_id } } })
    }
  })

  it("resumes with Last-Event-ID (or after=) with exactly the events missed, in order", async () => {
    const first = await stream(box.user.apiKey, `?types=email.received&mailbox_id=${box.mailboxId}`)
    await deliver(box.address, "Before the break")
    const seen = await first.next()
    first.close()

    for (const subject of ["Missed 1", "Missed 2", "Missed 3"]) await deliver(box.address, subject)
    const subjects = (frames: ReadonlyArray<{ data?: string }>) => frames.map((frame) => JSON.parse(frame.data!).data.subject)

    const resumed = await stream(box.user.apiKey, `?types=email.received&mailbox_id=${box.mailboxId}`, { "last-event-id": seen.id! })
    const viaQuery = await stream(box.user.apiKey, `?types=email.received&mailbox_id=${box.mailboxId}&after=${seen.id}`)
    try {
      const got = [await resumed.next(), await resumed.next(), await resumed.next()]
      expect(subjects(got)).toEqual(["Missed 1", "Missed 2", "Missed 3"])
      expect(new Set(got.map((frame) => frame.id)).size).toBe(3)
      const again = [await viaQuery.next(), await viaQuery.next(), await viaQuery.next()]
      expect(again.map((frame) => frame.id)).toEqual(got.map((frame) => frame.id))
      // No repeats, and the stream goes on live.
      expect(await resumed.drain(500)).toEqual([])
      await deliver(box.address, "Live again")
      expect(subjects([await resumed.next()])).toEqual(["Live again"])
    } finally {
      resumed.close()
      viaQuery.close()
    }
  })

  it("ends a stream whose key is revoked before another event reaches it; the key is refused from then on", async () => {
    const user = await withApiKey(suite.url)
    const mine = await newBox(suite.url, { user })
    const events = await stream(user.apiKey, "?types=email.received")
    try {
      await deliver(mine.address, "Before the revocation")
      expect(JSON.parse((await events.next()).data!).data.subject).toBe("Before the revocation")
      const revoked = await withToken(suite.url, user).DELETE("/v1/api-keys/{id}", { params: { path: { id: user.keyId } } })
      expect(revoked.response.status).toBe(200)
      await deliver(mine.address, "After the revocation")
      await expect(events.next(12_000)).rejects.toThrow("the stream ended")
      expect(events.seen().some((frame) => frame.data?.includes("After the revocation"))).toBe(false)
      const again = await stream(user.apiKey)
      expect(again.status).toBe(401)
      expect(again.body).toMatchObject({ error: { code: "UNAUTHORIZED" } })
    } finally {
      events.close()
    }
  })

  it("ends a stream of a key narrowed since it opened before the mailbox taken from it is heard of again", async () => {
    const user = await withApiKey(suite.url)
    const kept = await newBox(suite.url, { user })
    const taken = await newBox(suite.url, { user })
    const created = await withToken(suite.url, user).POST("/v1/api-keys", { body: { name: "two desks", mailboxIds: [kept.mailboxId, taken.mailboxId] } })
    const key = created.data!.data
    const events = await stream(key.apiKey, "?types=email.received")
    try {
      await deliver(taken.address, "Before the narrowing")
      expect(JSON.parse((await events.next()).data!).data.subject).toBe("Before the narrowing")
      const narrowed = await withToken(suite.url, user).PATCH("/v1/api-keys/{id}", {
        params: { path: { id: key.keyId } },
        body: { mailboxIds: [kept.mailboxId] }
      })
      expect(narrowed.response.status).toBe(200)
      await deliver(taken.address, "After the narrowing")
      await expect(events.next(12_000)).rejects.toThrow("the stream ended")
      expect(events.seen().some((frame) => frame.data?.includes("After the narrowing"))).toBe(false)
      // Connected again, the key's new reach is the stream's.
      const again = await stream(key.apiKey, `?mailbox_id=${taken.mailboxId}`)
      expect([again.status, again.body]).toEqual([404, expect.objectContaining({ error: expect.objectContaining({ code: "NOT_FOUND" }) })])
    } finally {
      events.close()
    }
  })

  it("ends a stream filtered to a mailbox once the mailbox is deleted, after the events logged before; a reconnection is 404", async () => {
    const user = await withApiKey(suite.url)
    const doomed = await newBox(suite.url, { user })
    // email.received alone: the email's email.processed, logged whenever indexing ends, may come either
    // side of the deletion, and would be heard before the end when it comes first (CI saw it once).
    const events = await stream(user.apiKey, `?mailbox_id=${doomed.mailboxId}&types=email.received`)
    const everyMailbox = await stream(user.apiKey)
    try {
      expect(events.status).toBe(200)
      await deliver(doomed.address, "Last words")
      expect(JSON.parse((await events.next()).data!).data.subject).toBe("Last words")
      const deleted = await withKey(suite.url, user).DELETE("/v1/api/mailboxes/{mailboxId}", {
        params: { path: { mailboxId: doomed.mailboxId } },
        body: { confirm_email_address: doomed.address }
      })
      expect(deleted.response.status).toBe(200)
      await expect(events.next(12_000)).rejects.toThrow("the stream ended")
      // The client's reconnection, with its last id, meets the 404 and stops.
      const lastId = events.seen().filter((frame) => frame.id !== undefined).at(-1)!.id!
      const again = await stream(user.apiKey, `?mailbox_id=${doomed.mailboxId}`, { "last-event-id": lastId })
      expect(again.status).toBe(404)
      expect(again.body).toMatchObject({ success: false, error: { code: "NOT_FOUND", details: { mailbox_id: doomed.mailboxId } } })
      // A stream of the whole account goes on.
      const kept = await newBox(suite.url, { user })
      await deliver(kept.address, "Still listening")
      // Past what it heard before (the doomed mailbox's mail, the key's api_key.created, logged behind the
      // answer that made the key and heard when it is logged after the stream opened).
      let heard = JSON.parse((await everyMailbox.next()).data!).data
      while (heard.mailbox_id !== kept.mailboxId) heard = JSON.parse((await everyMailbox.next()).data!).data
      expect(heard).toMatchObject({ mailbox_id: kept.mailboxId, subject: "Still listening" })
    } finally {
      events.close()
      everyMailbox.close()
    }
  })

  it("ends a stream of a key limited to mailboxes once every one of them is deleted, not before; a reconnection is 404", async () => {
    const user = await withApiKey(suite.url)
    const [first, last] = [await newBox(suite.url, { user }), await newBox(suite.url, { user })]
    const created = await withToken(suite.url, user).POST("/v1/api-keys", { body: { name: "two desks", mailboxIds: [first.mailboxId, last.mailboxId] } })
    const key = created.data!.data
    const remove = async (box: Box) => {
      const deleted = await withKey(suite.url, user).DELETE("/v1/api/mailboxes/{mailboxId}", {
        params: { path: { mailboxId: box.mailboxId } },
        body: { confirm_email_address: box.address }
      })
      expect(deleted.response.status).toBe(200)
    }
    const events = await stream(key.apiKey, "?types=email.received")
    try {
      expect(events.status).toBe(200)
      await remove(first)
      // One of its mailboxes left: the stream goes on and hears it.
      await deliver(last.address, "Still one desk")
      expect(JSON.parse((await events.next()).data!).data.subject).toBe("Still one desk")
      await remove(last)
      await expect(events.next(12_000)).rejects.toThrow("the stream ended")
      // The client's reconnection meets the 404 and stops, rather than listen to nothing forever.
      const again = await stream(key.apiKey)
      expect(again.status).toBe(404)
      expect(again.body).toMatchObject({
        success: false,
        error: { code: "NOT_FOUND", details: { mailboxIds: expect.arrayContaining([first.mailboxId, last.mailboxId]) } }
      })
      // The account's own key still listens.
      expect((await stream(user.apiKey)).status).toBe(200)
    } finally {
      events.close()
    }
  })

  it("ends the dashboard's stream of a session logged out before another event reaches it", async () => {
    const user = await withApiKey(suite.url)
    const mine = await newBox(suite.url, { user })
    const events = await openEvents(`${suite.url}/api/events?types=email.received`, { authorization: `Bearer ${user.accessToken}` })
    try {
      expect(events.status).toBe(200)
      const out = await withToken(suite.url, user).POST("/api/auth/logout")
      expect(out.response.status).toBe(200)
      await deliver(mine.address, "After the logout")
      await expect(events.next(12_000)).rejects.toThrow("the stream ended")
      expect(events.seen().some((frame) => frame.data?.includes("After the logout"))).toBe(false)
    } finally {
      events.close()
    }
  })

  it("refuses a bad filter, an unknown resume point, another account's mailbox and a missing key", async () => {
    const badKind = await stream(box.user.apiKey, "?types=email.received,email.exploded")
    expect(badKind.status).toBe(400)
    expect(badKind.body).toMatchObject({ success: false, error: { code: "VALIDATION_ERROR" } })
    expect(JSON.stringify((badKind.body as { error: { details: unknown } }).error.details)).toContain("email.exploded")

    const badLabel = await stream(box.user.apiKey, `?labels=billing,${"x".repeat(65)}`)
    expect(badLabel.status).toBe(400)
    expect(badLabel.body).toMatchObject({ error: { code: "VALIDATION_ERROR", details: { "labels.1": "must be at most 64 characters" } } })

    // A filter that leaves nothing to hear is refused as the same webhook is (details name the kinds' field, `types`).
    const unlabelled = await stream(box.user.apiKey, "?types=email.sent,email.bounced&labels=billing")
    expect(unlabelled.status).toBe(400)
    expect(unlabelled.body).toMatchObject({
      success: false,
      error: {
        code: "VALIDATION_ERROR",
        details: { types: "would never be sent any of these events: email.sent carries no labels; email.bounced carries no labels, and the stream is narrowed to labels" }
      }
    })
    const aboutNoMailbox = await stream(box.user.apiKey, `?types=api_key.created&mailbox_id=${box.mailboxId}`)
    expect(aboutNoMailbox.status).toBe(400)
    expect(aboutNoMailbox.body).toMatchObject({
      error: { code: "VALIDATION_ERROR", details: { types: "would never be sent any of these events: api_key.created is about no mailbox, and the stream is narrowed to mailbox_id" } }
    })
    // One kind that can match is enough: the others are left out, as for a webhook.
    const someLabelled = await stream(box.user.apiKey, "?types=email.sent,email.received&labels=billing")
    expect(someLabelled.status).toBe(200)
    someLabelled.close()

    const unknown = await stream(box.user.apiKey, "", { "last-event-id": "evt_not_a_real_one" })
    expect(unknown.status).toBe(400)
    expect(unknown.body).toMatchObject({ error: { code: "VALIDATION_ERROR", details: { "last-event-id": expect.stringContaining("7 days") } } })
    const unknownAfter = await stream(box.user.apiKey, "?after=evt_nope")
    expect(unknownAfter.body).toMatchObject({ error: { code: "VALIDATION_ERROR", details: { after: expect.any(String) } } })

    const emptyMailbox = await stream(box.user.apiKey, "?mailbox_id=")
    expect(emptyMailbox.status).toBe(400)
    expect(emptyMailbox.body).toMatchObject({ error: { code: "VALIDATION_ERROR", details: { mailbox_id: "must be a mailbox id; leave it out for every mailbox" } } })

    const stranger = await withApiKey(suite.url)
    const foreign = await stream(stranger.apiKey, `?mailbox_id=${box.mailboxId}`)
    expect(foreign.status).toBe(404)
    expect(foreign.body).toMatchObject({ error: { code: "NOT_FOUND", details: { mailbox_id: box.mailboxId } } })

    const anonymous = await openEvents(`${suite.url}/v1/events`, {})
    expect(anonymous.status).toBe(401)
    expect(anonymous.body).toMatchObject({ error: { code: "UNAUTHORIZED" } })
  })

  it("holds an account to its plan's open streams (free: 2); closing one frees its slot", async () => {
    const free = await withApiKey(suite.url)
    const one = await stream(free.apiKey)
    const two = await stream(free.apiKey)
    expect([one.status, two.status]).toEqual([200, 200])
    const three = await stream(free.apiKey)
    expect(three.status).toBe(403)
    expect(three.body).toMatchObject({ success: false, error: { code: "STREAM_QUOTA", details: { count: 2, limit: 2, plan: "free" } } })
    one.close()
    let reopened = await stream(free.apiKey)
    // The server learns of the close from the connection: a moment later, the slot is free.
    for (let i = 0; i < 10 && reopened.status !== 200; i++) {
      await sleep(300)
      reopened = await stream(free.apiKey)
    }
    expect(reopened.status).toBe(200)
    two.close()
    reopened.close()
  })
})

describe("GET /v1/ws", () => {
  let box: Box
  let other: Box

  beforeAll(async () => {
    const user = await withApiKey(suite.url)
    await upgrade(suite.url, user.apiKey, "pro")
    box = await newBox(suite.url, { user })
    other = await newBox(suite.url, { user })
  })

  const socket = (apiKey: string) => openSocket(`${suite.url}/v1/ws`, { "x-api-key": apiKey })
  const subjectOf = (message: Record<string, any>) => message.data.data.subject

  it("delivers the events the SSE stream delivers; a new subscribe changes filters without losing or repeating any", async () => {
    const ws = await socket(box.user.apiKey)
    try {
      expect(ws.status).toBe(101)
      ws.send({ type: "subscribe", types: ["email.received"], mailbox_id: box.mailboxId })
      expect(await ws.next()).toEqual({ type: "subscribed", types: ["email.received"], mailbox_id: box.mailboxId, labels: null })
      await deliver(box.address, "Over the socket")
      const event = await ws.next()
      expect(event).toMatchObject({ type: "event", event: "email.received", data: { event: "email.received" } })
      expect(Object.keys(event.data).sort()).toEqual(["data", "event", "timestamp"])
      expect(event.data.data).toMatchObject({ mailbox_id: box.mailboxId, subject: "Over the socket" })

      // Widened to the other mailbox too: continues right after the last event delivered.
      await deliver(box.address, "Between subscriptions")
      ws.send({ type: "subscribe", types: ["email.received"] })
      const next = [await ws.next(), await ws.next()]
      expect(next[0]).toMatchObject({ type: "subscribed", types: ["email.received"], mailbox_id: null })
      expect(subjectOf(next[1]!)).toBe("Between subscriptions")
      await deliver(other.address, "To the other box")
      expect(subjectOf(await ws.next())).toBe("To the other box")
      expect(await ws.drain(300)).toEqual([])

      ws.send({ type: "ping" })
      expect(await ws.next()).toEqual({ type: "pong" })
    } finally {
      ws.close()
    }
  })

  it("resumes after a reconnection with `after`: exactly the events missed, in order", async () => {
    const first = await socket(box.user.apiKey)
    first.send({ type: "subscribe", types: ["email.received"], mailbox_id: box.mailboxId })
    await first.next()
    await deliver(box.address, "Seen before leaving")
    const seen = await first.next()
    first.close()
    for (const subject of ["Gone 1", "Gone 2"]) await deliver(box.address, subject)

    const again = await socket(box.user.apiKey)
    try {
      again.send({ type: "subscribe", types: ["email.received"], mailbox_id: box.mailboxId, after: seen.id })
      expect((await again.next()).type).toBe("subscribed")
      expect([subjectOf(await again.next()), subjectOf(await again.next())]).toEqual(["Gone 1", "Gone 2"])
      expect(await again.drain(300)).toEqual([])
    } finally {
      again.close()
    }
  })

  it("tells a socket whose key is revoked UNAUTHORIZED and closes it (1008) before another event reaches it", async () => {
    const user = await withApiKey(suite.url)
    const mine = await newBox(suite.url, { user })
    const ws = await socket(user.apiKey)
    try {
      ws.send({ type: "subscribe", types: ["email.received"] })
      expect(await ws.next()).toMatchObject({ type: "subscribed" })
      const revoked = await withToken(suite.url, user).DELETE("/v1/api-keys/{id}", { params: { path: { id: user.keyId } } })
      expect(revoked.response.status).toBe(200)
      await deliver(mine.address, "After the revocation")
      expect(await ws.next(12_000)).toEqual({ type: "error", error: { code: "UNAUTHORIZED", message: "Invalid, expired or revoked API key" } })
      expect(await ws.closed()).toBe(1008)
    } finally {
      ws.close()
    }
  })

  it("tells a socket whose subscription's mailbox is deleted NOT_FOUND and leaves it open without a subscription", async () => {
    const user = await withApiKey(suite.url)
    const doomed = await newBox(suite.url, { user })
    const ws = await socket(user.apiKey)
    try {
      ws.send({ type: "subscribe", types: ["email.received"], mailbox_id: doomed.mailboxId })
      expect(await ws.next()).toMatchObject({ type: "subscribed", mailbox_id: doomed.mailboxId })
      await deliver(doomed.address, "Before the deletion")
      expect(subjectOf(await ws.next())).toBe("Before the deletion")
      const deleted = await withKey(suite.url, user).DELETE("/v1/api/mailboxes/{mailboxId}", {
        params: { path: { mailboxId: doomed.mailboxId } },
        body: { confirm_email_address: doomed.address }
      })
      expect(deleted.response.status).toBe(200)
      expect(await ws.next(12_000)).toEqual({
        type: "error",
        error: { code: "NOT_FOUND", message: "Mailbox not found", details: { mailbox_id: doomed.mailboxId } }
      })
      // Still open: a ping is answered, and subscribing again to that mailbox is refused as at first.
      ws.send({ type: "ping" })
      expect(await ws.next()).toEqual({ type: "pong" })
      ws.send({ type: "subscribe", mailbox_id: doomed.mailboxId })
      expect(await ws.next()).toMatchObject({ type: "error", error: { code: "NOT_FOUND", details: { mailbox_id: doomed.mailboxId } } })
    } finally {
      ws.close()
    }
  })

  it("tells a socket whose key's every mailbox is deleted NOT_FOUND and closes it (1008), as for a revoked key", async () => {
    const user = await withApiKey(suite.url)
    const only = await newBox(suite.url, { user })
    const created = await withToken(suite.url, user).POST("/v1/api-keys", { body: { name: "one desk", mailboxIds: [only.mailboxId] } })
    const ws = await socket(created.data!.data.apiKey)
    try {
      ws.send({ type: "subscribe", types: ["email.received"] })
      expect(await ws.next()).toMatchObject({ type: "subscribed" })
      const deleted = await withKey(suite.url, user).DELETE("/v1/api/mailboxes/{mailboxId}", {
        params: { path: { mailboxId: only.mailboxId } },
        body: { confirm_email_address: only.address }
      })
      expect(deleted.response.status).toBe(200)
      expect(await ws.next(12_000)).toMatchObject({ type: "error", error: { code: "NOT_FOUND", details: { mailboxIds: [only.mailboxId] } } })
      expect(await ws.closed()).toBe(1008)
    } finally {
      ws.close()
    }
  })

  it("closes a socket that does not subscribe within 10 s (1008); a revoked key's ping is refused, and the socket closed", async () => {
    const user = await withApiKey(suite.url)
    const [idle, pinging] = await Promise.all([socket(user.apiKey), socket(user.apiKey)])
    try {
      const opened = Date.now()
      const revoked = await withToken(suite.url, user).DELETE("/v1/api-keys/{id}", { params: { path: { id: user.keyId } } })
      expect(revoked.response.status).toBe(200)
      pinging.send({ type: "ping" })
      expect(await pinging.next()).toEqual({ type: "error", error: { code: "UNAUTHORIZED", message: "Invalid, expired or revoked API key" } })
      expect(await pinging.closed()).toBe(1008)
      expect(await idle.closed(20_000)).toBe(1008)
      expect(Date.now() - opened).toBeGreaterThanOrEqual(9_000)
    } finally {
      idle.close()
      pinging.close()
    }
  })

  it("a refused subscribe, malformed or refused by the stream, leaves the socket open without a subscription", async () => {
    const ws = await socket(box.user.apiKey)
    // Hears what the socket would have: once the stream has an event, the socket has had its chance.
    const witness = await stream(box.user.apiKey, `?types=email.received&mailbox_id=${box.mailboxId}`)
    try {
      const refusals: Array<[Record<string, unknown>, Record<string, unknown>]> = [
        // An empty list would hear nothing; a misspelt field would hear every mailbox.
        [{ types: [] }, { types: "must list at least one event kind (left out: every kind)" }],
        [{ mailboxId: box.mailboxId }, { mailboxId: expect.stringMatching(/^is not a field here; the fields are .*mailbox_id/) }],
        [{ after: "evt_not_a_real_one" }, { after: expect.stringContaining("7 days") }]
      ]
      for (const [fields, details] of refusals) {
        ws.send({ type: "subscribe", types: ["email.received"], mailbox_id: box.mailboxId })
        expect(await ws.next()).toMatchObject({ type: "subscribed" })
        ws.send({ type: "subscribe", types: ["email.received"], ...fields })
        expect(await ws.next()).toEqual({ type: "error", error: { code: "VALIDATION_ERROR", message: expect.any(String), details } })
        await deliver(box.address, `Unheard after ${JSON.stringify(fields)}`)
        expect(JSON.parse((await witness.next(30_000)).data!).data.subject).toBe(`Unheard after ${JSON.stringify(fields)}`)
        expect(await ws.drain(300)).toEqual([])
      }
      ws.send({ type: "ping" })
      expect(await ws.next()).toEqual({ type: "pong" })
    } finally {
      ws.close()
      witness.close()
    }
  })

  it("answers a bad message with SPEC's envelope and stays open; a plain GET is 400 and a missing key 401", async () => {
    const stranger = await withApiKey(suite.url)
    const ws = await socket(box.user.apiKey)
    try {
      ws.sendRaw("{not json")
      expect(await ws.next()).toMatchObject({ type: "error", error: { code: "VALIDATION_ERROR", details: { message: expect.any(String) } } })
      ws.send({ type: "subscribe", types: ["email.received", "email.exploded"] })
      const badKind = await ws.next()
      expect(badKind).toMatchObject({ type: "error", error: { code: "VALIDATION_ERROR" } })
      expect(JSON.stringify(badKind.error.details)).toContain("email.exploded")
      ws.send({ type: "subscribe", labels: ["billing", "a,b"] })
      expect(await ws.next()).toMatchObject({ type: "error", error: { code: "VALIDATION_ERROR", details: { "labels.1": "must not contain a comma" } } })
      ws.send({ type: "dance" })
      expect(await ws.next()).toMatchObject({ type: "error", error: { code: "VALIDATION_ERROR", details: { type: "must be one of subscribe, ping" } } })
      ws.sendRaw(Buffer.from([1, 2, 3]))
      expect(await ws.next()).toMatchObject({ type: "error", error: { code: "VALIDATION_ERROR", details: { message: "must be a text frame" } } })
      ws.send({ type: "subscribe", types: ["email.sent"], labels: ["billing"] })
      expect(await ws.next()).toEqual({
        type: "error",
        error: {
          code: "VALIDATION_ERROR",
          message: "This stream would never be sent any of these events: email.sent carries no labels, and the stream is narrowed to labels",
          details: { types: "would never be sent any of these events: email.sent carries no labels, and the stream is narrowed to labels" }
        }
      })
      ws.send({ type: "subscribe", after: "evt_not_a_real_one" })
      expect(await ws.next()).toMatchObject({ type: "error", error: { code: "VALIDATION_ERROR", details: { after: expect.stringContaining("7 days") } } })
      const foreign = await openSocket(`${suite.url}/v1/ws`, { "x-api-key": stranger.apiKey })
      foreign.send({ type: "subscribe", mailbox_id: box.mailboxId })
      expect(await foreign.next()).toMatchObject({ type: "error", error: { code: "NOT_FOUND", details: { mailbox_id: box.mailboxId } } })
      foreign.close()
      ws.send({ type: "ping" })
      expect(await ws.next()).toEqual({ type: "pong" })
    } finally {
      ws.close()
    }

    const plain = await fetch(`${suite.url}/v1/ws`, { headers: { "x-api-key": box.user.apiKey } })
    expect(plain.status).toBe(400)
    expect(await plain.json()).toMatchObject({ success: false, error: { code: "VALIDATION_ERROR", details: { upgrade: "must be websocket" } } })
    // `Upgrade: websocket` without `Connection: Upgrade` is a plain request too (fetch sends no Upgrade: node:http does).
    const halfHandshake = await new Promise<{ status: number | undefined; body: string }>((resolve, reject) => {
      const request = http.get(`${suite.url}/v1/ws`, { headers: { "x-api-key": box.user.apiKey, upgrade: "websocket" } }, (response) => {
        let body = ""
        response.on("data", (chunk) => (body += chunk))
        response.once("end", () => resolve({ status: response.statusCode, body }))
      })
      request.once("error", reject)
    })
    expect(halfHandshake.status).toBe(400)
    expect(JSON.parse(halfHandshake.body)).toMatchObject({ success: false, error: { code: "VALIDATION_ERROR", details: { upgrade: "must be websocket" } } })

    const anonymous = await openSocket(`${suite.url}/v1/ws`, {})
    expect(anonymous.status).toBe(401)
    expect(anonymous.body).toMatchObject({ success: false, error: { code: "UNAUTHORIZED" } })
  })

  it("counts against the plan's open streams with SSE: over the limit it answers STREAM_QUOTA and closes (1008)", async () => {
    const free = await withApiKey(suite.url)
    const one = await stream(free.apiKey)
    const two = await stream(free.apiKey)
    const ws = await socket(free.apiKey)
    try {
      ws.send({ type: "subscribe" })
      expect(await ws.next()).toMatchObject({
        type: "error",
        error: { code: "STREAM_QUOTA", details: { count: 2, limit: 2, plan: "free" } }
      })
      expect(await ws.closed()).toBe(1008)
    } finally {
      one.close()
      two.close()
      ws.close()
    }
  })
})
