/**
 * A mailbox's automatic reply, as its owner and its correspondents meet it: set over the API of a
 * started server, mail arriving over SMTP, the answers caught at a receiving SMTP server this test runs
 * (found through MX records a DNS server of the test's publishes). Which mail the rules answer is
 * test/domain/auto-reply-rules.test.ts's; here, that the wiring answers once, as a reply, and only
 * what the rules allow.
 */
import { simpleParser } from "mailparser"
import { describe, expect, it } from "vitest"
import { createClient, type MailroomFetchClient } from "../../packages/client/src/fetch-client.ts"
import { withApiKey } from "../support/accounts.ts"
import { type Box, fresh, newBox } from "../support/mailboxes.ts"
import { useOutboundWorld } from "../support/outbound-world.ts"
import { sendMail } from "../support/send-mail.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { sleep, until } from "../support/wait.ts"

let suite: SuiteServer

const world = useOutboundWorld()
useSuiteServer((s) => {
  suite = s
}, world.env())

const owner = async (): Promise<{ box: Box; mailroom: MailroomFetchClient }> => {
  const box = await newBox(suite.url, { user: await withApiKey(suite.url) })
  return { box, mailroom: createClient({ baseUrl: suite.url, apiKey: box.user.apiKey }) }
}

const path = (box: Box) => ({ params: { path: { mailboxId: box.mailboxId } } })

/** The automatic replies the MX took for `address`. */
const answersTo = (address: string) => world.mx.delivered().filter((m) => m.rcptTo.includes(address) && m.raw.includes("Auto-Submitted: auto-replied"))

describe("automatic replies", () => {
  it("answer received mail once per sender, as a reply that says it is automatic; list, automatic and Bcc'd mail get none", async () => {
    const { box, mailroom } = await owner()
    const set = await mailroom.PUT("/v1/api/mailboxes/{mailboxId}/auto-reply", {
      ...path(box),
      body: { subject: "Away until Monday", text: "I am away until Monday; your message will be read then." }
    })
    expect(set.response.status).toBe(200)
    expect(set.data!.data).toEqual({
      mailbox_id: box.mailboxId,
      subject: "Away until Monday",
      text: "I am away until Monday; your message will be read then.",
      html: null,
      interval_days: 7,
      starts_at: null,
      ends_at: null,
      active: true,
      created_at: expect.any(String),
      updated_at: expect.any(String)
    })
    expect((await mailroom.GET("/v1/api/mailboxes/{mailboxId}/auto-reply", path(box))).data!.data).toEqual(set.data!.data)

    const [ada, grace, news, robot, hidden] = ["ada", "grace", "news", "robot", "hidden"].map((name) => `${fresh(name)}@partner.test`)
    const question = await sendMail(suite.server.smtpPort, { from: ada, to: box.address, subject: "A question", text: "When is the meeting?" })
    const answer = await until("the automatic reply to ada", async () => answersTo(ada!)[0], 20_000)
    const parsed = await simpleParser(answer.raw)
    expect(parsed.subject).toBe("Away until Monday")
    expect(parsed.inReplyTo).toBe(question.messageId)
    expect(parsed.text).toContain("I am away until Monday")
    expect(parsed.from?.value[0]?.address).toBe(box.address)
    // Kept as the mailbox's sent mail, in the conversation it answers.
    const listed = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/threads", path(box))
    expect(listed.data!.data.find((t) => t.subject === "A question")?.message_count).toBe(2)

    // Once per sender; none for list mail, automatic mail, or mail that names the mailbox only in Bcc.
    await sendMail(suite.server.smtpPort, { from: ada, to: box.address, subject: "Another question", text: "And the agenda?" })
    await sendMail(suite.server.smtpPort, { from: news, to: box.address, subject: "Weekly news", text: "News.", headers: { "List-Id": "<news.partner.test>" } })
    await sendMail(suite.server.smtpPort, { from: robot, to: box.address, subject: "Out of office", text: "Away.", headers: { "Auto-Submitted": "auto-replied" } })
    await sendMail(suite.server.smtpPort, { from: hidden, to: "someone@partner.test", bcc: box.address, subject: "Bcc'd", text: "Psst." })
    await until("the four emails stored", async () => {
      const { data } = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId }, query: { direction: "inbound" } } })
      return data!.data.length === 5 || undefined
    }, 20_000)
    // Events are answered in the order they came: once grace, who wrote last, has her answer, the others were decided.
    await sendMail(suite.server.smtpPort, { from: grace, to: box.address, subject: "Hello", text: "Hi!" })
    await until("the automatic reply to grace", async () => answersTo(grace!)[0], 20_000)
    await sleep(500)
    expect([ada, news, robot, hidden].map((address) => answersTo(address!).length)).toEqual([1, 0, 0, 0])
  })

  it("is turned off, and refuses what it cannot be, by field", async () => {
    const { box, mailroom } = await owner()
    const other = await owner()
    const put = (body: Record<string, unknown>, on: Box = box) =>
      mailroom.PUT("/v1/api/mailboxes/{mailboxId}/auto-reply", { ...path(on), body: body as never })
    const refusals: Array<[Record<string, unknown>, Record<string, string>]> = [
      [{ text: "" }, { text: "must not be empty" }],
      [{ text: "x".repeat(100_001) }, { text: "must be at most 100,000 characters" }],
      [{ text: "Away", ends_at: "2020-01-01T00:00:00Z" }, { ends_at: "must be in the future when starts_at is left out (the answers start now)" }],
      [{ text: "Away", interval_days: 0 }, { interval_days: "must be a number between 1 and 30" }],
      [{ text: "Away", subject: "Line\r\nBcc: x@partner.test" }, { subject: "must not contain line breaks" }],
      [{ text: "Away", ends_at: "monday" }, { ends_at: "must be an ISO 8601 time with a zone, such as 2026-12-01T09:00:00Z" }],
      [{ text: "Away", starts_at: "2099-01-08T00:00:00Z", ends_at: "2099-01-01T00:00:00Z" }, { ends_at: "must be after starts_at" }]
    ]
    for (const [body, details] of refusals) {
      const refused = await put(body)
      expect(refused.response.status).toBe(400)
      expect((refused.error as { error: { code: string; details: unknown } }).error).toMatchObject({ code: "VALIDATION_ERROR", details })
    }
    const theirs = await put({ text: "Away" }, other.box)
    expect(theirs.response.status).toBe(404)
    expect(theirs.error).toMatchObject({ error: { code: "NOT_FOUND", details: { mailbox_id: other.box.mailboxId } } })

    const later = await put({ text: "Away next week", interval_days: 1, starts_at: "2099-01-01T00:00:00Z", ends_at: "2099-01-08T00:00:00Z" })
    expect(later.data!.data).toMatchObject({ active: false, interval_days: 1, starts_at: "2099-01-01T00:00:00.000Z", ends_at: "2099-01-08T00:00:00.000Z" })
    const removed = await mailroom.DELETE("/v1/api/mailboxes/{mailboxId}/auto-reply", path(box))
    expect(removed.data!.data).toEqual({ mailbox_id: box.mailboxId, deleted: true })
    expect((await mailroom.GET("/v1/api/mailboxes/{mailboxId}/auto-reply", path(box))).data!.data).toBeNull()
    const again = await mailroom.DELETE("/v1/api/mailboxes/{mailboxId}/auto-reply", path(box))
    expect(again.response.status).toBe(404)
    expect(again.error).toMatchObject({ error: { code: "NOT_FOUND", details: { mailbox_id: box.mailboxId } } })
  })
})
