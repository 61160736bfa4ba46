/**
 * Attendees' answers to a mailbox's meetings (Meetings.recordAnswer) in process, over the suite's
 * database, with the send path in process: an answer is kept on the meeting; one received before the
 * answer kept (arriving late) is not; one to a revision before the meeting's time last changed (an
 * accept of the old time, arriving after the move) is not, while a change that keeps the time keeps
 * the question, so answers to it still count; a reply naming no revision is taken for the current one;
 * someone the invitation was forwarded to is added; an answer counts only from its attendee's own From, vouched
 * for (not labelled unauthenticated), and one refused is kept with why. The wiring (mail received by the worker, the
 * routes, the event stream) is test/outbound/meetings.test.ts's.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Either, Layer, ParseResult, Schema } from "effect"
import { Meetings } from "../../services/meetings/meetings.ts"
import { MeetingInput } from "../../services/meetings/schemas.ts"
import { Schedule } from "../../services/schedule/schedule.ts"
import { testDatabase } from "../support/database.ts"
import { inProcessOutbound } from "../support/outbound-services.ts"
import { insertEmail, insertMailbox } from "../support/seed-mail.ts"
import { insertUser } from "../support/users.ts"

const services = Meetings.Default.pipe(Layer.provideMerge(inProcessOutbound))

/** A calendar's REPLY: `who` answers `status` to revision `sequence` (none named when undefined). */
const reply = (uid: string, who: string, status: string, sequence: number | undefined, comment?: string) =>
  [
    "BEGIN:VCALENDAR",
    "VERSION:2.0",
    "METHOD:REPLY",
    "BEGIN:VEVENT",
    `UID:${uid}`,
    ...(sequence === undefined ? [] : [`SEQUENCE:${sequence}`]),
    "DTSTART:20270114T150000Z",
    `ATTENDEE;PARTSTAT=${status}:mailto:${who}`,
    ...(comment === undefined ? [] : [`COMMENT:${comment}`]),
    "END:VEVENT",
    "END:VCALENDAR",
    ""
  ].join("\r\n")

layer(testDatabase, { timeout: "120 seconds" })("meetings' answers", (it) => {
  it.layer(services)("Meetings.recordAnswer", (it) => {
    it.effect("keeps answers to the question asked: not a late older answer, not an answer to the time before a move", () =>
      Effect.gen(function*() {
        const meetings = yield* Meetings
        const owner = yield* insertUser("pro")
        const box = yield* insertMailbox(owner)
        const meeting = yield* meetings.create(owner.userId, box.mailboxId, {
          summary: "Quarterly plan",
          start: { date_time: "2027-01-14T15:00:00Z" },
          end: { date_time: "2027-01-14T16:00:00Z" },
          attendees: [{ address: "ada@partner.test" }, { address: "bob@partner.test" }]
        })
        /**
         * `text` received by the mailbox `minutesAgo` minutes ago, as the worker hands it over, from
         * `from` (by default the first attendee it answers for: their own answer), vouched for unless
         * `authenticated` is false.
         */
        const receive = (text: string, minutesAgo = 0, from = /mailto:(\S+)/.exec(text)![1]!, authenticated = true) =>
          Effect.flatMap(insertEmail(box, { subject: "Answer", receivedMinutesAgo: minutesAgo, from }), ({ id }) =>
            meetings.recordAnswer({ emailId: id, mailboxId: box.mailboxId, receivedAt: new Date(Date.now() - minutesAgo * 60_000), sender: { from, authenticated } }, text))
        const answers = Effect.map(meetings.get(owner.userId, meeting.meeting_id), (m) =>
          Object.fromEntries(m.attendees.map((a) => [a.address, [a.status, a.comment]])))

        // An answer is its sender's own: a REPLY from anyone else (the invitation's UID is no secret) changes nothing.
        expect(yield* receive(reply(meeting.uid, "bob@partner.test", "DECLINED", 0), 30, "mallory@elsewhere.test")).toBe(false)
        expect(yield* receive(reply(meeting.uid, "bob@partner.test", "DECLINED", 0), 30, "ada@partner.test")).toBe(false)
        expect(yield* answers).toEqual({ "ada@partner.test": ["needs_action", null], "bob@partner.test": ["needs_action", null] })
        expect(yield* receive(reply(meeting.uid, "ada@partner.test", "ACCEPTED", 0, "See you there"), 10, "Ada@Partner.test")).toBe(true)
        expect(yield* answers).toEqual({ "ada@partner.test": ["accepted", "See you there"], "bob@partner.test": ["needs_action", null] })
        // Ada's earlier answer, delayed on the way: the newer one stands.
        expect(yield* receive(reply(meeting.uid, "ada@partner.test", "DECLINED", 0), 20)).toBe(false)
        expect((yield* answers)["ada@partner.test"]).toEqual(["accepted", "See you there"])

        // Moved a day later: revision 1 asks everyone again.
        const moved = yield* meetings.update(owner.userId, meeting.meeting_id, {
          start: { date_time: "2027-01-15T15:00:00Z" },
          end: { date_time: "2027-01-15T16:00:00Z" }
        })
        expect(moved.sequence).toBe(1)
        expect(yield* answers).toEqual({ "ada@partner.test": ["needs_action", null], "bob@partner.test": ["needs_action", null] })
        // Bob accepted the old time; his calendar's answer arrives after the move: it answers nothing asked now.
        expect(yield* receive(reply(meeting.uid, "bob@partner.test", "ACCEPTED", 0))).toBe(false)
        expect((yield* answers)["bob@partner.test"]).toEqual(["needs_action", null])
        expect(yield* receive(reply(meeting.uid, "ada@partner.test", "DECLINED", 1, "Travelling"))).toBe(true)

        // A new room (revision 2) keeps the time, so the question: an answer to revision 1 still counts.
        const roomed = yield* meetings.update(owner.userId, meeting.meeting_id, { location: "Room 4" })
        expect(roomed.sequence).toBe(2)
        expect(yield* receive(reply(meeting.uid, "bob@partner.test", "TENTATIVE", 1))).toBe(true)
        // The time it has, written another way, changes nothing: no new revision, every answer kept.
        const same = yield* meetings.update(owner.userId, meeting.meeting_id, {
          start: { date_time: "2027-01-15T16:00:00+01:00" },
          end: { date_time: "2027-01-15T16:00:00Z" }
        })
        expect(same.sequence).toBe(2)
        expect((yield* answers)["bob@partner.test"]).toEqual(["tentative", null])
        // A reply naming no revision is taken for the current one; someone it was forwarded to is added.
        expect(yield* receive(reply(meeting.uid, "carol@partner.test", "ACCEPTED", undefined))).toBe(true)
        expect(yield* answers).toEqual({
          "ada@partner.test": ["declined", "Travelling"],
          "bob@partner.test": ["tentative", null],
          "carol@partner.test": ["accepted", null]
        })
      }))

    it.effect("an answer counts only from its attendee's From vouched for; one refused is kept with why, and counts once vouched for", () =>
      Effect.gen(function*() {
        const meetings = yield* Meetings
        const sql = yield* SqlClient.SqlClient
        const owner = yield* insertUser("pro")
        const box = yield* insertMailbox(owner)
        const meeting = yield* meetings.create(owner.userId, box.mailboxId, {
          summary: "Board review",
          start: { date_time: "2027-01-14T15:00:00Z" },
          end: { date_time: "2027-01-14T16:00:00Z" },
          attendees: [{ address: "carol@example.com" }]
        })
        const answer = (from: string, authenticated: boolean) =>
          Effect.gen(function*() {
            const { id } = yield* insertEmail(box, { subject: "Declined: Board review", receivedMinutesAgo: 0, from, labels: ["inbound", "unread"] })
            const at = new Date()
            const counted = yield* meetings.recordAnswer(
              { emailId: id, mailboxId: box.mailboxId, receivedAt: at, sender: { from, authenticated } },
              reply(meeting.uid, "carol@example.com", "DECLINED", 0)
            )
            const refused = yield* sql<{ reason: string }>`SELECT reason FROM calendar_refusals WHERE email_id = ${id}`
            return { id, counted, refused: refused[0]?.reason ?? null }
          })
        const carol = Effect.map(meetings.get(owner.userId, meeting.meeting_id), (m) => m.attendees[0]!.status)
        // Carol's address in From, but nothing vouches for it (an attacker's envelope, no SPF, no DMARC): not hers.
        expect(yield* answer("carol@example.com", false)).toMatchObject({ counted: false, refused: "unverified_sender" })
        expect(yield* answer("attacker@evil.example", false)).toMatchObject({ counted: false, refused: "not_attendee" })
        expect(yield* answer("attacker@evil.example", true)).toMatchObject({ counted: false, refused: "not_attendee" })
        expect(yield* carol).toBe("needs_action")
        // Carol's own, vouched for; and the refused one once vouched for (a person took `unauthenticated` off it) is refused no more.
        const hers = yield* answer("Carol@Example.com", true)
        expect(hers).toMatchObject({ counted: true, refused: null })
        expect(yield* carol).toBe("declined")
        const forged = yield* answer("carol@example.com", false)
        expect(forged.refused).toBe("unverified_sender")
        expect(yield* meetings.recordAnswer(
          { emailId: forged.id, mailboxId: box.mailboxId, receivedAt: new Date(), sender: { from: "carol@example.com", authenticated: true } },
          reply(meeting.uid, "carol@example.com", "DECLINED", 0)
        )).toBe(true)
        expect(yield* sql`SELECT 1 FROM calendar_refusals WHERE email_id = ${forged.id}`).toEqual([])
      }))
  })
})

layer(testDatabase, { timeout: "120 seconds" })("meetings' times", (it) => {
  it.layer(Layer.merge(Meetings.Default, Schedule.Default).pipe(Layer.provideMerge(inProcessOutbound)))("Meetings.create and update", (it) => {
    it.effect("a local time the clocks pass twice is on the schedule at the first pass, as the meeting answers it, repeats too; free time leaves it", () =>
      Effect.gen(function*() {
        const meetings = yield* Meetings
        const schedule = yield* Schedule
        const owner = yield* insertUser("pro")
        const box = yield* insertMailbox(owner)
        const meet = (summary: string, zone: string, start: string, end: string, recurrence?: string) =>
          meetings.create(owner.userId, box.mailboxId, {
            summary,
            start: { date_time: start, time_zone: zone },
            end: { date_time: end, time_zone: zone },
            attendees: ["ada@partner.test"],
            ...(recurrence === undefined ? {} : { recurrence })
          })
        // Paris goes back from 03:00 (+02:00) to 02:00 (+01:00); New York from 02:00 (-04:00) to 01:00 (-05:00); Lord Howe from 02:00 (+11:00) to 01:30 (+10:30).
        const paris = yield* meet("Paris", "Europe/Paris", "2027-10-31T02:30", "2027-10-31T02:45")
        expect([paris.start.date_time, paris.end.date_time]).toEqual(["2027-10-31T00:30:00Z", "2027-10-31T00:45:00Z"])
        yield* meet("New York", "America/New_York", "2027-11-07T01:30", "2027-11-07T01:45")
        yield* meet("New York nightly", "America/New_York", "2027-11-05T01:10", "2027-11-05T01:20", "FREQ=DAILY;COUNT=4")
        yield* meet("Lord Howe", "Australia/Lord_Howe", "2027-04-04T01:45", "2027-04-04T01:55")
        const on = (from: string, to: string) =>
          Effect.map(schedule.list(owner.userId, [box.mailboxId], { from, to }), (page) => page.data.map((o) => [o.summary, o.start.date_time, o.end.date_time]))
        expect(yield* on("2027-10-30T00:00:00Z", "2027-11-09T00:00:00Z")).toEqual([
          ["Paris", "2027-10-31T00:30:00Z", "2027-10-31T00:45:00Z"],
          ["New York nightly", "2027-11-05T05:10:00Z", "2027-11-05T05:20:00Z"],
          ["New York nightly", "2027-11-06T05:10:00Z", "2027-11-06T05:20:00Z"],
          ["New York nightly", "2027-11-07T05:10:00Z", "2027-11-07T05:20:00Z"],
          ["New York", "2027-11-07T05:30:00Z", "2027-11-07T05:45:00Z"],
          ["New York nightly", "2027-11-08T06:10:00Z", "2027-11-08T06:20:00Z"]
        ])
        expect(yield* on("2027-04-03T00:00:00Z", "2027-04-05T00:00:00Z")).toEqual([["Lord Howe", "2027-04-03T14:45:00Z", "2027-04-03T14:55:00Z"]])
        // From 02:00 to 03:00 in Paris that night, two hours pass: free but for the meeting's quarter of an hour at the first 02:30.
        const free = yield* schedule.availability(owner.userId, [box.mailboxId], {
          from: "2027-10-30T12:00:00Z",
          to: "2027-11-01T00:00:00Z",
          time_zone: "Europe/Paris",
          hours: "02:00-03:00",
          weekdays: "7",
          duration_minutes: 30,
          step_minutes: 30
        })
        expect(free.data.map((slot) => slot.start)).toEqual(["2027-10-31T02:00:00+02:00", "2027-10-31T02:00:00+01:00", "2027-10-31T02:30:00+01:00"])
      }))

    it.effect("a repeat rule whose UNTIL is not of the start's kind is 400 VALIDATION_ERROR on recurrence, and nothing is sent", () =>
      Effect.gen(function*() {
        const meetings = yield* Meetings
        const owner = yield* insertUser("pro")
        const box = yield* insertMailbox(owner)
        const timed = { summary: "Sync", start: { date_time: "2027-01-04T10:00:00Z" }, end: { date_time: "2027-01-04T11:00:00Z" }, attendees: ["ada@partner.test"] }
        const allDay = { summary: "Offsite", start: { date: "2027-01-04" }, end: { date: "2027-01-05" }, attendees: ["ada@partner.test"] }
        const utcUntil = "must end with UNTIL as a UTC date-time such as 20270115T235959Z, as start is a date_time"
        const dateUntil = "must end with UNTIL as a date such as 20270115, as start is a whole day (date)"
        const refused = (message: string) => ({ _tag: "ValidationError", status: 400, code: "VALIDATION_ERROR", details: { recurrence: message } })
        expect(yield* Effect.flip(meetings.create(owner.userId, box.mailboxId, { ...timed, recurrence: "FREQ=DAILY;UNTIL=20270115" }))).toMatchObject(refused(utcUntil))
        // A local UNTIL too: with a zone (or in UTC) the start has, RFC 5545 wants it in UTC.
        expect(yield* Effect.flip(meetings.create(owner.userId, box.mailboxId, {
          ...timed,
          start: { date_time: "2027-01-04T10:00", time_zone: "Europe/Paris" },
          end: { date_time: "2027-01-04T11:00", time_zone: "Europe/Paris" },
          recurrence: "FREQ=DAILY;UNTIL=20270115T100000"
        }))).toMatchObject(refused(utcUntil))
        expect(yield* Effect.flip(meetings.create(owner.userId, box.mailboxId, { ...allDay, recurrence: "FREQ=DAILY;UNTIL=20300110T000000Z" }))).toMatchObject(refused(dateUntil))
        expect((yield* meetings.list(owner.userId, box.mailboxId, { limit: 10, offset: 0 }, { field: "created_at", direction: "desc" }, undefined)).total).toBe(0)
        // Of the right kind, each is taken; a change to the other kind, of the rule or of the start, is refused the same way.
        const sync = yield* meetings.create(owner.userId, box.mailboxId, { ...timed, recurrence: "FREQ=DAILY;UNTIL=20270115T235959Z" })
        const offsite = yield* meetings.create(owner.userId, box.mailboxId, { ...allDay, recurrence: "FREQ=WEEKLY;UNTIL=20270301" })
        expect([sync.recurrence, offsite.recurrence]).toEqual(["FREQ=DAILY;UNTIL=20270115T235959Z", "FREQ=WEEKLY;UNTIL=20270301"])
        expect(yield* Effect.flip(meetings.update(owner.userId, sync.meeting_id, { recurrence: "FREQ=DAILY;UNTIL=20270115" }))).toMatchObject(refused(utcUntil))
        expect(yield* Effect.flip(meetings.update(owner.userId, sync.meeting_id, { start: allDay.start, end: allDay.end }))).toMatchObject(refused(dateUntil))
        expect((yield* meetings.get(owner.userId, sync.meeting_id)).sequence).toBe(0)
      }))
  })
})

describe("a meeting's recurrence", () => {
  const base = { summary: "Sync", start: { date_time: "2026-12-03T10:00:00Z" }, end: { date_time: "2026-12-03T11:00:00Z" }, attendees: ["ada@partner.test"] }
  const refusals = (recurrence: string) =>
    Either.match(Schema.decodeUnknownEither(MeetingInput)({ ...base, recurrence }), {
      // The rule's own message, without the union's other members (null, absent) each refusing it too.
      onLeft: (error) =>
        ParseResult.ArrayFormatter.formatErrorSync(error).filter((issue) => !issue.message.startsWith("Expected "))
          .map((issue) => [issue.path.join("."), issue.message]),
      onRight: () => []
    })

  it("is at most hourly, and names at most 24 times of day (the schedule walks no finer rule)", () => {
    const hourly = ["recurrence", "must repeat at most hourly (FREQ=HOURLY, DAILY, WEEKLY, MONTHLY or YEARLY)"]
    expect(refusals("FREQ=MINUTELY;COUNT=10")).toEqual([hourly])
    expect(refusals("INTERVAL=5;FREQ=secondly")).toEqual([hourly])
    expect(refusals("FREQ=DAILY;BYHOUR=9,10;BYMINUTE=0,5,10,15,20,25,30,35,40,45,50,55,59"))
      .toEqual([["recurrence", "must name at most 24 times of day (BYHOUR × BYMINUTE × BYSECOND values)"]])
    expect(refusals("FREQ=DAILY;BYHOUR=9,10;BYMINUTE=0,5,10,15,20,25,30,35,40,45,50,55")).toEqual([])
    expect(refusals("FREQ=HOURLY;COUNT=8")).toEqual([])
  })
})
