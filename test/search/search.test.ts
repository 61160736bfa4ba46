/**
 * Search as an agent meets it: mail sent over SMTP becomes searchable by meaning and by words,
 * through `POST /v1/search`; each email is announced once as `email.processed`; errors, pages,
 * tenants and deleted mailboxes behave as SPEC says; suggestions complete past queries, subjects
 * and senders.
 */
import nodemailer from "nodemailer"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { components } from "../../packages/client/src/fetch-client.ts"
import { upgrade } from "../support/billing.ts"
import { makePdf } from "../support/pdf.ts"
import { type Box, DOMAIN, newBox } from "../support/mailboxes.ts"
import { scrape } from "../support/metrics.ts"
import { type Receiver, startReceiver } from "../support/receiver.ts"
import { type Backend, createBackend, type Server, startServer } from "../support/server.ts"
import { anonymous, offContract, rawJsonBody, withKey } from "../support/typed-client.ts"
import { until } from "../support/wait.ts"

let backend: Backend
let server: Server
let receiver: Receiver
let box: Box

/** A small inbox whose subjects and bodies share no words with the paraphrases asked below. */
const corpus = [
  {
    key: "invoice",
    subject: "Invoice #4411 for October",
    text: "Please find attached the invoice for October services. Amount due: $1,240.00, payable by November 30 to our bank account."
  },
  {
    key: "offsite",
    subject: "Team offsite agenda",
    text: "Here is the plan for next week's offsite: workshops on Tuesday morning, a hike on Wednesday and dinner together."
  },
  {
    key: "password",
    subject: "Password reset request",
    text: "Click the link below to reset your password. The link expires in 24 hours. If you did not ask for this, ignore it."
  },
  {
    key: "flight",
    subject: "Flight confirmation LH 402",
    text: "Your flight from Frankfurt to New York is confirmed. Boarding starts at 10:45 at gate B12. Seat 23A."
  },
  {
    key: "newsletter",
    subject: "Quarterly product newsletter",
    text: "Product updates, new hires, and what is coming next quarter from the engineering team."
  }
] as const

const ids = new Map<string, string>()

const send = async (to: string, subject: string, text: string, from = "sender@example.com") => {
  const transport = nodemailer.createTransport({ host: "127.0.0.1", port: server.smtpPort, secure: false, ignoreTLS: true })
  const info = await transport.sendMail({ from, to, subject, text })
  transport.close()
  return info
}

const search = (apiKey: string, body: components["schemas"]["SearchInput"]) => withKey(server.url, { apiKey }).POST("/v1/search", { body })
const suggestions = (apiKey: string, q: string) => withKey(server.url, { apiKey }).GET("/v1/search/suggestions", { params: { query: { q } } })

/** Wait until `count` emails of the user have been announced as processed. */
const processed = (path: string, count: number) => receiver.waitFor(path, count, 60_000)

beforeAll(async () => {
  receiver = await startReceiver()
  backend = await createBackend()
  server = await startServer({ ...backend.env, WEBHOOK_ALLOW_PRIVATE: "true" })
  box = await newBox(server.url)
  await upgrade(server.url, box.user.apiKey, "enterprise")
  const hook = await withKey(server.url, box.user).POST("/v1/api/webhooks", {
    body: { url: `${receiver.url}/processed`, events: ["email.processed"] }
  })
  expect(hook.response.status).toBe(201)
  // The invoice's sender gives a name, the others their address alone.
  for (const mail of corpus) await send(box.address, mail.subject, mail.text, mail.key === "invoice" ? "Ann Smith <invoice@example.com>" : `${mail.key}@example.com`)
  const events = await processed("/processed", corpus.length)
  for (const event of events) {
    const { data } = JSON.parse(event.body)
    const mail = corpus.find((m) => m.subject === data.subject)!
    ids.set(mail.key, data.email_id)
  }
}, 120_000)

afterAll(async () => {
  await receiver?.close()
  await server?.stop()
  await backend?.dispose()
})

describe("POST /v1/search", () => {
  it("announces each email once as email.processed, with the email.received fields, the model and the time taken", async () => {
    // Give a second announcement time to arrive, if there were one.
    await new Promise((resolve) => setTimeout(resolve, 1_000))
    const events = receiver.received("/processed").map((r) => JSON.parse(r.body))
    expect(events).toHaveLength(corpus.length)
    expect(new Set(events.map((e) => e.data.email_id)).size).toBe(corpus.length)
    const event = events.find((e) => e.data.email_id === ids.get("flight"))!
    expect(event.event).toBe("email.processed")
    const email = await withKey(server.url, box.user).GET("/v1/api/emails/{emailId}", { params: { path: { emailId: ids.get("flight")! } } })
    const { received_at: _r, size: _s, snippet: _n, text: _t, html: _h, headers: _hd, attachments: _a, forwarded: _f, delivered_to: _d, ...fields } = email.data!.data
    expect(event.data).toEqual({ ...fields, embedding_model: "use-lite", processing_ms: expect.any(Number) })
    expect(event.data.processing_ms).toBeGreaterThanOrEqual(0)
  })

  it.each([
    ["billing statement", "invoice"],
    ["plane ticket booking", "flight"],
    ["forgot my login credentials", "password"],
    ["company retreat schedule", "offsite"]
  ])("a paraphrase (%s) finds the right email first", async (query, key) => {
    const reply = await search(box.user.apiKey, { query })
    expect(reply.response.status).toBe(200)
    expect(reply.data?.success).toBe(true)
    expect(reply.data?.data[0]?.email_id).toBe(ids.get(key))
  })

  it("answers SPEC's result fields, scores in 0-1 best first, and the page meta", async () => {
    const reply = await search(box.user.apiKey, { query: "invoice amount due" })
    expect(reply.response.status).toBe(200)
    const [first, ...rest] = reply.data!.data
    const invoice = corpus.find((m) => m.key === "invoice")!
    expect(first).toEqual({
      email_id: ids.get("invoice"),
      subject: invoice.subject,
      from: "invoice@example.com",
      // The From's name, as the email itself answers it (a Mailroom extension).
      from_name: "Ann Smith",
      // Its To addresses, as the email answers them (a Mailroom extension): for sent mail, whom it went to.
      to: [box.address],
      cc: [],
      date: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/),
      // The body as sent, without the white space around it: the first 200 characters of it.
      snippet: invoice.text,
      // Nothing vouches for example.com's mail from 127.0.0.1 (issue 20).
      labels: ["inbound", "unread", "unauthenticated"],
      // Where it is, to read its conversation or act on its mailbox without another request.
      mailbox_id: box.mailboxId,
      thread_id: expect.stringMatching(/^thr_/),
      direction: "inbound",
      score: expect.any(Number)
    })
    // Every word of the query in the mail, and the meaning close: highly relevant.
    expect(first!.score).toBeGreaterThanOrEqual(0.7)
    const scores = reply.data!.data.map((r) => r.score)
    for (const score of scores) expect(score).toBeGreaterThanOrEqual(0), expect(score).toBeLessThanOrEqual(1)
    expect([...scores].sort((a, b) => b - a)).toEqual(scores)
    expect(rest.every((r) => r.score < first!.score)).toBe(true)
    expect(reply.data?.meta).toEqual({ page: 1, limit: 20, total: corpus.length, hasMore: false })
  })

  it("cuts the snippet at 200 characters", async () => {
    const long = `Quarterly tax filing reminder. ${"The forms are attached and must be signed. ".repeat(10)}`
    await send(box.address, "Tax filing reminder", long)
    const found = await until("the tax email is searchable", async () => {
      const reply = await search(box.user.apiKey, { query: "tax filing reminder" })
      return reply.data?.data[0]?.subject === "Tax filing reminder" ? reply.data.data[0] : undefined
    }, 60_000, 500)
    expect(found.snippet).toBe(long.slice(0, 200))
  })

  it("pages through one ranking: limit, offset, page, hasMore", async () => {
    const all = await search(box.user.apiKey, { query: "email", limit: 100 })
    const total = all.data!.meta.total
    expect(total).toBeGreaterThanOrEqual(5)
    const ranking = all.data!.data.map((r) => r.email_id)
    const first = await search(box.user.apiKey, { query: "email", limit: 2 })
    // With more pages to read, the answer names its ranking (a Mailroom extension: see below).
    expect(first.data?.meta).toEqual({ page: 1, limit: 2, total, hasMore: true, ranking: expect.stringMatching(/^rnk_/) })
    const second = await search(box.user.apiKey, { query: "email", limit: 2, offset: 2 })
    expect(second.data?.meta).toEqual({ page: 2, limit: 2, total, hasMore: true, ranking: expect.stringMatching(/^rnk_/) })
    expect([...first.data!.data, ...second.data!.data].map((r) => r.email_id)).toEqual(ranking.slice(0, 4))
    const last = await search(box.user.apiKey, { query: "email", limit: 2, offset: total - 1 })
    expect(last.data?.data).toHaveLength(1)
    expect(last.data?.meta.hasMore).toBe(false)
    const beyond = await search(box.user.apiKey, { query: "email", limit: 2, offset: total + 10 })
    expect(beyond.data?.data).toEqual([])
    expect(beyond.data?.meta).toEqual({ page: Math.floor((total + 10) / 2) + 1, limit: 2, total, hasMore: false })
  })

  it("pages through the ranking the first page named (meta.ranking); one expired or unknown is 400 RANKING_EXPIRED", async () => {
    // What is held and when (mail indexed between pages, deleted since, other accounts, expiry) is
    // test/search/held-ranking.test.ts's; here the route's wiring and its errors.
    const all = await search(box.user.apiKey, { query: "email", limit: 100 })
    const ranking = all.data!.data.map((r) => r.email_id)
    const first = await search(box.user.apiKey, { query: "email", limit: 2 })
    const token = first.data!.meta.ranking!
    const pages = [first.data!]
    for (let offset = 2; pages.at(-1)!.meta.hasMore; offset += 2) {
      const page = await search(box.user.apiKey, { query: "email", limit: 2, offset, ranking: token })
      expect(page.response.status).toBe(200)
      expect(page.data!.meta).toEqual({ page: offset / 2 + 1, limit: 2, total: ranking.length, hasMore: offset + 2 < ranking.length, ranking: token })
      pages.push(page.data!)
    }
    expect(pages.flatMap((page) => page.data.map((r) => r.email_id))).toEqual(ranking)

    const unknown = await search(box.user.apiKey, { query: "email", limit: 2, offset: 2, ranking: "rnk_000000000000000000000000" })
    expect(unknown.response.status).toBe(400)
    expect(unknown.error).toEqual({
      success: false,
      error: {
        code: "RANKING_EXPIRED",
        message: expect.stringMatching(/^ranking: expired or unknown/),
        details: { ranking: "expired or unknown: search again without it, from the first page, for a new ranking", held_for_seconds: 600 }
      }
    })
    const another = await search(box.user.apiKey, { query: "invoice", limit: 2, offset: 2, ranking: token })
    expect(another.response.status).toBe(400)
    expect(another.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { ranking: expect.stringMatching(/^was made for another search/) } })
    for (const [ranking, message] of [[42, "must be a string: a previous answer's meta.ranking"], ["", "must not be empty"]] as const) {
      const bad = await search(box.user.apiKey, offContract({ query: "email", ranking }))
      expect(bad.response.status).toBe(400)
      expect(bad.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { ranking: message } })
    }
  })

  it("searches text and PDF attachments, and answers what they say", async () => {
    const pdfBytes = makePdf(["Quarterly report", "The perovskite cells kept 91% of their output."])
    const transport = nodemailer.createTransport({ host: "127.0.0.1", port: server.smtpPort, secure: false, ignoreTLS: true })
    await transport.sendMail({
      from: "lab@example.com",
      to: box.address,
      subject: "Results attached",
      text: "See the attachments.",
      attachments: [
        { filename: "results.txt", content: "The zeolite catalyst doubled the yield of the hydrogenation." },
        { filename: "report.pdf", content: Buffer.from(pdfBytes) },
        { filename: "photo.png", contentType: "image/png", content: Buffer.from([0x89, 0x50, 0x4e, 0x47]) },
        // Read by the charsets their types name; a NUL (which PostgreSQL text cannot hold) costs the
        // email nothing: it is searchable like the others (the words above are found).
        { filename: "export.csv", contentType: "text/csv; charset=utf-16", content: Buffer.from("\ufeffQuarterly ocelot export", "utf16le") },
        { filename: "note.txt", contentType: "text/plain; charset=iso-8859-1", content: Buffer.from("Café crème à Zürich", "latin1") },
        { filename: "nul.txt", contentType: "text/plain", content: Buffer.from("before\u0000after", "utf8") }
      ]
    })
    transport.close()
    for (const query of ["zeolite catalyst", "perovskite cells", "ocelot"]) {
      const found = await until(`"${query}" is searchable`, async () => {
        const reply = await search(box.user.apiKey, { query, mode: "text" })
        return reply.data?.data.length ? reply.data.data : undefined
      }, 60_000, 500)
      expect(found.map((r) => r.subject)).toEqual(["Results attached"])
    }
    const keyed = withKey(server.url, box.user)
    const emailId = (await search(box.user.apiKey, { query: "perovskite", mode: "text" })).data!.data[0]!.email_id
    const email = await keyed.GET("/v1/api/emails/{emailId}", { params: { path: { emailId } } })
    const [txt, pdf, png, csv, note, nul] = email.data!.data.attachments
    const textOf = (attachmentId: string) =>
      keyed.GET("/v1/api/emails/{emailId}/attachments/{attachmentId}/text", { params: { path: { emailId, attachmentId } } })
    const report = await textOf(pdf!.attachment_id)
    expect(report.response.status).toBe(200)
    expect(report.data).toEqual({
      success: true,
      data: {
        attachment_id: pdf!.attachment_id,
        filename: "report.pdf",
        content_type: "application/pdf",
        size: pdfBytes.byteLength,
        format: "pdf",
        text: "Quarterly report\n\nThe perovskite cells kept 91% of their output.",
        characters: 64,
        pages: 2,
        truncated: false
      }
    })
    expect((await textOf(txt!.attachment_id)).data?.data).toMatchObject({ format: "text", pages: null, text: expect.stringContaining("zeolite") })
    expect(await Promise.all([csv, note, nul].map(async (a) => (await textOf(a!.attachment_id)).data?.data.text))).toEqual([
      "Quarterly ocelot export",
      "Café crème à Zürich",
      "beforeafter"
    ])
    // A download says the charset its bytes are in; a type without one says none.
    const downloaded = await Promise.all([note, png].map((a) =>
      keyed.GET("/v1/api/emails/{emailId}/attachments/{attachmentId}", {
        params: { path: { emailId, attachmentId: a!.attachment_id } },
        parseAs: "arrayBuffer"
      })
    ))
    expect(downloaded.map((d) => d.response.headers.get("content-type"))).toEqual(["text/plain; charset=iso-8859-1", "image/png"])
    expect(Buffer.from(downloaded[0]!.data!).toString("latin1")).toBe("Café crème à Zürich")
    const photo = await textOf(png!.attachment_id)
    expect(photo.response.status).toBe(422)
    expect(photo.error?.error).toEqual({
      code: "ATTACHMENT_UNREADABLE",
      message: "Attachments of type image/png have no text to read (text, HTML, PDF and Word documents do)",
      details: { email_id: emailId, attachment_id: png!.attachment_id, content_type: "image/png", reason: "unsupported_type" }
    })
    // Read once, by the indexer, and kept: the route's answer cost no second reading.
    const metrics = await scrape(`${server.url}/metrics`)
    expect(metrics.value("mailroom_document_reads_total", { format: "pdf", outcome: "read" })).toBe(1)
    expect(metrics.count("mailroom_document_read_duration_seconds", { format: "pdf" })).toBe(1)
    const missing = await textOf("att_missing")
    expect(missing.response.status).toBe(404)
    expect(missing.error?.error).toEqual({
      code: "NOT_FOUND",
      message: "Attachment not found",
      details: { email_id: emailId, attachment_id: "att_missing" }
    })
  })

  it("finds by exact words too: a sender's flight number", async () => {
    const reply = await search(box.user.apiKey, { query: "LH 402", mode: "text" })
    expect(reply.response.status).toBe(200)
    expect(reply.data?.data.map((r) => r.email_id)).toEqual([ids.get("flight")])
  })

  it.each([
    [{}, { query: "is required" }],
    [{ query: "" }, { query: "must not be empty" }],
    [{ query: "   " }, { query: "must not be empty" }],
    [{ query: 42 }, { query: "must be a non-empty string" }],
    [{ query: "x".repeat(1001) }, { query: "must be at most 1000 characters" }],
    // Characters, not UTF-16 units: 1,000 emoji pass (below), 1,001 do not.
    [{ query: "😀".repeat(1001) }, { query: "must be at most 1000 characters" }],
    [{ query: "invoice", limit: 0 }, { limit: expect.any(String) }],
    [{ query: "invoice", limit: 101 }, { limit: expect.any(String) }],
    [{ query: "invoice", limit: 2.5 }, { limit: expect.any(String) }],
    [{ query: "invoice", offset: -1 }, { offset: expect.any(String) }],
    [{ query: "invoice", offset: "ten" }, { offset: expect.any(String) }],
    [{ query: "invoice", domain: "" }, { domain: expect.any(String) }],
    [{ query: "invoice", domain: "not a domain!" }, { domain: expect.any(String) }],
    [{ query: "invoice", mode: "psychic" }, { mode: expect.any(String) }]
  ])("rejects %j with 400 VALIDATION_ERROR naming the field", async (body, details) => {
    const reply = await search(box.user.apiKey, offContract(body))
    expect(reply.response.status).toBe(400)
    expect(reply.error?.success).toBe(false)
    expect(reply.error?.error.code).toBe("VALIDATION_ERROR")
    expect(reply.error?.error.details).toEqual(details)
  })

  it("takes a query of 1,000 characters however many UTF-16 units they are", async () => {
    const reply = await search(box.user.apiKey, { query: "😀".repeat(1000) })
    expect(reply.response.status).toBe(200)
  })

  it("rejects a body that is not JSON with 400 and no credential with 401", async () => {
    const bad = await withKey(server.url, box.user).POST("/v1/search", rawJsonBody("{nope"))
    expect(bad.response.status).toBe(400)
    expect(bad.error?.success).toBe(false)
    const nobody = await anonymous(server.url).POST("/v1/search", { body: { query: "invoice" } })
    expect(nobody.response.status).toBe(401)
    expect(nobody.error?.error.code).toBe("UNAUTHORIZED")
  })

  it("restricts to a domain", async () => {
    const here = await search(box.user.apiKey, { query: "invoice", domain: DOMAIN.toUpperCase() })
    expect(here.data?.data[0]?.email_id).toBe(ids.get("invoice"))
    const elsewhere = await search(box.user.apiKey, { query: "invoice", domain: "example.org" })
    expect(elsewhere.response.status).toBe(200)
    expect(elsewhere.data?.data).toEqual([])
    expect(elsewhere.data?.meta).toEqual({ page: 1, limit: 20, total: 0, hasMore: false })
  })

  it("restricts to a mailbox (404 for one not the caller's); a field search does not have is 400, not a search of everything", async () => {
    const here = await search(box.user.apiKey, { query: "invoice", mailbox_id: box.mailboxId })
    expect(here.data?.data[0]?.email_id).toBe(ids.get("invoice"))
    const empty = await newBox(server.url, { user: box.user })
    const there = await search(box.user.apiKey, { query: "invoice", mailbox_id: empty.mailboxId })
    expect([there.response.status, there.data?.data, there.data?.meta.total]).toEqual([200, [], 0])
    const stranger = await newBox(server.url)
    const theirs = await search(box.user.apiKey, { query: "invoice", mailbox_id: stranger.mailboxId })
    expect([theirs.response.status, theirs.error?.error]).toEqual([404, expect.objectContaining({ code: "NOT_FOUND", details: { mailbox_id: stranger.mailboxId } })])
    const misspelt = await search(box.user.apiKey, { query: "invoice", mailbox: box.mailboxId } as never)
    expect([misspelt.response.status, misspelt.error?.error.code]).toEqual([400, "VALIDATION_ERROR"])
    expect(misspelt.error?.error.details).toEqual({ mailbox: expect.stringMatching(/^is not a field here; the fields are query, domain, limit, offset, mailbox_id/) })
  })

  it("keeps only emails carrying every label asked for, and counts only those", async () => {
    const flight = ids.get("flight")!
    const labelled = await withKey(server.url, box.user).PATCH("/v1/api/emails/{emailId}", {
      params: { path: { emailId: flight } },
      body: { add_labels: ["travel"] }
    })
    expect(labelled.response.status).toBe(200)
    for (const mode of ["hybrid", "text", "vector"] as const) {
      // (No query here starts with "fl": the suggestions below complete past queries.)
      const travel = await search(box.user.apiKey, { query: "boarding at gate B12 for New York", mode, labels: ["travel"] })
      expect(travel.data?.data.map((r) => r.email_id), mode).toEqual([flight])
      expect(travel.data?.meta, mode).toEqual({ page: 1, limit: 20, total: 1, hasMore: false })
    }
    const both = await search(box.user.apiKey, { query: "email", labels: ["travel", "inbound"] })
    expect(both.data?.data.map((r) => r.email_id)).toEqual([flight])
    const none = await search(box.user.apiKey, { query: "boarding", labels: ["travel", "never-given"] })
    expect(none.data?.data).toEqual([])
    expect(none.data?.meta.total).toBe(0)
    const everything = await search(box.user.apiKey, { query: "email", limit: 100 })
    expect(everything.data!.meta.total).toBeGreaterThan(1)
  })

  it("keeps only mail from a sender, or that arrived when asked, and counts only those; what names no sender or time is 400 by field", async () => {
    const found = async (body: Partial<components["schemas"]["SearchInput"]>) => {
      const answer = await search(box.user.apiKey, { query: "email", limit: 100, ...body })
      expect(answer.response.status).toBe(200)
      expect(answer.data?.meta.total).toBe(answer.data?.data.length)
      return new Set(answer.data!.data.map((r) => r.email_id))
    }
    const idsOf = (...keys: Array<string>) => new Set(keys.map((key) => ids.get(key)!))
    expect(await found({ from: "flight@example.com" })).toEqual(idsOf("flight"))
    expect(await found({ query: "invoice payable", from: "INVOICE@Example.com", mode: "text" })).toEqual(idsOf("invoice"))
    // Every email here so far is from someone at example.com: the domain keeps them all, another none.
    const everyone = await found({})
    expect(await found({ from: "example.com" })).toEqual(everyone)
    expect(everyone.size).toBeGreaterThan(1)
    expect(await found({ from: "example.org" })).toEqual(new Set())
    expect(await found({ from: "*.example.com" })).toEqual(new Set())

    // The corpus arrived one email after another, in its order.
    const arrived = new Map<string, string>()
    for (const mail of corpus) {
      const email = await withKey(server.url, box.user).GET("/v1/api/emails/{emailId}", { params: { path: { emailId: ids.get(mail.key)! } } })
      arrived.set(mail.key, email.data!.data.received_at)
    }
    // (Other tests here have sent mail since: of that, only the corpus is counted.)
    const ofCorpus = (found: Set<string>) => new Set([...found].filter((id) => [...ids.values()].includes(id)))
    expect(ofCorpus(await found({ received_after: arrived.get("password")! }))).toEqual(idsOf("password", "flight", "newsletter"))
    expect(await found({ received_before: arrived.get("password")! })).toEqual(idsOf("invoice", "offsite"))
    expect(await found({ received_after: arrived.get("offsite")!, received_before: arrived.get("flight")!, from: "example.com" }))
      .toEqual(idsOf("offsite", "password"))
    // A day, from its start in UTC: all of the corpus arrived on or after the first email's day, none before it.
    const firstDay = arrived.get("invoice")!.slice(0, 10)
    expect(ofCorpus(await found({ received_after: firstDay })).size).toBe(corpus.length)
    expect(await found({ received_before: firstDay })).toEqual(new Set())

    const refusals: Array<[Record<string, unknown>, Record<string, string>]> = [
      [{ from: "not a sender" }, { from: expect.stringMatching(/^must not contain spaces/) }],
      [{ received_after: "yesterday" }, {
        received_after: "must be a day (2026-12-01, from its start in UTC) or an ISO 8601 time with a zone (2026-12-01T09:00:00Z)"
      }],
      [{ received_before: "2026-02-30" }, { received_before: expect.stringMatching(/^must be a day/) }],
      [{ received_after: "2026-12-02", received_before: "2026-12-01T23:00:00-01:00" }, { received_before: "must be later than received_after" }]
    ]
    for (const [body, details] of refusals) {
      const bad = await search(box.user.apiKey, offContract({ query: "email", ...body }))
      expect([bad.response.status, bad.error?.error.code, bad.error?.error.details], JSON.stringify(body)).toEqual([400, "VALIDATION_ERROR", details])
    }
  })

  it("keeps only results scoring at least min_score and counts only those; a min_score outside 0-1 is 400 by field", async () => {
    const query = "invoice amount due"
    const all = await search(box.user.apiKey, { query, limit: 100 })
    const scores = all.data!.data.map((r) => r.score)
    expect(scores.length).toBeGreaterThan(2)
    // The second best as the floor: the best two (and any tied with them) stay.
    const floor = scores[1]!
    const kept = scores.filter((score) => score >= floor)
    const strong = await search(box.user.apiKey, { query, min_score: floor, limit: 100 })
    expect(strong.data?.data.map((r) => r.score)).toEqual(kept)
    expect(strong.data?.meta).toEqual({ page: 1, limit: 100, total: kept.length, hasMore: false })
    const paged = await search(box.user.apiKey, { query, min_score: floor, limit: 1 })
    expect(paged.data?.meta).toEqual({ page: 1, limit: 1, total: kept.length, hasMore: true, ranking: expect.stringMatching(/^rnk_/) })

    for (const [min_score, message] of [[1.5, "must be a number from 0 to 1"], [-0.1, "must be a number from 0 to 1"], ["high", "must be a number"]]) {
      const bad = await search(box.user.apiKey, offContract({ query, min_score }))
      expect(bad.response.status).toBe(400)
      expect(bad.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { min_score: message } })
    }
  })

  it("sees only the caller's namespace, and never a deleted mailbox's mail", async () => {
    const other = await newBox(server.url)
    await upgrade(server.url, other.user.apiKey, "pro")
    await send(other.address, "Invoice #9000 for the other tenant", "Amount due for the other tenant's October services.")
    await until("the other tenant's invoice is searchable", async () => {
      const reply = await search(other.user.apiKey, { query: "invoice", mode: "text" })
      return reply.data?.data.length === 1 ? true : undefined
    }, 60_000, 500)
    const mine = await search(box.user.apiKey, { query: "invoice for the other tenant", limit: 100 })
    expect(mine.data?.data.every((r) => !r.subject.includes("other tenant"))).toBe(true)
    const theirs = await search(other.user.apiKey, { query: "invoice", limit: 100 })
    expect(theirs.data?.data.map((r) => r.subject)).toEqual(["Invoice #9000 for the other tenant"])

    const deleted = await withKey(server.url, other.user).DELETE("/v1/api/mailboxes/{mailboxId}", {
      params: { path: { mailboxId: other.mailboxId } },
      body: { confirm_email_address: other.address }
    })
    expect(deleted.response.status).toBe(200)
    for (const mode of ["hybrid", "text", "vector"] as const) {
      const after = await search(other.user.apiKey, { query: "invoice", mode })
      expect(after.data?.data).toEqual([])
      expect(after.data?.meta.total).toBe(0)
    }
  })
})

describe("GET /v1/search/suggestions", () => {
  it("completes past queries first, then subjects, then senders, case-insensitively", async () => {
    await search(box.user.apiKey, { query: "Flight to New York" })
    const reply = await suggestions(box.user.apiKey, "fl")
    expect(reply.response.status).toBe(200)
    expect(reply.data?.data).toEqual(["Flight to New York", "Flight confirmation LH 402", "flight@example.com"])
    const senders = await suggestions(box.user.apiKey, "NEWSL")
    expect(senders.data?.data).toEqual(["newsletter@example.com"])
    const literal = await suggestions(box.user.apiKey, "%")
    expect(literal.data?.data).toEqual([])
  })

  it("suggests nothing of mail a block list stopped (stored, labelled blocked, not searchable)", async () => {
    const mailroom = withKey(server.url, box.user)
    const blocked = await mailroom.POST("/v1/api/lists/{list}", { params: { path: { list: "block" } }, body: { entry: "fleece.example" } })
    expect(blocked.response.status).toBe(201)
    // The envelope sender passes; the header From is what the block list stops.
    const transport = nodemailer.createTransport({ host: "127.0.0.1", port: server.smtpPort, secure: false, ignoreTLS: true })
    await transport.sendMail({
      envelope: { from: "relay@example.com", to: box.address },
      from: "flogger@fleece.example",
      to: box.address,
      subject: "Flash sale on fleece",
      text: "Buy now."
    })
    transport.close()
    await until("the blocked mail is stored", async () => {
      const listed = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", {
        params: { path: { mailboxId: box.mailboxId }, query: { labels: "blocked" } }
      })
      return listed.data?.data.length === 1 ? true : undefined
    })
    expect((await suggestions(box.user.apiKey, "fl")).data?.data).toEqual(["Flight to New York", "Flight confirmation LH 402", "flight@example.com"])
  })

  it("does not suggest a query past 200 characters (a pasted text), nor lose the queries written with it", async () => {
    const { user } = await newBox(server.url)
    const mailroom = withKey(server.url, user)
    // 1,000 letters of CJK: 3,000 bytes, past what the suggestions' prefix index holds.
    let seed = 11
    const pasted = "qz " + Array.from({ length: 997 }, () => String.fromCodePoint(0x4e00 + ((seed = (seed * 48271) % 2147483647) % 20_000))).join("")
    for (const query of [pasted, "qz short one", "q".repeat(201), "qz" + "x".repeat(198)]) {
      expect((await mailroom.POST("/v1/search", { body: { query, mode: "text" } })).response.status).toBe(200)
    }
    expect((await suggestions(user.apiKey, "qz")).data?.data.sort()).toEqual(["qz short one", "qz" + "x".repeat(198)])
    // Written (the log writes every second): still there, read from the database.
    await new Promise((resolve) => setTimeout(resolve, 2_500))
    expect((await suggestions(user.apiKey, "qz")).data?.data.sort()).toEqual(["qz short one", "qz" + "x".repeat(198)])
  })

  it("never suggests another tenant's subjects or queries", async () => {
    const other = await newBox(server.url)
    const reply = await suggestions(other.user.apiKey, "fl")
    expect(reply.response.status).toBe(200)
    expect(reply.data?.data).toEqual([])
  })

  it("requires q of at most 200 characters: 400 VALIDATION_ERROR", async () => {
    const refusals: ReadonlyArray<[{ readonly q: string }, string]> = [
      [offContract({}), "is required"],
      [{ q: "" }, "must not be empty"],
      [{ q: "x".repeat(201) }, "must be at most 200 characters"]
    ]
    for (const [query, message] of refusals) {
      const reply = await withKey(server.url, box.user).GET("/v1/search/suggestions", { params: { query } })
      expect(reply.response.status).toBe(400)
      expect(reply.error?.error.code).toBe("VALIDATION_ERROR")
      expect(reply.error?.error.details).toEqual({ q: message })
    }
  })
})
