/**
 * Reading invitations as Outlook, Google and hand-written calendars send them, and the REPLY an
 * attendee's answer becomes (services/invitations/icalendar.ts). Pure: no database, no server.
 */
import { Either } from "effect"
import * as fs from "node:fs"
import { describe, expect, it } from "vitest"
import ICAL from "ical.js"
import { describeRule, organizerCalendar, parseCalendar, readInvitation, replyAnswers, replyCalendar } from "../../services/invitations/icalendar.ts"
import { outlookCentralEurope } from "../support/outlook-central-europe.ts"

const fixture = (name: string) => fs.readFileSync(new URL(`../fixtures/calendars/${name}`, import.meta.url), "utf8")
const calendar = (...lines: Array<string>) => ["BEGIN:VCALENDAR", "VERSION:2.0", ...lines, "END:VCALENDAR", ""].join("\r\n")
const event = (...lines: Array<string>) => ["BEGIN:VEVENT", ...lines, "END:VEVENT"]
const read = (text: string) => Either.getOrThrow(readInvitation(text))
/** The zone the calendar's first event's start is read in. */
const zoneOfStart = (text: string) => {
  const event = Either.getOrThrow(parseCalendar(text)).getFirstSubcomponent("vevent")!
  return (event.getFirstPropertyValue("dtstart") as unknown as { readonly zone: unknown }).zone
}

describe("reading an invitation", () => {
  it("reads Outlook's: times through its own VTIMEZONE (a Windows zone name), the repeat rule, people with their roles and answers", () => {
    expect(read(fixture("outlook-request.ics"))).toEqual({
      method: "REQUEST",
      uid: "040000008200E00074C5B7101A82E00800000000",
      sequence: 2,
      recurrence_id: null,
      status: "confirmed",
      summary: "Planning",
      description: "Quarterly planning\n\nAgenda: budgets, hiring",
      location: "Room 4",
      url: null,
      // 09:00 in Pacific daylight time (UTC-7) on 2 July.
      start: { date_time: "2026-07-02T16:00:00Z", date: null, time_zone: "Pacific Standard Time" },
      end: { date_time: "2026-07-02T17:00:00Z", date: null, time_zone: "Pacific Standard Time" },
      recurrence: "FREQ=WEEKLY;COUNT=4;BYDAY=TH",
      organizer: { address: "grace@partner.test", name: "Grace Hopper" },
      attendees: [
        { address: "AGENT@mailroom.test", name: "Scheduling Agent", role: "required", status: "needs_action", rsvp: true },
        { address: "ada@partner.test", name: "Lovelace, Ada", role: "optional", status: "accepted", rsvp: false }
      ]
    })
  })

  it("makes a zone a calendar defines once, whatever reads it: Outlook's rules since 1601 are worked out once, not at every reading", () => {
    const outlook = fixture("outlook-request.ics")
    const zone = zoneOfStart(outlook)
    expect(zone).toBeInstanceOf(ICAL.Timezone)
    expect(zoneOfStart(outlook)).toBe(zone)
    // The same definition in another calendar: the same zone; another definition under the same name: its own.
    expect(zoneOfStart(outlook.replace("SUMMARY;LANGUAGE=en-US:Planning", "SUMMARY:Another"))).toBe(zone)
    const redefined = outlook.replace("TZOFFSETTO:-0700", "TZOFFSETTO:-0600")
    expect(zoneOfStart(redefined)).not.toBe(zone)
    expect(read(redefined).start).toEqual({ date_time: "2026-07-02T15:00:00Z", date: null, time_zone: "Pacific Standard Time" })
    expect(read(outlook).start).toEqual({ date_time: "2026-07-02T16:00:00Z", date: null, time_zone: "Pacific Standard Time" })
  })

  it("lets the zones it keeps go when they hold too much: a dozen worked out to the year 9999 (3.5 MB each)", { timeout: 60_000 }, () => {
    const outlook = fixture("outlook-request.ics")
    const zone = zoneOfStart(outlook)
    expect(zoneOfStart(outlook)).toBe(zone)
    // Twelve definitions of their own (a name apiece), each read at a time in 9999: ~17,000 changes each.
    for (let i = 0; i < 12; i++) {
      const far = outlook.replace("TZID:Pacific Standard Time", `TZID:Pacific Standard Time\r\nX-NAME:${i}`).replaceAll("20260702T", "99990702T")
      expect(read(far).start?.date_time).toBe("9999-07-02T16:00:00Z")
    }
    expect(zoneOfStart(outlook)).not.toBe(zone)
  })

  it("reads Google's: an IANA zone with no VTIMEZONE, an end from DURATION, an empty location as none", () => {
    const invitation = read(fixture("google-request.ics"))
    expect(invitation).toMatchObject({
      method: "REQUEST",
      uid: "7kukuqrfedlm2f9t0vl2s1eel9@google.com",
      summary: "Contract review",
      location: null,
      url: "https://meet.example.test/abc-defg-hij",
      // 15:00 in Paris in December is 14:00 UTC; 45 minutes later.
      start: { date_time: "2026-12-03T14:00:00Z", date: null, time_zone: "Europe/Paris" },
      end: { date_time: "2026-12-03T14:45:00Z", date: null, time_zone: "Europe/Paris" },
      organizer: { address: "ada@partner.test", name: "Ada Lovelace" }
    })
    expect(invitation.attendees.map((a) => [a.address, a.name, a.status])).toEqual([
      ["ada@partner.test", "Ada Lovelace", "accepted"],
      ["agent@mailroom.test", null, "needs_action"]
    ])
  })

  it("answers whole days as dates, UTC as UTC, a time without a zone (or with an unknown one) as floating", () => {
    const day = read(calendar(...event("UID:a", "DTSTART;VALUE=DATE:20261224", "DTEND;VALUE=DATE:20261225")))
    expect([day.start, day.end, day.method]).toEqual([
      { date_time: null, date: "2026-12-24", time_zone: null },
      { date_time: null, date: "2026-12-25", time_zone: null },
      null
    ])
    expect(read(calendar(...event("UID:b", "DTSTART:20261224T100000Z"))).start).toEqual({ date_time: "2026-12-24T10:00:00Z", date: null, time_zone: null })
    expect(read(calendar(...event("UID:c", "DTSTART:20261224T100000"))).start).toEqual({ date_time: "2026-12-24T10:00:00", date: null, time_zone: null })
    expect(read(calendar(...event("UID:d", "DTSTART;TZID=Mars/Olympus:20261224T100000"))).start)
      .toEqual({ date_time: "2026-12-24T10:00:00", date: null, time_zone: "Mars/Olympus" })
    // A producer's path before the IANA name; and the hour after a change to summer time.
    expect(read(calendar(...event("UID:e", "DTSTART;TZID=/mozilla.org/20070129_1/Europe/Berlin:20260329T030000"))).start.date_time)
      .toBe("2026-03-29T01:00:00Z")
  })

  it("reads a time the clocks pass twice as the first pass, through Outlook's VTIMEZONE, the one a meeting writes, or an IANA name alone", () => {
    const outlook = (start: string, end: string) =>
      read(calendar(
        "METHOD:REQUEST",
        ...outlookCentralEurope,
        ...event("UID:dst", `DTSTART;TZID=W. Europe Standard Time:${start}`, `DTEND;TZID=W. Europe Standard Time:${end}`, "ORGANIZER:mailto:o@partner.test")
      ))
    const night = outlook("20271031T023000", "20271031T024500")
    expect([night.start.date_time, night.end?.date_time, night.start.time_zone]).toEqual(["2027-10-31T00:30:00Z", "2027-10-31T00:45:00Z", "W. Europe Standard Time"])
    // The hours either side are there once; one the clocks skip in March is read as before.
    expect([outlook("20271031T015900", "20271031T030000").start.date_time, outlook("20271031T015900", "20271031T030000").end?.date_time])
      .toEqual(["2027-10-30T23:59:00Z", "2027-10-31T02:00:00Z"])
    expect(outlook("20270328T023000", "20270328T040000").start.date_time).toBe("2027-03-28T00:30:00Z")

    // A meeting kept in a zone, written with the VTIMEZONE Mailroom makes, reads back at its own moment; without it (as Google sends), too.
    for (const [zone, local, moment, end] of [
      ["Europe/Paris", "20271031T023000", "2027-10-31T00:30:00Z", "2027-10-31T00:45:00Z"],
      ["America/New_York", "20271107T013000", "2027-11-07T05:30:00Z", "2027-11-07T05:45:00Z"],
      ["Australia/Lord_Howe", "20270404T014500", "2027-04-03T14:45:00Z", "2027-04-03T14:55:00Z"]
    ] as const) {
      const written = organizerCalendar("REQUEST", {
        uid: "m@agents.localhost",
        sequence: 0,
        summary: "Night shift",
        description: null,
        location: null,
        url: null,
        start: { date_time: moment, date: null, time_zone: zone },
        end: { date_time: end, date: null, time_zone: zone },
        recurrence: null,
        organizer: { address: "planner@agents.localhost", name: null },
        attendees: [{ address: "ada@partner.test", name: null, status: "needs_action" }]
      }, new Date("2027-01-01T00:00:00Z"))
      expect(written).toContain(`DTSTART;TZID=${zone}:${local}\r\n`)
      expect(`${zone} ${read(written).start.date_time} ${read(written).end?.date_time}`).toBe(`${zone} ${moment} ${end}`)
      const google = read(calendar(...event("UID:g", `DTSTART;TZID=${zone}:${local}`)))
      expect(`${zone} ${google.start.date_time}`).toBe(`${zone} ${moment}`)
    }
  })

  it("reads one occurrence of a repeating event, and a cancellation", () => {
    const occurrence = read(calendar(
      "METHOD:REQUEST",
      ...event("UID:r", "RECURRENCE-ID:20261210T090000Z", "DTSTART:20261210T100000Z", "SEQUENCE:1", "ORGANIZER:mailto:o@partner.test")
    ))
    expect([occurrence.recurrence_id, occurrence.start.date_time, occurrence.sequence]).toEqual(["2026-12-10T09:00:00Z", "2026-12-10T10:00:00Z", 1])
    const master = read(calendar(
      ...event("UID:r", "RECURRENCE-ID:20261210T090000Z", "DTSTART:20261210T100000Z"),
      ...event("UID:r", "DTSTART:20261203T090000Z", "RRULE:FREQ=WEEKLY")
    ))
    expect([master.recurrence_id, master.recurrence]).toEqual([null, "FREQ=WEEKLY"])
    const cancel = read(calendar("METHOD:CANCEL", ...event("UID:x", "DTSTART:20261210T100000Z", "STATUS:CANCELLED")))
    expect([cancel.method, cancel.status]).toEqual(["CANCEL", "cancelled"])
  })

  it("says why a calendar cannot be read: not iCalendar, a bad date (damaged); no event, or one without UID or start (no_event)", () => {
    expect(readInvitation("not a calendar")).toEqual(Either.left("damaged"))
    expect(readInvitation(calendar(...event("UID:x", "DTSTART:tomorrow")))).toEqual(Either.left("damaged"))
    // A time that does not exist is not read as another one (ical.js would take it for 15 February 2027).
    expect(readInvitation(calendar(...event("UID:x", "DTSTART:20261345T256199Z")))).toEqual(Either.left("damaged"))
    expect(readInvitation(calendar(...event("UID:x", "DTSTART;VALUE=DATE:20260230")))).toEqual(Either.left("damaged"))
    expect(readInvitation(calendar(...event("UID:x", "DTSTART:20261203T150000Z", "EXDATE:20261210T150000Z,20261399T150000Z"))))
      .toEqual(Either.left("damaged"))
    expect(readInvitation(calendar("METHOD:REQUEST"))).toEqual(Either.left("no_event"))
    expect(readInvitation(calendar(...event("DTSTART:20261210T100000Z")))).toEqual(Either.left("no_event"))
    expect(readInvitation(calendar(...event("UID:x")))).toEqual(Either.left("no_event"))
  })
})

describe("answering an invitation", () => {
  it("writes an iTIP REPLY: the event's identity and revision, the organizer, the one attendee with its answer, the zone its times name", () => {
    const now = new Date("2026-11-30T12:00:00Z")
    const text = replyCalendar(fixture("outlook-request.ics"), {
      attendee: { address: "AGENT@mailroom.test", name: "Scheduling Agent" },
      status: "tentative",
      comment: "I may be late; sorry",
      now
    })
    expect(text).toMatch(/^BEGIN:VCALENDAR\r\n/)
    expect(text.split("\r\n")).toEqual(expect.arrayContaining([
      "METHOD:REPLY",
      "TZID:Pacific Standard Time",
      "UID:040000008200E00074C5B7101A82E00800000000",
      "SEQUENCE:2",
      "DTSTAMP:20261130T120000Z",
      "DTSTART;TZID=Pacific Standard Time:20260702T090000",
      "ORGANIZER;CN=Grace Hopper:mailto:grace@partner.test",
      "ATTENDEE;PARTSTAT=TENTATIVE;CN=Scheduling Agent:mailto:AGENT@mailroom.test",
      "COMMENT:I may be late\\; sorry"
    ]))
    // Only the one attendee answering; read back, it is the same event.
    expect(text.match(/^ATTENDEE/gm)).toHaveLength(1)
    // Lines fold within 75 octets, the continuation's leading space included (RFC 5545 §3.1).
    const long = replyCalendar(fixture("outlook-request.ics"), {
      attendee: { address: "AGENT@mailroom.test", name: "Scheduling Agent" },
      status: "accepted",
      comment: "Déjà vu: ".repeat(40),
      now
    })
    expect(long.split("\r\n").filter((line) => line.startsWith(" ")).length).toBeGreaterThan(3)
    expect(Math.max(...long.split("\r\n").map((line) => Buffer.byteLength(line)))).toBeLessThanOrEqual(75)
    const reply = read(text)
    expect(reply).toMatchObject({ method: "REPLY", uid: "040000008200E00074C5B7101A82E00800000000", sequence: 2, summary: "Planning" })
    expect(reply.start.date_time).toBe("2026-07-02T16:00:00Z")
    expect(reply.attendees).toEqual([{ address: "AGENT@mailroom.test", name: "Scheduling Agent", role: "required", status: "tentative", rsvp: false }])
  })

  it("carries an occurrence's RECURRENCE-ID, and no COMMENT or VTIMEZONE when there is none to carry", () => {
    const text = replyCalendar(
      calendar("METHOD:REQUEST", ...event("UID:r", "RECURRENCE-ID:20261210T090000Z", "DTSTART:20261210T100000Z", "ORGANIZER:mailto:o@partner.test")),
      { attendee: { address: "agent@mailroom.test", name: null }, status: "declined", comment: "  ", now: new Date() }
    )
    expect(text).toContain("RECURRENCE-ID:20261210T090000Z\r\n")
    expect(text).toContain("ATTENDEE;PARTSTAT=DECLINED:mailto:agent@mailroom.test\r\n")
    expect(text).not.toMatch(/COMMENT|VTIMEZONE|SEQUENCE/)
  })
})

describe("organizing a meeting", () => {
  const meeting = {
    uid: "mtg_1@agents.localhost",
    sequence: 3,
    summary: "Planning, Q4; budgets",
    description: "First line\nSecond line",
    location: null,
    url: "https://meet.example.test/q4",
    start: { date_time: "2026-12-03T14:00:00Z", date: null, time_zone: null },
    end: { date_time: "2026-12-03T15:00:00Z", date: null, time_zone: null },
    recurrence: "FREQ=WEEKLY;COUNT=4",
    organizer: { address: "planner@agents.localhost", name: "Planner" },
    attendees: [
      { address: "ada@partner.test", name: "Ada Lovelace", status: "accepted" as const },
      { address: "grace@partner.test", name: null, status: "needs_action" as const }
    ]
  }

  it("writes an invitation (REQUEST) a calendar reads back as the meeting: each attendee asked, with their answer so far", () => {
    const text = organizerCalendar("REQUEST", meeting, new Date("2026-11-30T12:00:00Z"))
    expect(read(text)).toEqual({
      method: "REQUEST",
      uid: "mtg_1@agents.localhost",
      sequence: 3,
      recurrence_id: null,
      status: "confirmed",
      summary: "Planning, Q4; budgets",
      description: "First line\nSecond line",
      location: null,
      url: "https://meet.example.test/q4",
      start: { date_time: "2026-12-03T14:00:00Z", date: null, time_zone: null },
      end: { date_time: "2026-12-03T15:00:00Z", date: null, time_zone: null },
      recurrence: "FREQ=WEEKLY;COUNT=4",
      organizer: { address: "planner@agents.localhost", name: "Planner" },
      attendees: [
        { address: "ada@partner.test", name: "Ada Lovelace", role: "required", status: "accepted", rsvp: true },
        { address: "grace@partner.test", name: null, role: "required", status: "needs_action", rsvp: true }
      ]
    })
    expect(text).toContain("DTSTAMP:20261130T120000Z\r\n")
  })

  it("writes times kept in a zone as its wall-clock time with that zone defined, so a repeating meeting keeps its local hour", () => {
    const text = organizerCalendar("REQUEST", {
      ...meeting,
      start: { date_time: "2026-12-03T14:00:00Z", date: null, time_zone: "Europe/Paris" },
      end: { date_time: "2026-12-03T15:00:00Z", date: null, time_zone: "Europe/Paris" }
    }, new Date())
    expect(text).toContain("DTSTART;TZID=Europe/Paris:20261203T150000\r\n")
    expect(text).toContain("DTEND;TZID=Europe/Paris:20261203T160000\r\n")
    expect(text.match(/BEGIN:VTIMEZONE/g)).toHaveLength(1)
    // Read back through the zone the calendar defines: the same moment.
    expect(read(text).start).toEqual({ date_time: "2026-12-03T14:00:00Z", date: null, time_zone: "Europe/Paris" })
  })

  it("writes a cancellation (CANCEL, STATUS:CANCELLED) of whole days, asking no answer", () => {
    const text = organizerCalendar("CANCEL", {
      ...meeting,
      recurrence: null,
      url: null,
      description: null,
      start: { date_time: null, date: "2026-12-24", time_zone: null },
      end: { date_time: null, date: "2026-12-26", time_zone: null }
    }, new Date())
    const cancel = read(text)
    expect([cancel.method, cancel.status, cancel.start, cancel.end]).toEqual([
      "CANCEL",
      "cancelled",
      { date_time: null, date: "2026-12-24", time_zone: null },
      { date_time: null, date: "2026-12-26", time_zone: null }
    ])
    expect(cancel.attendees.every((a) => !a.rsvp)).toBe(true)
  })

  it("reads an attendee's REPLY to it: who answered what, and their note; anything but a REPLY is none", () => {
    const invitation = organizerCalendar("REQUEST", meeting, new Date())
    const reply = replyCalendar(invitation, { attendee: { address: "grace@partner.test", name: "Grace" }, status: "declined", comment: "Away", now: new Date() })
    expect(replyAnswers(reply)).toEqual({
      uid: "mtg_1@agents.localhost",
      sequence: 3,
      attendees: [{ address: "grace@partner.test", name: "Grace", status: "declined" }],
      comment: "Away"
    })
    expect(replyAnswers(invitation)).toBeUndefined()
    expect(replyAnswers("not a calendar")).toBeUndefined()
  })
})

describe("a repeat rule in words", () => {
  it("says how often, on which days, and how long; what it cannot say stays as written", () => {
    expect(describeRule("FREQ=WEEKLY;COUNT=4")).toBe("every week, 4 times")
    expect(describeRule("FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,WE;UNTIL=20270301T000000Z")).toBe("every 2 weeks on Monday and Wednesday, until 2027-03-01")
    expect(describeRule("FREQ=DAILY;BYDAY=MO,TU,WE,TH,FR")).toBe("every day on Monday, Tuesday, Wednesday, Thursday and Friday")
    expect(describeRule("FREQ=MONTHLY;BYDAY=TH;BYSETPOS=1;COUNT=1")).toBe("every month on Thursday, 1 time (FREQ=MONTHLY;BYDAY=TH;BYSETPOS=1;COUNT=1)")
    expect(describeRule("FREQ=MONTHLY;BYDAY=-1FR")).toBe("every month (FREQ=MONTHLY;BYDAY=-1FR)")
  })
})
