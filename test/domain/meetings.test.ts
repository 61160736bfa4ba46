/**
 * Attendees' answers to a mailbox's meetings (Meetings.recordAnswer) in process, over the suite's
 * database, with the send path in process: an answer is kept on the meeting; one received before the
 * answer kept (arriving late) is not; one to a revision before the meeting's time last changed (an
 * accept of the old time, arriving after the move) is not, while a change that keeps the time keeps
 * the question, so answers to it still count; a reply naming no revision is taken for the current one;
 * someone the invitation was forwarded to is added. The wiring (mail received by the worker, the
 * routes, the event stream) is test/outbound/meetings.test.ts's.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Either, Layer, ParseResult, Schema } from "effect"
import { Meetings } from "../../services/meetings/meetings.ts"
import { MeetingInput } from "../../services/meetings/schemas.ts"
import { testDatabase } from "../support/database.ts"
import { inProcessOutbound } from "../support/outbound-services.ts"
import { insertMailbox } from "../support/seed-mail.ts"
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
        let n = 0
        /**
         * `text` received by the mailbox `minutesAgo` minutes ago, as the worker hands it over, from
         * `from` (by default the first attendee it answers for: their own answer).
         */
        const receive = (text: string, minutesAgo = 0, from = /mailto:(\S+)/.exec(text)![1]!) =>
          meetings.recordAnswer({ emailId: `eml_answer_${++n}`, mailboxId: box.mailboxId, receivedAt: new Date(Date.now() - minutesAgo * 60_000), from }, text)
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
