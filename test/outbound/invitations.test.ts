/**
 * Calendar invitations as an agent meets them: invitations as Google and Outlook send them arrive over
 * SMTP, are read over the API of a started server, and answered; the organizer's REPLY is caught at a
 * receiving SMTP server this test runs (partner.test's MX, through the test's DNS server). Reading
 * every kind of calendar is test/domain/icalendar.test.ts's; here, the wiring, the mail and every
 * refusal's status, code and details.
 */
import { simpleParser } from "mailparser"
import * as fs from "node:fs"
import { describe, expect, it } from "vitest"
import { createClient, type MailroomFetchClient } from "../../packages/client/src/fetch-client.ts"
import { withApiKey } from "../support/accounts.ts"
import { upgrade } from "../support/billing.ts"
import { type Box, fresh, newBox } from "../support/mailboxes.ts"
import { useOutboundWorld } from "../support/outbound-world.ts"
import { sendMail } from "../support/send-mail.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { until } from "../support/wait.ts"

let suite: SuiteServer

const world = useOutboundWorld()
useSuiteServer((s) => {
  suite = s
}, world.env())

const fixture = (name: string) => fs.readFileSync(new URL(`../fixtures/calendars/${name}`, import.meta.url), "utf8")

/** A mailbox of its own account, on pro: a test's polls pass the free plan's 20 requests a minute on a slow machine. */
const owner = async (): Promise<{ box: Box; mailroom: MailroomFetchClient }> => {
  const box = await newBox(suite.url, { user: await withApiKey(suite.url) })
  await upgrade(suite.url, box.user.apiKey, "pro")
  return { box, mailroom: createClient({ baseUrl: suite.url, apiKey: box.user.apiKey }) }
}

/** The stored email of a message sent to `box` with this subject. */
const arrived = (mailroom: MailroomFetchClient, box: Box, subject: string) =>
  until(`"${subject}" stored`, async () => {
    const { data } = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
    return data!.data.find((e) => e.subject === subject)
  }, 20_000)

const emailPath = (emailId: string) => ({ params: { path: { emailId } } })

/** The REPLYs the organizer's MX took from `box`, oldest first. */
const repliesFrom = (box: Box) => world.mx.delivered().filter((m) => m.mailFrom.length > 0 && m.raw.includes("method=REPLY") && m.raw.includes(box.address))

describe("calendar invitations", () => {
  it("reads a Google invitation and answers it: the organizer gets a REPLY in the conversation, and the answer is kept; answering again sends another", async () => {
    const { box, mailroom } = await owner()
    const organizer = `${fresh("ada")}@partner.test`
    const ics = fixture("google-request.ics").replaceAll("agent@mailroom.test", box.address).replaceAll("ada@partner.test", organizer)
    const invitation = await sendMail(suite.server.smtpPort, {
      from: `Ada Lovelace <${organizer}>`,
      to: box.address,
      subject: "Invitation: Contract review",
      text: "You have been invited to Contract review.",
      icalEvent: { method: "REQUEST", content: ics }
    })
    const email = await arrived(mailroom, box, "Invitation: Contract review")

    const read = await mailroom.GET("/v1/api/emails/{emailId}/invitation", emailPath(email.email_id))
    expect(read.response.status).toBe(200)
    expect(read.data!.data).toEqual({
      email_id: email.email_id,
      attachment_id: expect.stringMatching(/^att_/),
      method: "REQUEST",
      uid: "7kukuqrfedlm2f9t0vl2s1eel9@google.com",
      sequence: 0,
      recurrence_id: null,
      status: "confirmed",
      summary: "Contract review",
      description: "Review the draft contract before Friday.",
      location: null,
      url: "https://meet.example.test/abc-defg-hij",
      start: { date_time: "2026-12-03T14:00:00Z", date: null, time_zone: "Europe/Paris" },
      end: { date_time: "2026-12-03T14:45:00Z", date: null, time_zone: "Europe/Paris" },
      recurrence: null,
      organizer: { address: organizer, name: "Ada Lovelace" },
      attendees: [
        { address: organizer, name: "Ada Lovelace", role: "required", status: "accepted", rsvp: true, is_mailbox: false },
        { address: box.address, name: null, role: "required", status: "needs_action", rsvp: true, is_mailbox: true }
      ],
      respondable: true,
      not_respondable_reason: null,
      latest_email_id: null,
      // On the schedule once the worker has read it.
      schedule_status: expect.toBeOneOf(["confirmed", null]),
      not_applied_reason: null,
      response: null
    })

    const answered = await mailroom.POST("/v1/api/emails/{emailId}/invitation/respond", {
      ...emailPath(email.email_id),
      body: { status: "accepted", comment: "Looking forward to it." }
    })
    expect(answered.response.status).toBe(202)
    expect(answered.data!.data).toEqual({ email_id: expect.stringMatching(/^eml_/), message_id: expect.any(String), thread_id: email.thread_id, status: "queued" })
    const delivered = await until("the REPLY at the organizer's MX", async () => repliesFrom(box)[0], 20_000)
    expect(delivered.rcptTo).toEqual([organizer])
    const reply = await simpleParser(delivered.raw)
    expect(reply.subject).toBe("Accepted: Contract review")
    expect(reply.inReplyTo).toBe(invitation.messageId)
    expect(reply.from?.value[0]?.address).toBe(box.address)
    expect(reply.text).toContain(`${box.address} has accepted the invitation to Contract review.`)
    expect(reply.text).toContain("Looking forward to it.")
    // The calendar part calendars read: METHOD:REPLY, the event's UID, this attendee's answer.
    const part = reply.attachments.find((a) => a.contentType === "text/calendar")!
    const calendar = part.content.toString("utf8").replace(/\r\n[ \t]/g, "")
    expect(calendar).toContain("METHOD:REPLY")
    expect(calendar).toContain("UID:7kukuqrfedlm2f9t0vl2s1eel9@google.com")
    expect(calendar).toContain(`ORGANIZER;CN=Ada Lovelace:mailto:${organizer}`)
    expect(calendar).toContain(`ATTENDEE;PARTSTAT=ACCEPTED:mailto:${box.address}`)
    expect(calendar).toContain("COMMENT:Looking forward to it.")

    // Kept: the invitation now shows the answer, and the REPLY is the mailbox's sent mail in the conversation.
    // Read as the API answers it once it does (on a loaded CI machine it answered an error twice, not
    // seen otherwise: the last answer is in the failure).
    const invitationOf = (emailId: string) => {
      let last = "no answer yet"
      return until(() => `GET /v1/api/emails/${emailId}/invitation: ${last}`, async () => {
        const read = await mailroom.GET("/v1/api/emails/{emailId}/invitation", emailPath(emailId))
        last = `${read.response.status} ${JSON.stringify(read.error ?? read.data)}`
        return read.data?.data
      }, 20_000, 200)
    }
    const after = await invitationOf(email.email_id)
    expect(after.response).toEqual({
      status: "accepted",
      comment: "Looking forward to it.",
      email_id: answered.data!.data.email_id,
      responded_at: expect.any(String)
    })
    // The sent REPLY is an invitation's answer too, read as such, and not one to answer.
    const sent = await invitationOf(answered.data!.data.email_id)
    expect(sent).toMatchObject({ method: "REPLY", respondable: false, attendees: [{ address: box.address, status: "accepted", is_mailbox: true }] })

    // A change of mind: declined, with no comment, sends a second REPLY and replaces the answer.
    const declined = await mailroom.POST("/v1/api/emails/{emailId}/invitation/respond", { ...emailPath(email.email_id), body: { status: "declined" } })
    expect(declined.response.status).toBe(202)
    const second = await until("the second REPLY", async () => repliesFrom(box)[1], 20_000)
    expect((await simpleParser(second.raw)).subject).toBe("Declined: Contract review")
    expect(second.raw.toString()).toContain("PARTSTAT=DECLINED")
    const changed = await until("the declined answer kept", async () => {
      const read = await invitationOf(email.email_id)
      return read.response?.status === "declined" ? read.response : undefined
    }, 20_000, 200)
    expect(changed).toMatchObject({ status: "declined", comment: null, email_id: declined.data!.data.email_id })
  })

  it("answers an Outlook invitation as the attendee it names, and an attachment-only .ics too; another account's is not found", async () => {
    const { box, mailroom } = await owner()
    const organizer = `${fresh("grace")}@partner.test`
    // Outlook writes the mailbox's address in capitals; the answer names it as the organizer wrote it.
    const invited = box.address.toUpperCase()
    const ics = fixture("outlook-request.ics").replace("AGENT@mailroom.test", invited).replace("grace@partner.test", organizer)
    await sendMail(suite.server.smtpPort, {
      from: organizer,
      to: box.address,
      subject: "Planning",
      text: "Quarterly planning",
      attachments: [{ filename: "meeting.ics", content: ics, contentType: "application/ics" }]
    })
    const email = await arrived(mailroom, box, "Planning")
    const read = (await mailroom.GET("/v1/api/emails/{emailId}/invitation", emailPath(email.email_id))).data!.data
    expect(read).toMatchObject({ summary: "Planning", sequence: 2, recurrence: "FREQ=WEEKLY;COUNT=4;BYDAY=TH", respondable: true })
    expect(read.start.date_time).toBe("2026-07-02T16:00:00Z")
    const answered = await mailroom.POST("/v1/api/emails/{emailId}/invitation/respond", {
      ...emailPath(email.email_id),
      body: { status: "tentative" }
    })
    expect(answered.response.status).toBe(202)
    const delivered = await until("the REPLY", async () => repliesFrom(box)[0], 20_000)
    expect((await simpleParser(delivered.raw)).subject).toBe("Tentative: Planning")
    const calendar = delivered.raw.toString().replace(/\r\n[ \t]/g, "")
    expect(calendar).toContain(`ATTENDEE;PARTSTAT=TENTATIVE;CN=Scheduling Agent:mailto:${invited}`)
    expect(calendar).toContain("SEQUENCE:2")
    expect(calendar).toContain("TZID:Pacific Standard Time")

    // Another account's email is not found.
    const stranger = await owner()
    const foreign = await stranger.mailroom.GET("/v1/api/emails/{emailId}/invitation", emailPath(email.email_id))
    expect([foreign.response.status, foreign.error?.error]).toEqual([404, { code: "NOT_FOUND", message: "Email not found", details: { email_id: email.email_id } }])
  })

  it("reads a calendar in the charset its part names", async () => {
    const { box, mailroom } = await owner()
    const ics = fixture("outlook-request.ics").replace("AGENT@mailroom.test", box.address).replace("SUMMARY;LANGUAGE=en-US:Planning", "SUMMARY;LANGUAGE=en-US:Café crème à Zürich")
    await sendMail(suite.server.smtpPort, {
      from: "grace@partner.test",
      to: box.address,
      subject: "Latin-1 invitation",
      text: "See the calendar",
      attachments: [{ filename: "meeting.ics", content: Buffer.from(ics, "latin1"), contentType: "text/calendar; charset=iso-8859-1; method=REQUEST" }]
    })
    const email = await arrived(mailroom, box, "Latin-1 invitation")
    const read = (await mailroom.GET("/v1/api/emails/{emailId}/invitation", emailPath(email.email_id))).data!.data
    expect(read.summary).toBe("Café crème à Zürich")
  })

  it("does not answer an update the schedule did not apply for who sent it: 422 naming why, nothing sent, until a person vouches for it", async () => {
    const { box, mailroom } = await owner()
    const organizer = `${fresh("ada")}@partner.test`
    const invitation = fixture("google-request.ics").replaceAll("agent@mailroom.test", box.address).replaceAll("ada@partner.test", organizer)
    const reading = async (emailId: string) => (await mailroom.GET("/v1/api/emails/{emailId}/invitation", emailPath(emailId))).data!.data
    const respond = (emailId: string, status: "accepted" | "declined" | "tentative") =>
      mailroom.POST("/v1/api/emails/{emailId}/invitation/respond", { ...emailPath(emailId), body: { status } })
    // A new event is entered from anyone (here its organizer's address, nothing proving it: no SPF, no DKIM).
    await sendMail(suite.server.smtpPort, { from: organizer, to: box.address, subject: "Review", text: "Come.", icalEvent: { method: "REQUEST", content: invitation } })
    const open = await arrived(mailroom, box, "Review")
    expect(open.labels).toContain("unauthenticated")
    await until("the invitation on the schedule", async () => (await reading(open.email_id)).schedule_status === "confirmed" || undefined)
    // Answered, then answered again (a change of mind): reading it again with the answer changes nothing, so refuses nothing.
    expect((await respond(open.email_id, "accepted")).response.status).toBe(202)
    expect((await respond(open.email_id, "tentative")).response.status).toBe(202)
    expect(await reading(open.email_id)).toMatchObject({ respondable: true, not_applied_reason: null, response: { status: "tentative" } })

    // A move from the organizer's address that nothing vouches for, and one from a stranger naming the organizer: neither applied.
    const moved = (sequence: number) =>
      invitation.replace("SEQUENCE:0", `SEQUENCE:${sequence}`).replace("DTSTART;TZID=Europe/Paris:20261203T150000", "DTSTART;TZID=Europe/Paris:20261203T170000")
    const updates = [
      { from: organizer, subject: "Review moved", sequence: 1, reason: "unverified_sender" },
      { from: `${fresh("mallory")}@partner.test`, subject: "Review moved again", sequence: 2, reason: "not_organizer" }
    ] as const
    for (const { from, subject, sequence, reason } of updates) {
      await sendMail(suite.server.smtpPort, { from, to: box.address, subject, text: "Later.", icalEvent: { method: "REQUEST", content: moved(sequence) } })
      const update = await arrived(mailroom, box, subject)
      await until(`${subject} refused`, async () => (await reading(update.email_id)).not_applied_reason === reason || undefined)
      // Its reading says it cannot be answered, why, and which email holds the event as the schedule has it.
      expect(await reading(update.email_id)).toMatchObject({
        respondable: false,
        not_respondable_reason: "not_applied",
        latest_email_id: open.email_id,
        schedule_status: "confirmed",
        not_applied_reason: reason,
        response: null
      })
      const refused = await respond(update.email_id, "accepted")
      expect([refused.response.status, refused.error?.error]).toEqual([422, {
        code: "INVITATION_NOT_RESPONDABLE",
        message: reason === "unverified_sender"
          ? "This update was not applied to the schedule: nothing proves it comes from its organizer (unverified_sender). " +
            "Take the unauthenticated label off the email to vouch for it, then answer it"
          : "This update was not applied to the schedule: it does not come from the event's organizer (not_organizer). " +
            `Answer the invitation the schedule holds (email ${open.email_id})`,
        details: { email_id: update.email_id, method: "REQUEST", reason: "not_applied", not_applied_reason: reason, latest_email_id: open.email_id }
      }])
    }
    // The schedule keeps the event as it was, with the answer given to it; the invitation it holds is still the one answered.
    expect(await reading(open.email_id)).toMatchObject({ respondable: true, schedule_status: "confirmed", response: { status: "tentative" } })
    const { data: schedule } = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/schedule", {
      params: { path: { mailboxId: box.mailboxId }, query: { from: "2026-12-03T00:00:00Z", to: "2026-12-04T00:00:00Z" } }
    })
    expect(schedule!.data.map((o) => [o.email_id, o.start.date_time, o.response])).toEqual([[open.email_id, "2026-12-03T14:00:00Z", "tentative"]])

    // A person vouches for the organizer's (takes the label off): it applies, and is answered then.
    const first = await arrived(mailroom, box, "Review moved")
    await mailroom.PATCH("/v1/api/emails/{emailId}", { params: { path: { emailId: first.email_id } }, body: { remove_labels: ["unauthenticated"] } })
    await until("the vouched-for update on the schedule", async () => (await reading(open.email_id)).not_respondable_reason === "superseded" || undefined)
    expect(await reading(first.email_id)).toMatchObject({ respondable: true, not_respondable_reason: null, latest_email_id: null, not_applied_reason: null })
    expect((await respond(first.email_id, "accepted")).response.status).toBe(202)
    // Two answers to the invitation, one to the vouched-for update (SEQUENCE 1), none to the stranger's.
    const sent = await until("the three REPLYs", async () => repliesFrom(box).length === 3 ? repliesFrom(box) : undefined, 20_000)
    expect(sent.map((m) => m.raw.toString().match(/^SEQUENCE:(\d+)/m)?.[1])).toEqual(["0", "0", "1"])
  })

  it("refuses what cannot be read or answered, each with its status, code and details", async () => {
    const { box, mailroom } = await owner()
    // The calendars' ORGANIZER is the sender: only the organizer's mail changes an event the schedule holds.
    const organizer = `${fresh("grace")}@partner.test`
    const calendar = (name: string) => fixture(name).replaceAll("ada@partner.test", organizer)
    const respond = (emailId: string, body: unknown) =>
      mailroom.POST("/v1/api/emails/{emailId}/invitation/respond", { ...emailPath(emailId), body: body as never })

    await sendMail(suite.server.smtpPort, { from: organizer, to: box.address, subject: "Plain", text: "No calendar here." })
    const plain = await arrived(mailroom, box, "Plain")
    const none = await mailroom.GET("/v1/api/emails/{emailId}/invitation", emailPath(plain.email_id))
    expect([none.response.status, none.error?.error]).toEqual([404, {
      code: "NO_INVITATION",
      message: "This email carries no calendar invitation",
      details: { email_id: plain.email_id }
    }])
    expect((await respond(plain.email_id, { status: "accepted" })).error?.error.code).toBe("NO_INVITATION")
    expect((await mailroom.GET("/v1/api/emails/{emailId}/invitation", emailPath("eml_missing"))).error?.error)
      .toEqual({ code: "NOT_FOUND", message: "Email not found", details: { email_id: "eml_missing" } })

    await sendMail(suite.server.smtpPort, {
      from: organizer,
      to: box.address,
      subject: "Broken",
      text: "See the file.",
      attachments: [{ filename: "invite.ics", content: "BEGIN:VCALENDAR\r\nthis is not iCalendar\r\n", contentType: "text/calendar" }]
    })
    const broken = await arrived(mailroom, box, "Broken")
    const unreadable = await mailroom.GET("/v1/api/emails/{emailId}/invitation", emailPath(broken.email_id))
    expect(unreadable.response.status).toBe(422)
    expect(unreadable.error?.error).toMatchObject({
      code: "INVITATION_UNREADABLE",
      details: { email_id: broken.email_id, attachment_id: expect.stringMatching(/^att_/), reason: "damaged" }
    })

    // An event of its own: the invitation below is to another (a cancellation kept first would call it off at its revision).
    const cancelled = calendar("google-request.ics").replace("METHOD:REQUEST", "METHOD:CANCEL").replace("STATUS:CONFIRMED", "STATUS:CANCELLED")
      .replace("UID:7kukuqrfedlm2f9t0vl2s1eel9@google.com", "UID:called-off@google.com")
    await sendMail(suite.server.smtpPort, { from: organizer, to: box.address, subject: "Cancelled", text: "Cancelled.", icalEvent: { method: "CANCEL", content: cancelled } })
    const cancel = await arrived(mailroom, box, "Cancelled")
    expect((await mailroom.GET("/v1/api/emails/{emailId}/invitation", emailPath(cancel.email_id))).data!.data)
      .toMatchObject({ method: "CANCEL", status: "cancelled", respondable: false, not_respondable_reason: "cancelled", latest_email_id: null })
    const refused = await respond(cancel.email_id, { status: "accepted" })
    expect([refused.response.status, refused.error?.error]).toEqual([422, {
      code: "INVITATION_NOT_RESPONDABLE",
      message: "The event is cancelled: there is nothing to answer",
      details: { email_id: cancel.email_id, method: "CANCEL", reason: "cancelled" }
    }])

    const published = calendar("google-request.ics").replace("METHOD:REQUEST", "METHOD:PUBLISH")
    await sendMail(suite.server.smtpPort, { from: organizer, to: box.address, subject: "Published", text: "FYI.", icalEvent: { method: "PUBLISH", content: published } })
    const publish = await arrived(mailroom, box, "Published")
    expect((await respond(publish.email_id, { status: "accepted" })).error?.error)
      .toMatchObject({ code: "INVITATION_NOT_RESPONDABLE", details: { email_id: publish.email_id, method: "PUBLISH", reason: "not_a_request" } })

    const invitation = calendar("google-request.ics")
    await sendMail(suite.server.smtpPort, { from: organizer, to: box.address, subject: "Open", text: "Come.", icalEvent: { method: "REQUEST", content: invitation } })
    const open = await arrived(mailroom, box, "Open")
    const bad = await respond(open.email_id, { status: "maybe", comment: "x".repeat(2001) })
    expect(bad.response.status).toBe(400)
    expect(bad.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { status: expect.any(String), comment: expect.any(String) } })

    // Moved by an update since (a new time, the next revision): the update is the one to answer.
    const moved = invitation.replace("SEQUENCE:0", "SEQUENCE:1").replace("DTSTART;TZID=Europe/Paris:20261203T150000", "DTSTART;TZID=Europe/Paris:20261203T170000")
    await sendMail(suite.server.smtpPort, { from: organizer, to: box.address, subject: "Moved", text: "Later.", icalEvent: { method: "REQUEST", content: moved } })
    const update = await arrived(mailroom, box, "Moved")
    // From the organizer's address, but nothing vouches for it (no SPF, no DKIM here): not applied, and said so.
    expect(update.labels).toContain("unauthenticated")
    await until("the update refused", async () =>
      (await mailroom.GET("/v1/api/emails/{emailId}/invitation", emailPath(update.email_id))).data?.data.not_applied_reason === "unverified_sender" || undefined)
    expect((await mailroom.GET("/v1/api/emails/{emailId}/invitation", emailPath(open.email_id))).data!.data.respondable).toBe(true)
    // A person vouches for it (takes the label off): it is read again, and applies.
    const vouched = await mailroom.PATCH("/v1/api/emails/{emailId}", { params: { path: { emailId: update.email_id } }, body: { remove_labels: ["unauthenticated"] } })
    expect(vouched.response.status).toBe(200)
    await until("the update on the schedule", async () =>
      (await mailroom.GET("/v1/api/emails/{emailId}/invitation", emailPath(open.email_id))).data!.data.respondable === false || undefined)
    const superseded = await respond(open.email_id, { status: "accepted" })
    expect([superseded.response.status, superseded.error?.error]).toEqual([422, {
      code: "INVITATION_NOT_RESPONDABLE",
      message: `An update of this invitation arrived since (revision 1, email ${update.email_id}): answer that one`,
      details: { email_id: open.email_id, method: "REQUEST", reason: "superseded", latest_email_id: update.email_id }
    }])
    const reading = async (emailId: string) => (await mailroom.GET("/v1/api/emails/{emailId}/invitation", emailPath(emailId))).data!.data
    // Its reading says why, and which email to read and answer instead.
    expect(await reading(open.email_id))
      .toMatchObject({ respondable: false, not_respondable_reason: "superseded", latest_email_id: update.email_id, schedule_status: "confirmed" })
    expect(await reading(update.email_id))
      .toMatchObject({ respondable: true, not_respondable_reason: null, latest_email_id: null, schedule_status: "confirmed" })
    // Nothing was sent for any refusal.
    expect(repliesFrom(box)).toEqual([])

    // Called off by its organizer (the next revision): the update's reading says the event is cancelled, by that email.
    const calledOff = moved.replace("METHOD:REQUEST", "METHOD:CANCEL").replace("SEQUENCE:1", "SEQUENCE:2").replace("STATUS:CONFIRMED", "STATUS:CANCELLED")
    await sendMail(suite.server.smtpPort, { from: organizer, to: box.address, subject: "Called off", text: "Sorry.", icalEvent: { method: "CANCEL", content: calledOff } })
    const callingOff = await arrived(mailroom, box, "Called off")
    // Vouched for, as an organizer's change must be (nothing here proves its From).
    await mailroom.PATCH("/v1/api/emails/{emailId}", { params: { path: { emailId: callingOff.email_id } }, body: { remove_labels: ["unauthenticated"] } })
    await until("the cancellation on the schedule", async () => (await reading(update.email_id)).schedule_status === "cancelled" || undefined)
    // One state, the event's last word: called off outranks replaced, for the update and for the invitation it replaced.
    for (const older of [update, open]) {
      expect(await reading(older.email_id))
        .toMatchObject({ method: "REQUEST", respondable: false, not_respondable_reason: "cancelled", latest_email_id: callingOff.email_id, schedule_status: "cancelled" })
      const answered = await respond(older.email_id, { status: "accepted" })
      expect([answered.response.status, answered.error?.error]).toEqual([422, {
        code: "INVITATION_NOT_RESPONDABLE",
        message: "The event is cancelled: there is nothing to answer",
        details: { email_id: older.email_id, method: "REQUEST", reason: "cancelled", latest_email_id: callingOff.email_id }
      }])
    }
    expect(await reading(callingOff.email_id)).toMatchObject({ not_respondable_reason: "cancelled", latest_email_id: null, schedule_status: "cancelled" })
  })
})
