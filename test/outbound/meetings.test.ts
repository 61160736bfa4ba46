/**
 * Meetings a mailbox organizes, as an agent and its attendees meet them: scheduled over the API of a
 * started server, the invitations, updates and cancellations caught at partner.test's MX (a receiving
 * SMTP server this test runs, found through the test's DNS server) and read as a calendar reads them;
 * an attendee with a Mailroom mailbox of their own answers through the invitation routes, and the
 * answer, received by mail, shows on the meeting. Every refusal with its status, code and details.
 */
import { Either } from "effect"
import { simpleParser } from "mailparser"
import { describe, expect, it } from "vitest"
import { createClient, type MailroomFetchClient } from "../../packages/client/src/fetch-client.ts"
import { readInvitation } from "../../services/invitations/icalendar.ts"
import { withApiKey } from "../support/accounts.ts"
import { type Box, fresh, newBox } from "../support/mailboxes.ts"
import type { Delivered } from "../support/mx-server.ts"
import { useOutboundWorld } from "../support/outbound-world.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { openEvents } from "../support/sse.ts"
import { until } from "../support/wait.ts"

let suite: SuiteServer

const world = useOutboundWorld()
useSuiteServer((s) => {
  suite = s
}, world.env())

const owner = async (): Promise<{ box: Box; mailroom: MailroomFetchClient }> => {
  const box = await newBox(suite.url, { user: await withApiKey(suite.url) })
  return { box, mailroom: createClient({ baseUrl: suite.url, apiKey: box.user.apiKey }) }
}

/** The message the MX took for `address` whose subject is `subject`, with its calendar read. */
const received = (address: string, subject: string) =>
  until(`"${subject}" at ${address}`, async () => {
    for (const message of world.mx.delivered().filter((m: Delivered) => m.rcptTo.includes(address))) {
      const parsed = await simpleParser(message.raw)
      if (parsed.subject !== subject) continue
      const part = parsed.attachments.find((a) => a.contentType === "text/calendar")!
      return { message, parsed, calendar: Either.getOrThrow(readInvitation(part.content.toString("utf8"))) }
    }
    return undefined
  }, 20_000)

const meetingPath = (meetingId: string) => ({ params: { path: { meetingId } } })

/** The mailbox's schedule for December 2026, as [start, role, response, busy, status] per occurrence. */
const december = async (mailroom: MailroomFetchClient, box: Box, query: { include_cancelled?: "true" | "false" } = {}) => {
  const { data, response } = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/schedule", {
    params: { path: { mailboxId: box.mailboxId }, query: { from: "2026-12-01T00:00:00Z", to: "2027-01-01T00:00:00Z", ...query } }
  })
  expect(response.status).toBe(200)
  return data!.data.map((o) => [o.start.date_time ?? o.start.date, o.role, o.response, o.busy, o.status])
}

describe("meetings", () => {
  it("schedules one: attendees get an invitation a calendar reads; a Mailroom attendee's answer shows; an update and a cancellation follow", async () => {
    const { box, mailroom } = await owner()
    const ada = `${fresh("ada")}@partner.test`
    const guest = await owner()
    // The guest's agent hears its invitations on its event stream.
    const invitations = await openEvents(`${suite.url}/v1/events?types=invitation.received`, { "x-api-key": guest.box.user.apiKey })
    const created = await mailroom.POST("/v1/api/mailboxes/{mailboxId}/meetings", {
      params: { path: { mailboxId: box.mailboxId } },
      body: {
        summary: "Quarterly planning",
        description: "Budgets, then hiring.",
        location: "Room 4",
        url: "https://meet.example.test/q4",
        start: { date_time: "2026-12-03T15:00:00+01:00", time_zone: "Europe/Paris" },
        end: { date_time: "2026-12-03T16:00:00+01:00", time_zone: "Europe/Paris" },
        recurrence: "FREQ=WEEKLY;COUNT=4",
        attendees: [{ name: "Ada Lovelace", address: ada }, guest.box.address, ada.toUpperCase()]
      }
    })
    expect(created.response.status).toBe(201)
    const meeting = created.data!.data
    expect(meeting).toEqual({
      meeting_id: expect.stringMatching(/^mtg_/),
      mailbox_id: box.mailboxId,
      uid: `${meeting.meeting_id}@${box.address.split("@")[1]}`,
      sequence: 0,
      status: "confirmed",
      summary: "Quarterly planning",
      description: "Budgets, then hiring.",
      location: "Room 4",
      url: "https://meet.example.test/q4",
      start: { date_time: "2026-12-03T14:00:00Z", date: null, time_zone: "Europe/Paris" },
      end: { date_time: "2026-12-03T15:00:00Z", date: null, time_zone: "Europe/Paris" },
      recurrence: "FREQ=WEEKLY;COUNT=4",
      // Each address once, whatever its capitals.
      attendees: [
        { address: ada, name: "Ada Lovelace", status: "needs_action", comment: null, responded_at: null },
        { address: guest.box.address, name: null, status: "needs_action", comment: null, responded_at: null }
      ],
      email_id: expect.stringMatching(/^eml_/),
      created_at: expect.any(String),
      updated_at: expect.any(String)
    })

    // Ada's calendar reads the invitation: the event, its organizer, both attendees asked to answer.
    const invitation = await received(ada, "Invitation: Quarterly planning")
    expect(invitation.parsed.from?.value[0]?.address).toBe(box.address)
    expect(invitation.calendar).toMatchObject({
      method: "REQUEST",
      uid: meeting.uid,
      sequence: 0,
      summary: "Quarterly planning",
      location: "Room 4",
      // Written in Paris time with the zone defined (DTSTART;TZID=Europe/Paris:…T150000), read back as the same moment.
      start: { date_time: "2026-12-03T14:00:00Z", time_zone: "Europe/Paris" },
      recurrence: "FREQ=WEEKLY;COUNT=4",
      organizer: { address: box.address }
    })
    expect(invitation.calendar.attendees.map((a) => [a.address, a.status, a.rsvp])).toEqual([[ada, "needs_action", true], [guest.box.address, "needs_action", true]])
    expect(invitation.parsed.text).toContain("When: 3 Dec 2026, 15:00 (Europe/Paris) – 3 Dec 2026, 16:00 (Europe/Paris), repeating every week, 4 times")

    // On the organizer's schedule: each of the four Thursdays, its own meeting.
    const weeks = ["2026-12-03T14:00:00Z", "2026-12-10T14:00:00Z", "2026-12-17T14:00:00Z", "2026-12-24T14:00:00Z"]
    expect(await december(mailroom, box)).toEqual(weeks.map((start) => [start, "organizer", "accepted", true, "confirmed"]))

    // The guest's mailbox got it too (inbound, through the same server): on its schedule, to be answered; it reads it and declines with a note.
    const guestCopy = await until("the guest's invitation", async () => {
      const { data } = await guest.mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: guest.box.mailboxId } } })
      return data!.data.find((e) => e.subject === "Invitation: Quarterly planning")
    }, 20_000)
    const onSchedule = await until("the invitation on the guest's schedule", async () => {
      const { data } = await guest.mailroom.GET("/v1/api/mailboxes/{mailboxId}/schedule", {
        params: { path: { mailboxId: guest.box.mailboxId }, query: { from: "2026-12-01T00:00:00Z", to: "2026-12-08T00:00:00Z" } }
      })
      return data!.data[0]
    }, 20_000)
    try {
      const frame = await invitations.next(20_000)
      expect([frame.event, JSON.parse(frame.data!).data]).toEqual(["invitation.received", {
        mailbox_id: guest.box.mailboxId,
        email_id: guestCopy.email_id,
        uid: meeting.uid,
        change: "new",
        recurrence_id: null,
        summary: "Quarterly planning",
        start: { date_time: "2026-12-03T14:00:00Z", date: null, time_zone: "Europe/Paris" },
        end: { date_time: "2026-12-03T15:00:00Z", date: null, time_zone: "Europe/Paris" },
        recurrence: "FREQ=WEEKLY;COUNT=4",
        organizer: { address: box.address, name: null },
        response: "needs_action"
      }])
    } catch (error) {
      invitations.close()
      throw error
    }
    expect(onSchedule).toEqual({
      mailbox_id: guest.box.mailboxId,
      uid: meeting.uid,
      recurrence_id: "2026-12-03T14:00:00Z",
      role: "attendee",
      meeting_id: null,
      email_id: guestCopy.email_id,
      summary: "Quarterly planning",
      location: "Room 4",
      url: "https://meet.example.test/q4",
      start: { date_time: "2026-12-03T14:00:00Z", date: null, time_zone: "Europe/Paris" },
      end: { date_time: "2026-12-03T15:00:00Z", date: null, time_zone: "Europe/Paris" },
      status: "confirmed",
      response: "needs_action",
      busy: true,
      organizer: { address: box.address, name: null }
    })
    // The organizer's agent listens for answers rather than polling.
    const answers = await openEvents(`${suite.url}/v1/events?types=meeting.answered`, { "x-api-key": box.user.apiKey })
    const read = await guest.mailroom.GET("/v1/api/emails/{emailId}/invitation", { params: { path: { emailId: guestCopy.email_id } } })
    expect(read.data!.data).toMatchObject({ uid: meeting.uid, respondable: true, organizer: { address: box.address } })
    const declined = await guest.mailroom.POST("/v1/api/emails/{emailId}/invitation/respond", {
      params: { path: { emailId: guestCopy.email_id } },
      body: { status: "declined", comment: "Away that week" }
    })
    expect(declined.response.status).toBe(202)
    const answered = await until("the guest's answer on the meeting", async () => {
      const { data } = await mailroom.GET("/v1/api/meetings/{meetingId}", meetingPath(meeting.meeting_id))
      const attendee = data!.data.attendees.find((a) => a.address === guest.box.address)
      return attendee?.status === "declined" ? attendee : undefined
    }, 20_000)
    expect(answered).toEqual({ address: guest.box.address, name: null, status: "declined", comment: "Away that week", responded_at: expect.any(String) })
    expect(await december(guest.mailroom, guest.box)).toEqual(weeks.map((start) => [start, "attendee", "declined", false, "confirmed"]))
    try {
      const frame = await answers.next(20_000)
      expect(frame.event).toBe("meeting.answered")
      expect(JSON.parse(frame.data!).data).toEqual({
        meeting_id: meeting.meeting_id,
        mailbox_id: box.mailboxId,
        uid: meeting.uid,
        summary: "Quarterly planning",
        attendee: answered,
        email_id: expect.stringMatching(/^eml_/)
      })
    } finally {
      answers.close()
    }

    // Moved an hour later, and the guest taken off: Ada gets the update (the next revision), the guest a cancellation.
    const moved = await mailroom.PATCH("/v1/api/meetings/{meetingId}", {
      ...meetingPath(meeting.meeting_id),
      body: { start: { date_time: "2026-12-03T15:00:00Z" }, end: { date_time: "2026-12-03T16:00:00Z" }, attendees: [ada] }
    })
    expect(moved.response.status).toBe(200)
    expect(moved.data!.data).toMatchObject({
      sequence: 1,
      start: { date_time: "2026-12-03T15:00:00Z" },
      attendees: [{ address: ada, name: "Ada Lovelace", status: "needs_action" }]
    })
    const update = await received(ada, "Updated invitation: Quarterly planning")
    expect(update.calendar).toMatchObject({ method: "REQUEST", uid: meeting.uid, sequence: 1, start: { date_time: "2026-12-03T15:00:00Z", time_zone: null } })
    expect(update.parsed.text).toContain("When: Thu, 03 Dec 2026 15:00 UTC – Thu, 03 Dec 2026 16:00 UTC, repeating")
    const goodbye = await until("the guest's cancellation", async () => {
      const { data } = await guest.mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: guest.box.mailboxId } } })
      return data!.data.find((e) => e.subject === "Cancelled: Quarterly planning")
    }, 20_000)
    const cancelledForGuest = await guest.mailroom.GET("/v1/api/emails/{emailId}/invitation", { params: { path: { emailId: goodbye.email_id } } })
    expect(cancelledForGuest.data!.data).toMatchObject({ method: "CANCEL", status: "cancelled", sequence: 1, respondable: false })
    // The guest's agent heard it; it is off the guest's schedule (shown when asked for, not busy), on the organizer's at its new time.
    try {
      const frame = await invitations.next(20_000)
      expect(JSON.parse(frame.data!).data).toMatchObject({ email_id: goodbye.email_id, uid: meeting.uid, change: "cancelled", response: "declined" })
    } finally {
      invitations.close()
    }
    await until("the cancellation on the guest's schedule", async () => (await december(guest.mailroom, guest.box)).length === 0 || undefined, 20_000)
    expect(await december(guest.mailroom, guest.box, { include_cancelled: "true" })).toEqual(
      weeks.map((start) => [start, "attendee", "declined", false, "cancelled"])
    )
    expect((await december(mailroom, box)).map(([start]) => start)).toEqual(weeks.map((start) => start.replace("T14", "T15")))

    // A change that changes nothing sends nothing.
    const before = world.mx.delivered().length
    const same = await mailroom.PATCH("/v1/api/meetings/{meetingId}", { ...meetingPath(meeting.meeting_id), body: { summary: "Quarterly planning" } })
    expect(same.data!.data.sequence).toBe(1)

    // Called off: Ada's calendar is told; the meeting is kept, cancelled; neither can happen twice.
    const cancelled = await mailroom.POST("/v1/api/meetings/{meetingId}/cancel", meetingPath(meeting.meeting_id))
    expect(cancelled.response.status).toBe(200)
    expect(cancelled.data!.data).toMatchObject({ status: "cancelled", sequence: 2 })
    expect(await december(mailroom, box)).toEqual([])
    const cancellation = await received(ada, "Cancelled: Quarterly planning")
    expect(cancellation.calendar).toMatchObject({ method: "CANCEL", status: "cancelled", sequence: 2 })
    expect(world.mx.delivered().length).toBe(before + 1)
    const again = await mailroom.POST("/v1/api/meetings/{meetingId}/cancel", meetingPath(meeting.meeting_id))
    expect([again.response.status, again.error?.error]).toEqual([409, {
      code: "CONFLICT",
      message: "The meeting is cancelled",
      details: { meeting_id: meeting.meeting_id, status: "cancelled" }
    }])
    expect((await mailroom.PATCH("/v1/api/meetings/{meetingId}", { ...meetingPath(meeting.meeting_id), body: { summary: "Revived" } })).error?.error.code)
      .toBe("CONFLICT")

    // Listed: by status, soonest first.
    const day = await mailroom.POST("/v1/api/mailboxes/{mailboxId}/meetings", {
      params: { path: { mailboxId: box.mailboxId } },
      body: { summary: "Offsite", start: { date: "2026-12-01" }, end: { date: "2026-12-03" }, attendees: [ada] }
    })
    expect(day.data!.data).toMatchObject({ start: { date_time: null, date: "2026-12-01" }, end: { date: "2026-12-03" } })
    expect((await received(ada, "Invitation: Offsite")).parsed.text).toContain("When: 2026-12-01 (2 days)")
    const listed = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/meetings", { params: { path: { mailboxId: box.mailboxId }, query: { sort: "start:asc" } } })
    expect(listed.data!.data.map((m) => m.summary)).toEqual(["Offsite", "Quarterly planning"])
    expect(listed.data!.meta).toEqual({ total: 2, limit: 20, offset: 0, hasMore: false })
    const confirmed = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/meetings", { params: { path: { mailboxId: box.mailboxId }, query: { status: "confirmed" } } })
    expect(confirmed.data!.data.map((m) => m.summary)).toEqual(["Offsite"])
  })

  it("an invitation filed as spam stays off the schedule until the mailbox takes it out of spam", async () => {
    const { box, mailroom } = await owner()
    const guest = await owner()
    // The guest files stand-ups as spam as they arrive.
    const filter = await guest.mailroom.POST("/v1/api/filters", {
      body: { name: "No stand-ups", conditions: { subject_contains: ["Stand-up"] }, actions: { add_labels: ["spam"] } }
    })
    expect(filter.response.status).toBe(201)
    const invitations = await openEvents(`${suite.url}/v1/events?types=invitation.received`, { "x-api-key": guest.box.user.apiKey })
    try {
      const invite = async (summary: string, day: string) => {
        const created = await mailroom.POST("/v1/api/mailboxes/{mailboxId}/meetings", {
          params: { path: { mailboxId: box.mailboxId } },
          body: { summary, start: { date_time: `${day}T09:00:00Z` }, end: { date_time: `${day}T09:15:00Z` }, attendees: [guest.box.address] }
        })
        expect(created.response.status).toBe(201)
        return until(`"${summary}" in the guest's mailbox`, async () => {
          const { data } = await guest.mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: guest.box.mailboxId } } })
          return data!.data.find((e) => e.subject === `Invitation: ${summary}`)
        }, 20_000)
      }
      const standUp = await invite("Stand-up", "2027-01-12")
      expect(standUp.labels).toContain("spam")
      const review = await invite("Design review", "2027-01-13")
      const onSchedule = async () => {
        const { data } = await guest.mailroom.GET("/v1/api/mailboxes/{mailboxId}/schedule", {
          params: { path: { mailboxId: guest.box.mailboxId }, query: { from: "2027-01-11T00:00:00Z", to: "2027-01-18T00:00:00Z" } }
        })
        return data!.data.map((o) => o.summary)
      }
      // The review, received after it, is announced and kept; the stand-up is neither.
      const first = await invitations.next(20_000)
      expect(JSON.parse(first.data!).data).toMatchObject({ email_id: review.email_id, summary: "Design review", change: "new" })
      expect(await onSchedule()).toEqual(["Design review"])

      // Taken out of spam by hand: read as if it had just arrived.
      const cleared = await guest.mailroom.PATCH("/v1/api/emails/{emailId}", {
        params: { path: { emailId: standUp.email_id } },
        body: { remove_labels: ["spam"] }
      })
      expect(cleared.response.status).toBe(200)
      const second = await invitations.next(20_000)
      expect(JSON.parse(second.data!).data).toMatchObject({ email_id: standUp.email_id, summary: "Stand-up", change: "new", response: "needs_action" })
      expect(await onSchedule()).toEqual(["Stand-up", "Design review"])
    } finally {
      invitations.close()
    }
  })

  it("answers for several of the account's mailboxes at once: their schedules merged, the times all are free; and its refusals", async () => {
    const { box, mailroom } = await owner()
    const second = await newBox(suite.url, { user: box.user })
    const made = await mailroom.POST("/v1/api/mailboxes/{mailboxId}/meetings", {
      params: { path: { mailboxId: box.mailboxId } },
      body: { summary: "Sync", start: { date_time: "2026-12-03T10:00:00Z" }, end: { date_time: "2026-12-03T11:00:00Z" }, attendees: ["ada@partner.test"] }
    })
    expect(made.response.status).toBe(201)
    // The second mailbox has nothing on, so the two are free when the first is.
    const thatDay = { from: "2026-12-03T00:00:00Z", to: "2026-12-04T00:00:00Z" }
    const together = await mailroom.GET("/v1/api/availability", {
      params: { query: { mailbox_ids: `${second.mailboxId},${box.mailboxId}`, ...thatDay, duration_minutes: 60, step_minutes: 60 } }
    })
    expect(together.data?.data.map((slot) => slot.start)).toEqual(["09:00", "11:00", "12:00", "13:00", "14:00", "15:00", "16:00"].map((t) => `2026-12-03T${t}:00+00:00`))
    const merged = await mailroom.GET("/v1/api/schedule", { params: { query: { mailbox_ids: `${second.mailboxId},${box.mailboxId}`, ...thatDay } } })
    expect(merged.data?.data.map((o) => [o.mailbox_id, o.summary, o.role])).toEqual([[box.mailboxId, "Sync", "organizer"]])

    const shared = (path: "/v1/api/schedule" | "/v1/api/availability", query: Record<string, string>, client = mailroom) =>
      client.GET(path, { params: { query: query as never } })
    const unnamed = await shared("/v1/api/availability", {})
    expect([unnamed.response.status, unnamed.error?.error.code, unnamed.error?.error.details]).toEqual([400, "VALIDATION_ERROR", { mailbox_ids: "is required" }])
    const crowd = Array.from({ length: 21 }, (_, i) => `mbx_${i}`).join(",")
    expect((await shared("/v1/api/schedule", { mailbox_ids: crowd })).error?.error.details).toEqual({ mailbox_ids: "must name at most 20 mailboxes" })
    expect((await shared("/v1/api/schedule", { mailbox_ids: `${box.mailboxId},` })).error?.error.details).toEqual({ "mailbox_ids.1": "must not name an empty mailbox id" })
    const stranger = await owner()
    for (const path of ["/v1/api/schedule", "/v1/api/availability"] as const) {
      const notTheirs = await shared(path, { mailbox_ids: `${stranger.box.mailboxId},${box.mailboxId},mbx_missing` }, stranger.mailroom)
      expect([notTheirs.response.status, notTheirs.error?.error]).toEqual([404, { code: "NOT_FOUND", message: "Mailbox not found", details: { mailbox_id: box.mailboxId } }])
    }
  })

  it("reminds the mailbox of a meeting ten minutes before it starts, on its event stream", async () => {
    const { box, mailroom } = await owner()
    const reminders = await openEvents(`${suite.url}/v1/events?types=schedule.reminder`, { "x-api-key": box.user.apiKey })
    try {
      // Five minutes from now, to the second: inside the ten minutes, so the workers' next look (every 15 s) tells it.
      const start = new Date(Math.ceil(Date.now() / 1000) * 1000 + 5 * 60_000)
      const created = await mailroom.POST("/v1/api/mailboxes/{mailboxId}/meetings", {
        params: { path: { mailboxId: box.mailboxId } },
        body: {
          summary: "Stand-up",
          url: "https://meet.example.test/standup",
          start: { date_time: start.toISOString() },
          end: { date_time: new Date(start.getTime() + 15 * 60_000).toISOString() },
          attendees: ["ada@partner.test"]
        }
      })
      expect(created.response.status).toBe(201)
      const frame = await reminders.next(30_000)
      expect(frame.event).toBe("schedule.reminder")
      const reminder = JSON.parse(frame.data!).data
      expect(reminder).toMatchObject({
        mailbox_id: box.mailboxId,
        uid: created.data!.data.uid,
        role: "organizer",
        meeting_id: created.data!.data.meeting_id,
        summary: "Stand-up",
        url: "https://meet.example.test/standup",
        start: { date_time: start.toISOString().replace(".000Z", "Z") },
        response: "accepted"
      })
      expect(reminder.starts_in_minutes).toBeGreaterThanOrEqual(4)
      expect(reminder.starts_in_minutes).toBeLessThanOrEqual(5)
    } finally {
      reminders.close()
    }
  })

  it("refuses what cannot be scheduled or found, each with its status, code and details, and sends nothing", async () => {
    const { box, mailroom } = await owner()
    const before = world.mx.delivered().length
    const schedule = (body: Record<string, unknown>, mailboxId = box.mailboxId) =>
      mailroom.POST("/v1/api/mailboxes/{mailboxId}/meetings", { params: { path: { mailboxId } }, body: body as never })
    const base = { summary: "Sync", start: { date_time: "2026-12-03T10:00:00Z" }, end: { date_time: "2026-12-03T11:00:00Z" }, attendees: ["ada@partner.test"] }

    const backwards = await schedule({ ...base, end: { date_time: "2026-12-03T09:00:00Z" } })
    expect([backwards.response.status, backwards.error?.error]).toEqual([400, { code: "VALIDATION_ERROR", message: "end: must be after start", details: { end: "must be after start" } }])
    expect((await schedule({ ...base, end: { date: "2026-12-04" } })).error?.error.details)
      .toEqual({ end: "must be a date when start is a date, and a date_time when start is a date_time" })
    expect((await schedule({ ...base, attendees: ["ada@partner.test", box.address] })).error?.error.details)
      .toEqual({ "attendees.1": "is the organizing mailbox itself" })
    const malformed = await schedule({ summary: "", start: { date_time: "tomorrow" }, end: { date: "2026-02-30" }, recurrence: "EVERY=WEEK", attendees: [] })
    expect(malformed.response.status).toBe(400)
    expect(malformed.error!.error.details).toMatchObject({
      "start.date_time": "must be an ISO 8601 time with a zone, such as 2026-12-01T09:00:00Z, or a local time such as 2026-12-01T10:00:00 with time_zone",
      "end.date": "must be a day such as 2026-12-24",
      recurrence: 'must be an iCalendar RRULE such as FREQ=WEEKLY;BYDAY=TH;COUNT=4: this one has EVERY, which is no part of a repeat rule'
    })
    expect(Object.keys(malformed.error!.error.details!).sort()).toEqual(["attendees", "end.date", "recurrence", "start.date_time", "summary"])
    // A rule the attendees' calendars could not read, or the schedule walk, is refused by its field (it was a 500, or sent).
    for (const [recurrence, problem] of [["FREQ=MONTHLY;BYDAY=9MO", "numbers a monthly BYDAY at most 5"], ["FREQ=WEEKLY;INTERVAL=0", "has INTERVAL=0"]] as const) {
      const refused = await schedule({ ...base, recurrence })
      expect([refused.response.status, refused.error?.error.details?.["recurrence"]]).toEqual([400, expect.stringContaining(problem)])
    }
    expect((await schedule({ ...base, summary: "s".repeat(256), attendees: Array.from({ length: 51 }, (_, i) => `guest${i}@partner.test`) }))
      .error?.error.details).toEqual({ summary: "must be at most 255 characters", attendees: "must list at most 50 attendees" })
    // A day that does not exist is refused, not rolled over into March.
    expect((await schedule({ ...base, start: { date_time: "2026-02-30T10:00:00Z" }, end: { date_time: "2026-02-28T24:00:00Z" } })).error?.error.details).toEqual({
      "start.date_time": "must be an ISO 8601 time with a zone, such as 2026-12-01T09:00:00Z, or a local time such as 2026-12-01T10:00:00 with time_zone",
      "end.date_time": "must be an ISO 8601 time with a zone, such as 2026-12-01T09:00:00Z, or a local time such as 2026-12-01T10:00:00 with time_zone"
    })
    expect((await schedule({ ...base, start: { date_time: "2026-12-03T10:00:00Z", time_zone: "Mars/Olympus" }, end: { date: "2026-12-04", time_zone: "UTC" } }))
      .error?.error.details).toEqual({
      "start.time_zone": "must be an IANA time zone such as Europe/Paris",
      end: "time_zone goes with a date_time, not a whole day"
    })
    expect((await schedule({ ...base, start: { date_time: "2026-12-03T10:00:00Z", date: "2026-12-03" }, end: {} })).error?.error.details).toEqual({
      start: "must be {\"date_time\": an ISO 8601 time with its zone} or {\"date\": YYYY-MM-DD}, one of the two",
      end: "must be {\"date_time\": an ISO 8601 time with its zone} or {\"date\": YYYY-MM-DD}, one of the two"
    })

    const elsewhere = await schedule(base, "mbx_missing")
    expect([elsewhere.response.status, elsewhere.error?.error]).toEqual([404, { code: "NOT_FOUND", message: "Mailbox not found", details: { mailbox_id: "mbx_missing" } }])
    const missing = await mailroom.GET("/v1/api/meetings/{meetingId}", meetingPath("mtg_missing"))
    expect([missing.response.status, missing.error?.error]).toEqual([404, { code: "NOT_FOUND", message: "Meeting not found", details: { meeting_id: "mtg_missing" } }])

    // Another account's meeting is not found by any route.
    const made = await schedule(base)
    expect(made.response.status).toBe(201)
    const stranger = await owner()
    const id = made.data!.data.meeting_id
    for (const answer of [
      await stranger.mailroom.GET("/v1/api/meetings/{meetingId}", meetingPath(id)),
      await stranger.mailroom.PATCH("/v1/api/meetings/{meetingId}", { ...meetingPath(id), body: { summary: "Mine" } }),
      await stranger.mailroom.POST("/v1/api/meetings/{meetingId}/cancel", meetingPath(id))
    ]) expect([answer.response.status, answer.error?.error.details]).toEqual([404, { meeting_id: id }])
    expect((await stranger.mailroom.GET("/v1/api/mailboxes/{mailboxId}/meetings", { params: { path: { mailboxId: box.mailboxId } } })).response.status).toBe(404)

    // The schedule's refusals.
    const scheduleOf = (query: Record<string, string>, client = mailroom) =>
      client.GET("/v1/api/mailboxes/{mailboxId}/schedule", { params: { path: { mailboxId: box.mailboxId }, query: query as never } })
    const inverted = await scheduleOf({ from: "2026-12-02T00:00:00Z", to: "2026-12-01T00:00:00Z" })
    expect([inverted.response.status, inverted.error?.error]).toEqual([400, { code: "VALIDATION_ERROR", message: "to: must be after from", details: { to: "must be after from" } }])
    expect((await scheduleOf({ from: "2026-01-01T00:00:00Z", to: "2027-06-01T00:00:00Z" })).error?.error.details).toEqual({ to: "must be at most 366 days after from" })
    expect((await scheduleOf({ from: "2026-02-30T00:00:00Z" })).error?.error.details).toEqual({ from: "must be an ISO 8601 time with a zone, such as 2026-12-01T09:00:00Z" })
    const unreadable = await scheduleOf({ from: "monday", limit: "0", include_cancelled: "yes" })
    expect([unreadable.response.status, unreadable.error?.error.details]).toEqual([400, {
      from: "must be an ISO 8601 time with a zone, such as 2026-12-01T09:00:00Z",
      limit: "must be an integer from 1 to 500",
      include_cancelled: "must be one of true, false"
    }])
    // Free time: the meeting made above (10:00-11:00 UTC on 3 December) is not.
    const free = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/availability", {
      params: { path: { mailboxId: box.mailboxId }, query: { from: "2026-12-03T00:00:00Z", to: "2026-12-04T00:00:00Z", duration_minutes: 60, step_minutes: 60 } }
    })
    expect(free.data?.data.map((slot) => slot.start)).toEqual(["09:00", "11:00", "12:00", "13:00", "14:00", "15:00", "16:00"].map((t) => `2026-12-03T${t}:00+00:00`))
    const unworkable = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/availability", {
      params: { path: { mailboxId: box.mailboxId }, query: { hours: "17:00-09:00", weekdays: "mon", time_zone: "Mars/Olympus", duration_minutes: 2 } }
    })
    expect([unworkable.response.status, unworkable.error?.error.details]).toEqual([400, {
      hours: "must be an opening and a closing time such as 09:00-17:00, the first earlier",
      weekdays: "must be weekdays 1 (Monday) to 7 (Sunday), separated by commas",
      time_zone: "must be an IANA time zone such as Europe/Paris",
      duration_minutes: "must be an integer from 5 to 1440"
    }])
    const strangers = await scheduleOf({}, stranger.mailroom)
    expect([strangers.response.status, strangers.error?.error]).toEqual([404, { code: "NOT_FOUND", message: "Mailbox not found", details: { mailbox_id: box.mailboxId } }])

    // Only the one meeting made went out. (Waited for by count: an earlier test sent ada an "Invitation: Sync" too.)
    await until("the one invitation delivered", async () => (world.mx.delivered().length > before ? true : undefined))
    expect(world.mx.delivered().length).toBe(before + 1)
  })
})
