/**
 * Events written by round one (ae6f099) and read by this version (services/events/completion.ts):
 * events outlive the code that wrote them (a worker upgraded while they wait on the bus), so each
 * consumer is handed them exactly as that commit wrote them, over the in-process bus. The index
 * stage indexes its email.received and announces it; the responder answers it; the calendar reader
 * reads it without complaint; webhooks and the
 * event log pass every kind on with the fields added since (from_name, a key's mailboxIds and
 * permission) read from the email or known of the time, as SPEC's payloads. A genuinely malformed
 * event is still dropped, with a line saying what is lost.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Context, Effect, Layer, Logger, Option, Schedule, Schema, TestServices } from "effect"
import * as DocumentReader from "../../layers/document-reader.ts"
import { Bus, encodeJson, subjects } from "../../services/bus/bus.ts"
import { EventRecorderLive } from "../../services/events/recorder.ts"
import { Lifecycle } from "../../services/lifecycle.ts"
import { InboundMessage } from "../../services/mail/schemas.ts"
import { AutoReplyResponderLive } from "../../services/outbound/auto-replies.ts"
import { OutboundJob } from "../../services/outbound/schemas.ts"
import { stageConsumers } from "../../services/pipeline/stages.ts"
import { IndexerLive } from "../../services/search/indexer.ts"
import { Vectors } from "../../services/search/vectors.ts"
import { Meetings } from "../../services/meetings/meetings.ts"
import { CalendarMailLive } from "../../services/schedule/calendar-mail.ts"
import { Schedule as CalendarSchedule } from "../../services/schedule/schedule.ts"
import { type PostRequest, WebhookTransport } from "../../services/webhooks/attempts.ts"
import { WebhooksLive } from "../../services/webhooks/delivery.ts"
import { type EventKind, EventPayloads } from "../../services/webhooks/schemas.ts"
import { WebhookSubscriptions } from "../../services/webhooks/subscriptions.ts"
import { WebhookSettings, WebhookTargets } from "../../services/webhooks/targets.ts"
import { Webhooks } from "../../services/webhooks/webhooks.ts"
import { testDatabase } from "../support/database.ts"
import { makeFakeDns } from "../support/fake-dns.ts"
import { inProcessOutbound } from "../support/outbound-services.ts"
import { hashedWordsEmbedder, testVectorIndex } from "../support/search-services.ts"

// ---------------------------------------------------------------------------------------------
// What ae6f099 published, made by that commit's own code (its records.ts toReceived and toFields,
// extract.ts, and the payloads of ingest.ts, search/indexer.ts, labels.ts, keys/api-keys.ts and
// outbound/ledger.ts) and copied here as JSON. None has from_name; the key has no mailboxIds or permission.

/** eml_old1 arrived; round one stopped before its index stage read this. */
const received = {
  "event": "email.received", "timestamp": "2026-11-28T09:00:03.000Z", "namespace": "usr_old",
  "data": {
    "email_id": "eml_old1", "direction": "inbound", "message_id": "<old1@example.com>", "subject": "Meeting on Friday",
    "from": "ann@example.com", "to": ["agent@agents.localhost"], "cc": [], "reply_to": [], "date": "2026-11-28T09:00:00.000Z",
    "mailbox_id": "mbx_old", "domain": "agents.localhost", "has_attachments": true, "thread_id": "thr_old1", "labels": ["inbound", "unread"],
    "authentication": {
      "spf": { "result": "pass", "domain": "example.com", "aligned": true },
      "dkim": [{ "result": "pass", "domain": "example.com", "selector": "s1", "aligned": true }],
      "dmarc": { "result": "pass", "domain": "example.com", "policy": "none" },
      "arc": { "result": "none", "domain": null }
    },
    "authentication_results":
      "mx.agents.localhost; spf=pass smtp.mailfrom=example.com; dkim=pass header.d=example.com header.s=s1; dmarc=pass header.from=example.com",
    "spam": null,
    "extracted": {
      "reply_text": "Hi,\n\nYour code is 482913. Confirm at https://example.com/confirm?t=1\n\nAnn",
      "codes": [{ "value": "482913", "context": "Your code is 482913 . Confirm at" }],
      "links": [{ "url": "https://example.com/confirm?t=1", "text": null, "kind": "confirmation" }]
    }
  }
}

/** eml_old2, indexed by round one: its email.processed waits for webhooks and the log. */
const processed = {
  "event": "email.processed", "timestamp": "2026-11-28T09:00:05.000Z", "namespace": "usr_old",
  "data": {
    "email_id": "eml_old2", "direction": "inbound", "message_id": "<old2@example.com>", "subject": "Invoice 1142",
    "from": "ann@example.com", "to": ["agent@agents.localhost"], "cc": [], "reply_to": [], "date": "2026-11-28T09:00:00.000Z",
    "mailbox_id": "mbx_old", "domain": "agents.localhost", "has_attachments": false, "thread_id": "thr_old2", "labels": ["inbound", "unread"],
    "authentication": {
      "spf": { "result": "pass", "domain": "example.com", "aligned": true },
      "dkim": [{ "result": "pass", "domain": "example.com", "selector": "s1", "aligned": true }],
      "dmarc": { "result": "pass", "domain": "example.com", "policy": "none" },
      "arc": { "result": "none", "domain": null }
    },
    "authentication_results":
      "mx.agents.localhost; spf=pass smtp.mailfrom=example.com; dkim=pass header.d=example.com header.s=s1; dmarc=pass header.from=example.com",
    "spam": null,
    "extracted": {
      "reply_text": "Hi,\n\nYour code is 482913. Confirm at https://example.com/confirm?t=1\n\nAnn",
      "codes": [{ "value": "482913", "context": "Your code is 482913 . Confirm at" }],
      "links": [{ "url": "https://example.com/confirm?t=1", "text": null, "kind": "confirmation" }]
    },
    "embedding_model": "Xenova/all-MiniLM-L6-v2",
    "processing_ms": 41
  }
}

const labelsChanged = {
  "event": "email.labels_changed", "timestamp": "2026-11-28T09:01:00.000Z", "namespace": "usr_old",
  "data": {
    "email_id": "eml_old2", "direction": "inbound", "message_id": "<old2@example.com>", "subject": "Invoice 1142",
    "from": "ann@example.com", "to": ["agent@agents.localhost"], "cc": [], "reply_to": [], "date": "2026-11-28T09:00:00.000Z",
    "mailbox_id": "mbx_old", "domain": "agents.localhost", "has_attachments": false, "thread_id": "thr_old2", "labels": ["inbound"],
    "authentication": {
      "spf": { "result": "pass", "domain": "example.com", "aligned": true },
      "dkim": [{ "result": "pass", "domain": "example.com", "selector": "s1", "aligned": true }],
      "dmarc": { "result": "pass", "domain": "example.com", "policy": "none" },
      "arc": { "result": "none", "domain": null }
    },
    "authentication_results":
      "mx.agents.localhost; spf=pass smtp.mailfrom=example.com; dkim=pass header.d=example.com header.s=s1; dmarc=pass header.from=example.com",
    "spam": null,
    "added": [],
    "removed": ["unread"]
  }
}

const keyCreated = {
  "event": "api_key.created", "timestamp": "2026-11-28T08:00:00.000Z", "namespace": "usr_old",
  "data": { "keyId": "key_old1", "name": "agent", "keyPrefix": "mr_live_abcd…wxyz", "createdAt": "2026-11-28T08:00:00.000Z", "expirationTs": null }
}

const sent = {
  "event": "email.sent", "timestamp": "2026-11-28T09:02:00.000Z", "namespace": "usr_old",
  "data": {
    "email_id": "eml_out1", "message_id": "<out1@agents.localhost>", "mailbox_id": "mbx_old", "thread_id": "thr_out1",
    "recipient": "bob@example.net", "status": "sent", "attempts": 1, "smtp_response": "250 2.0.0 OK", "next_attempt_at": null
  }
}

/** What round one's SMTP node put on `mail.inbound.<mailbox_id>` (mail/inbound.ts), checks left to ingest. */
const inbound = {
  "email_id": "eml_old3", "mailbox_id": "mbx_old", "user_id": "usr_old", "raw_sha256": "0".repeat(64), "size": 1,
  "mail_from": "ann@example.com", "rcpt_to": "agent@agents.localhost", "received_at": "2026-11-28T09:03:00.000Z",
  "connection": { "client_ip": "192.0.2.7", "helo": "mail.example.com" }
}

/** What round one's send put on `mail.outbound.<email_id>` (outbound/send.ts). */
const outboundJob = { "email_id": "eml_out1", "domain": "example.net" }

// ---------------------------------------------------------------------------------------------

const dns = makeFakeDns()
dns.records.addresses.set("hooks.example.com", [{ address: "93.184.216.34", family: 4 }])

/** Every webhook POST, answered 200. */
const posts: Array<PostRequest> = []
const network = Layer.succeed(WebhookTransport, { post: (request: PostRequest) => Effect.sync(() => (posts.push(request), { status: 200 })) })

/** Every line logged at error level, its message first. */
const errors: Array<string> = []
const errorLines = Logger.add(Logger.make(({ logLevel, message }) => {
  if (logLevel._tag === "Error") errors.push(String(Array.isArray(message) ? message[0] : message))
}))

/** The worker's consumers of these events, over one in-process bus. */
const workers = Layer.mergeAll(
  IndexerLive.pipe(
    Layer.provide(Vectors.Default),
    Layer.provide(Layer.mergeAll(hashedWordsEmbedder("words-upgrade"), testVectorIndex, DocumentReader.layer, Lifecycle.forever))
  ),
  AutoReplyResponderLive,
  CalendarMailLive.pipe(Layer.provide(Meetings.Default), Layer.provide(CalendarSchedule.Default)),
  WebhooksLive,
  EventRecorderLive
).pipe(
  Layer.provideMerge(Webhooks.Default),
  Layer.provideMerge(WebhookSubscriptions.Default),
  Layer.provide(WebhookTargets.Default),
  Layer.provide(Layer.mergeAll(network, dns.layer, Layer.succeed(WebhookSettings, { allowPrivate: false }))),
  Layer.provideMerge(inProcessOutbound)
)

const seed = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`INSERT INTO users (id, email, email_normalized, name, password_hash) VALUES ('usr_old', 'old@example.com', 'old@example.com', 'Old', 'x')`
  yield* sql`INSERT INTO subscriptions (user_id, plan, status, current_period_start, current_period_end)
             VALUES ('usr_old', 'pro', 'active', date_trunc('milliseconds', now()), date_trunc('milliseconds', now()) + interval '1 month')`
  yield* sql`INSERT INTO mailboxes (id, user_id, local_part, domain, address_normalized)
             VALUES ('mbx_old', 'usr_old', 'agent', 'agents.localhost', 'agent@agents.localhost')`
  yield* sql`INSERT INTO blobs (sha256, size, content) VALUES (${"0".repeat(64)}, 1, ${new Uint8Array([1])})`
  const email = (id: string, subject: string) =>
    sql`INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, from_name, to_addresses, sent_at,
                            received_at, mail_from, rcpt_to, headers, text_body, has_attachments, raw_sha256, size, labels)
        VALUES (${id}, 'mbx_old', 'usr_old', ${`<${id.slice(4)}@example.com>`}, ${`thr_${id.slice(4)}`}, ${subject}, 'ann@example.com',
                'Ann Smith', ${["agent@agents.localhost"]}, now() - interval '2 minutes', now() - interval '1 minute', 'ann@example.com',
                'agent@agents.localhost', ${JSON.stringify({ from: "Ann Smith <ann@example.com>", to: "agent@agents.localhost", subject })}::jsonb,
                'Hi, your code is 482913.', false, ${"0".repeat(64)}, 1, ${["inbound", "unread"]}::text[])`
  yield* email("eml_old1", "Meeting on Friday")
  yield* email("eml_old2", "Invoice 1142")
  yield* sql`INSERT INTO mailbox_auto_replies (mailbox_id, text_body, interval_days, created_at)
             VALUES ('mbx_old', 'Away until Monday.', 7, now() - interval '1 day')`
})

/** The POSTed bodies and logged payloads of `kind`, by the email or key they are about. */
const payloads = (bodies: ReadonlyArray<string>, kind: string) =>
  bodies.map((body) => JSON.parse(body)).filter((payload) => payload.event === kind)

layer(testDatabase, { timeout: "120 seconds" })("events written by round one (ae6f099)", (it) => {
  it("decode as this version's inbound message and outbound job", () => {
    expect(Schema.decodeUnknownSync(InboundMessage)(inbound)).toEqual(inbound)
    expect(Schema.decodeUnknownSync(OutboundJob)(outboundJob)).toEqual(outboundJob)
  })

  // On the live clock: the bus's consumers and the webhook attempts wait for real.
  it.effect("are indexed, answered, sent to webhooks and logged with SPEC's payloads; a malformed one is dropped with what is lost", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* seed
      const until = <E, R>(check: Effect.Effect<boolean, E, R>) =>
        Effect.repeat(check, { until: (done) => done, schedule: Schedule.spaced("50 millis") }).pipe(Effect.timeout("30 seconds"))

      yield* Effect.scoped(Effect.gen(function*() {
        const context = yield* Layer.build(workers)
        const bus = Context.get(context, Bus)
        yield* Context.get(context, Webhooks).create({ userId: "usr_old", plan: "pro" }, {
          url: "https://hooks.example.com/in",
          events: ["email.received", "email.processed", "email.labels_changed", "email.sent", "api_key.created"]
        })
        // What the index stage announces on the bus itself, for any consumer: whole, as this version tells it.
        const announced: Array<{ readonly data: { readonly email_id: string; readonly from_name?: unknown } }> = []
        yield* bus.listen(subjects.event("email.processed"), (message) => Effect.sync(() => announced.push(JSON.parse(new TextDecoder().decode(message.data)))))
        const publish = (event: { readonly event: string; readonly data: object }, id: string) =>
          bus.publish(subjects.event(event.event), encodeJson(event), { msgId: `${event.event}:${id}` })
        yield* publish(received, "eml_old1")
        yield* publish(processed, "eml_old2")
        yield* publish(labelsChanged, "lbl_old1")
        yield* publish(keyCreated, "key_old1")
        yield* publish(sent, "eml_out1:bob@example.net:1")

        // Every consumer through what it was given: the index stage first, as what it announces is the others' too.
        const settled = (...names: ReadonlyArray<string>) =>
          until(Effect.map(
            Effect.forEach(names, (name) => bus.lag({ name, stream: "events", filter: name === "webhooks" || name === "event-log" ? subjects.allEvents : subjects.event("email.received") })),
            (lags) => lags.every((lag) => Option.exists(lag, ({ inFlight, pending }) => inFlight === 0 && pending === 0))
          ))
        yield* settled(stageConsumers.index.name, "auto-replies", "meeting-answers")
        yield* settled("webhooks", "event-log")
        expect(errors).toEqual([])
        const logged = () => Effect.map(sql<{ payload: string }>`SELECT payload FROM event_log WHERE user_id = 'usr_old'`, (rows) => rows.map((row) => row.payload))
        // The responder answered eml_old1 (eml_old2 was never announced as received).
        expect(yield* sql`SELECT sender FROM auto_replies_sent WHERE mailbox_id = 'mbx_old'`).toEqual([{ sender: "ann@example.com" }])

        expect(announced.filter((told) => told.data.email_id === "eml_old1").map((told) => told.data.from_name)).toEqual(["Ann Smith"])
        const indexed = yield* sql<{ emailId: string; model: string }>`SELECT email_id, model FROM search_documents WHERE email_id LIKE 'eml_old%' ORDER BY email_id`
        expect(indexed).toEqual([{ emailId: "eml_old1", model: "words-upgrade" }])

        // Webhooks and the log: each payload is SPEC's for its kind, the fields round one did not write filled in.
        const posted = posts.map((post) => post.body)
        for (const bodies of [posted, yield* logged()]) {
          expect(bodies).toHaveLength(6)
          for (const body of bodies) {
            const payload = JSON.parse(body)
            const spec: Schema.Schema.AnyNoContext = EventPayloads[payload.event as EventKind]
            expect(() => Schema.decodeUnknownSync(spec, { onExcessProperty: "error" })(payload)).not.toThrow()
          }
          expect(payloads(bodies, "email.received")).toEqual([{ event: "email.received", timestamp: received.timestamp, data: expect.objectContaining({
            ...received.data,
            from_name: "Ann Smith"
          }) }])
          expect(payloads(bodies, "email.processed").map((payload) => [payload.data.email_id, payload.data.from_name, payload.data.embedding_model])).toEqual(
            expect.arrayContaining([["eml_old2", "Ann Smith", "Xenova/all-MiniLM-L6-v2"], ["eml_old1", "Ann Smith", "words-upgrade"]])
          )
          // What round one said stays as it said it (the labels then, not now).
          expect(payloads(bodies, "email.processed").find((payload) => payload.data.email_id === "eml_old2").data)
            .toEqual({ ...processed.data, from_name: "Ann Smith" })
          expect(payloads(bodies, "email.labels_changed")[0].data).toEqual({ ...labelsChanged.data, from_name: "Ann Smith" })
          // Before keys could be narrowed, every key was the whole account's with every permission.
          expect(payloads(bodies, "api_key.created")[0].data).toEqual({ ...keyCreated.data, mailboxIds: null, permission: "full_access" })
          expect(payloads(bodies, "email.sent")).toEqual([{ event: sent.event, timestamp: sent.timestamp, data: sent.data }])
        }

        // A genuinely malformed email.received (no email id) and bytes that are no event: dropped, each consumer saying what is lost.
        yield* publish({ event: "email.received", timestamp: received.timestamp, namespace: "usr_old", data: { subject: "no id" } } as never, "bad")
        yield* bus.publish(subjects.event("email.received"), new TextEncoder().encode("not json"), { msgId: "email.received:garbage" })
        yield* until(Effect.sync(() => errors.length >= 3 * 2 + 2))
      })).pipe(Effect.provide(errorLines))
      expect(errors).toEqual(expect.arrayContaining([
        expect.stringMatching(/^Dropping a malformed email\.received event/),
        expect.stringMatching(/^Not answering a malformed email\.received event: no automatic reply/),
        expect.stringMatching(/^Not reading a malformed event for calendars: a calendar its email carries is not entered/),
        expect.stringMatching(/^Dropping a malformed event: no webhook is sent/),
        expect.stringMatching(/^Not logging a malformed event/)
      ]))
    }).pipe(TestServices.provideLive))
})
