/**
 * Which received mail a mailbox's automatic reply answers (services/outbound/auto-reply-rules.ts),
 * RFC 3834's rules one by one; the black-box suite (test/outbound/auto-reply.test.ts) proves the wiring.
 */
import { describe, expect, it } from "vitest"
import { autoReplyVerdict, type Received } from "../../services/outbound/auto-reply-rules.ts"

const MAILBOX = "desk@agents.localhost"
const email = (headers: Record<string, string>, rest: Partial<Received> = {}): Received => ({
  mailFrom: "ada@partner.test",
  labels: ["inbound", "unread"],
  headers: { from: "Ada <ada@partner.test>", to: MAILBOX, ...headers },
  mailboxAddress: MAILBOX,
  rcptTo: MAILBOX,
  ...rest
})

describe("autoReplyVerdict", () => {
  it("answers a person's mail to the mailbox: to its Reply-To, else its From, lower-cased", () => {
    expect(autoReplyVerdict(email({}))).toEqual({ answer: true, to: "ada@partner.test" })
    expect(autoReplyVerdict(email({ "reply-to": "Desk of Ada <Ada.Desk@Partner.test>" }))).toEqual({ answer: true, to: "ada.desk@partner.test" })
    // Named in Cc, with a subaddress, or under the address a catch-all took it for.
    expect(autoReplyVerdict(email({ to: "team@partner.test", cc: "desk+sales@agents.localhost" })).answer).toBe(true)
    expect(autoReplyVerdict(email({ to: "sales@acme.example" }, { rcptTo: "sales@acme.example" })).answer).toBe(true)
    expect(autoReplyVerdict(email({ "auto-submitted": "no" })).answer).toBe(true)
    // Sent by Mailroom (or a sending service): a return path that names its message is no program's.
    expect(autoReplyVerdict(email({}, { mailFrom: "bounces+eml_0123456789abcdef01234567@agents.localhost" }))).toEqual({ answer: true, to: "ada@partner.test" })
  })

  it.each([
    [email({}, { mailFrom: "" }), "bounce"],
    [email({}, { labels: ["inbound", "spam"] }), "spam"],
    [email({}, { labels: ["inbound", "blocked"] }), "spam"],
    [email({ "auto-submitted": "auto-replied" }), "automatic"],
    [email({ "auto-submitted": "auto-generated" }), "automatic"],
    [email({ precedence: "bulk" }), "automatic"],
    [email({ precedence: "list" }), "automatic"],
    [email({ "x-auto-response-suppress": "OOF, AutoReply" }), "automatic"],
    [email({ "list-id": "<news.partner.test>" }), "list"],
    [email({ "list-unsubscribe": "<mailto:leave@partner.test>" }), "list"],
    [email({ from: "no-reply@partner.test" }), "system sender"],
    [email({ from: "MAILER-DAEMON@partner.test" }), "system sender"],
    [email({ from: "owner-news@partner.test" }), "system sender"],
    [email({ from: "news-request@partner.test" }), "system sender"],
    [email({ from: "bounces+eml_1@agents.localhost" }), "system sender"],
    // A person's From on a program's envelope: the response would reach the program (RFC 3834 §3.1.2).
    [email({}, { mailFrom: "noreply@mailer.partner.test" }), "system sender"],
    [email({}, { mailFrom: "bounces@mailer.partner.test" }), "system sender"],
    [email({ from: "Desk+notes@agents.localhost" }), "self"],
    [email({ to: "someone@partner.test" }), "not addressed"],
    [email({ from: "undisclosed-recipients:;" }), "no sender"]
  ])("does not answer %j: %s", (received, reason) => {
    expect(autoReplyVerdict(received)).toEqual({ answer: false, reason })
  })
})
