/**
 * The schedule's calendars (services/schedule/occurrences.ts): invitations, their updates and
 * cancellations applied as an attendee's calendar applies them, and a kept event expanded into the
 * occurrences a range holds. Pure: no database, no server.
 */
import { Either } from "effect"
import * as fs from "node:fs"
import ICAL from "ical.js"
import { describe, expect, it, vi } from "vitest"
import { readInvitation } from "../../services/invitations/icalendar.ts"
import { headline, invitationOf, merge, occurrences, span, spanning } from "../../services/schedule/occurrences.ts"
import { ruleProblem } from "../../services/schedule/rule-limits.ts"
import { vtimezoneLines } from "../../services/time-zones.ts"
import { outlookCentralEurope } from "../support/outlook-central-europe.ts"

const fixture = (name: string) => fs.readFileSync(new URL(`../fixtures/calendars/${name}`, import.meta.url), "utf8")
const calendar = (method: string, ...lines: Array<string>) =>
  ["BEGIN:VCALENDAR", "VERSION:2.0", `METHOD:${method}`, ...lines, "END:VCALENDAR", ""].join("\r\n")
const event = (...lines: Array<string>) => ["BEGIN:VEVENT", ...lines, "END:VEVENT"]
const apply = (kept: string | undefined, text: string) => merge(kept, invitationOf(text)!)
const times = (kept: string, from: string, to: string) =>
  occurrences(kept, new Date(from), new Date(to)).map((o) => [o.start.date_time ?? o.start.date, o.end.date_time ?? o.end.date, o.status])

const weekly = calendar(
  "REQUEST",
  ...event("UID:standup", "SEQUENCE:0", "DTSTART;TZID=Europe/Paris:20261026T090000", "DTEND;TZID=Europe/Paris:20261026T091500",
    "RRULE:FREQ=WEEKLY;BYDAY=MO", "SUMMARY:Standup")
)

describe("expanding a kept event", () => {
  it("walks a repeating event in its own zone's wall-clock time: 09:00 in Paris is 08:00 UTC in winter, 07:00 in summer", () => {
    const kept = apply(undefined, weekly)!
    expect(times(kept, "2026-10-26T00:00:00Z", "2026-11-03T00:00:00Z")).toEqual([
      ["2026-10-26T08:00:00Z", "2026-10-26T08:15:00Z", "confirmed"],
      ["2026-11-02T08:00:00Z", "2026-11-02T08:15:00Z", "confirmed"]
    ])
    expect(times(kept, "2027-04-05T00:00:00Z", "2027-04-06T00:00:00Z")).toEqual([["2027-04-05T07:00:00Z", "2027-04-05T07:15:00Z", "confirmed"]])
    // Without end: the index is told so.
    expect(span(kept)).toEqual({ first: new Date("2026-10-26T08:00:00Z"), last: null, repeatsUntil: null })
  })

  it("reads Outlook's zones (its own VTIMEZONE) and a COUNT: four Thursdays, then none; the span ends with the last", () => {
    const kept = apply(undefined, fixture("outlook-request.ics"))!
    const all = times(kept, "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z")
    expect(all.map(([start]) => start)).toEqual(["2026-07-02T16:00:00Z", "2026-07-09T16:00:00Z", "2026-07-16T16:00:00Z", "2026-07-23T16:00:00Z"])
    // The COUNT walked once, when kept: its last repeat in the event's own wall-clock time (Pacific).
    expect(span(kept)).toEqual({ first: new Date("2026-07-02T16:00:00Z"), last: new Date("2026-07-23T17:00:00Z"), repeatsUntil: "2026-07-23T09:00:00" })
  })

  it("puts a repeat that lands on an hour the clocks pass twice at its first pass, whichever zone and however the zone is given", () => {
    const daily = (zone: ReadonlyArray<string>, tzid: string, start: string, end: string, ...more: Array<string>) =>
      apply(undefined, calendar("REQUEST", ...zone, ...event("UID:night", "SEQUENCE:0", `DTSTART;TZID=${tzid}:${start}`, `DTEND;TZID=${tzid}:${end}`,
        "RRULE:FREQ=DAILY", "SUMMARY:Night shift", ...more)))!
    const starts = (kept: string, from: string, to: string) => occurrences(kept, new Date(from), new Date(to)).map((o) => [o.start.date_time, o.end.date_time, o.recurrenceId])
    // Paris, as a meeting writes it (its own VTIMEZONE): 02:30 on 31 October is first at +02:00 (00:30 UTC), the next day at +01:00.
    const paris = daily(vtimezoneLines("Europe/Paris", 2027), "Europe/Paris", "20271029T023000", "20271029T024500")
    expect(starts(paris, "2027-10-30T00:00:00Z", "2027-11-02T00:00:00Z")).toEqual([
      ["2027-10-30T00:30:00Z", "2027-10-30T00:45:00Z", "2027-10-30T00:30:00Z"],
      ["2027-10-31T00:30:00Z", "2027-10-31T00:45:00Z", "2027-10-31T00:30:00Z"],
      ["2027-11-01T01:30:00Z", "2027-11-01T01:45:00Z", "2027-11-01T01:30:00Z"]
    ])
    // Outlook's zone for the same, weekly on Sundays.
    const outlook = apply(undefined, calendar("REQUEST", ...outlookCentralEurope, ...event("UID:sunday", "SEQUENCE:0",
      "DTSTART;TZID=W. Europe Standard Time:20271017T023000", "DTEND;TZID=W. Europe Standard Time:20271017T024500", "RRULE:FREQ=WEEKLY;BYDAY=SU")))!
    expect(times(outlook, "2027-10-30T00:00:00Z", "2027-11-08T00:00:00Z").map(([start]) => start)).toEqual(["2027-10-31T00:30:00Z", "2027-11-07T01:30:00Z"])
    // New York as Google sends it (an IANA name, no VTIMEZONE): 01:30 on 7 November is first at -04:00.
    const newYork = daily([], "America/New_York", "20271105T013000", "20271105T014500")
    expect(starts(newYork, "2027-11-07T00:00:00Z", "2027-11-09T00:00:00Z").map(([start]) => start)).toEqual(["2027-11-07T05:30:00Z", "2027-11-08T06:30:00Z"])
    // Lord Howe, whose clocks go back half an hour: 01:45 on 4 April is first at +11:00.
    const lordHowe = daily(vtimezoneLines("Australia/Lord_Howe", 2027), "Australia/Lord_Howe", "20270402T014500", "20270402T015500")
    expect(starts(lordHowe, "2027-04-03T00:00:00Z", "2027-04-05T00:00:00Z").map(([start]) => start)).toEqual(["2027-04-03T14:45:00Z", "2027-04-04T15:15:00Z"])
    // The occurrence on the repeated hour moved by its organizer (its RECURRENCE-ID the wall time again): the move replaces it.
    const moved = apply(paris, calendar("REQUEST", ...vtimezoneLines("Europe/Paris", 2027), ...event("UID:night", "SEQUENCE:0",
      "RECURRENCE-ID;TZID=Europe/Paris:20271031T023000", "DTSTART;TZID=Europe/Paris:20271031T040000", "DTEND;TZID=Europe/Paris:20271031T041500",
      "SUMMARY:Night shift (later)")))!
    expect(starts(moved, "2027-10-31T00:00:00Z", "2027-11-01T00:00:00Z")).toEqual([["2027-10-31T03:00:00Z", "2027-10-31T03:15:00Z", "2027-10-31T00:30:00Z"]])
  })

  it("answers whole days as days, and an event that does not repeat once, if it overlaps the range", () => {
    const kept = apply(undefined, calendar("REQUEST", ...event("UID:offsite", "DTSTART;VALUE=DATE:20261224", "DTEND;VALUE=DATE:20261226")))!
    expect(times(kept, "2026-12-25T12:00:00Z", "2026-12-30T00:00:00Z")).toEqual([["2026-12-24", "2026-12-26", "confirmed"]])
    expect(times(kept, "2026-12-26T00:00:00Z", "2026-12-30T00:00:00Z")).toEqual([])
  })

  it("walks a COUNT 10,000 repeats, a rule repeating more often than daily 1,000 (a stranger's FREQ=SECONDLY costs every request little)", () => {
    const every = (rule: string) =>
      apply(undefined, calendar("REQUEST", ...event("UID:often", "DTSTART:20261201T000000Z", "DTEND:20261201T000100Z", `RRULE:${rule}`)))!
    const hourly = occurrences(every("FREQ=HOURLY"), new Date("2026-12-01T00:00:00Z"), new Date("2027-03-01T00:00:00Z"))
    expect(hourly).toHaveLength(1_000)
    expect(hourly.at(-1)!.start.date_time).toBe("2027-01-11T15:00:00Z")
    expect(occurrences(every("FREQ=SECONDLY"), new Date("2026-12-01T00:00:00Z"), new Date("2026-12-02T00:00:00Z"))).toHaveLength(1_000)
    expect(occurrences(every("FREQ=DAILY"), new Date("2026-12-01T00:00:00Z"), new Date("2027-12-01T00:00:00Z"))).toHaveLength(365)
    // A count is walked from the start: the 10,000th day is 17 April 2054.
    expect(occurrences(every("FREQ=DAILY;COUNT=20000"), new Date("2054-04-01T00:00:00Z"), new Date("2054-05-01T00:00:00Z")).at(-1)!.start.date_time)
      .toBe("2054-04-17T00:00:00Z")
    // Without one the walk begins near the range (below): every day of April 2054.
    expect(occurrences(every("FREQ=DAILY"), new Date("2054-04-01T00:00:00Z"), new Date("2054-05-01T00:00:00Z"))).toHaveLength(30)
  })

  it("walks a rule naming several times of day 1,000 repeats, and one naming over 24 not at all: its first time shows alone", () => {
    const seq = (n: number) => Array.from({ length: n }, (_, i) => i).join(",")
    const named = (rule: string) =>
      apply(undefined, calendar("REQUEST", ...event("UID:times", "DTSTART:20261207T090000Z", "DTEND:20261207T091000Z", `RRULE:${rule}`)))!
    const three = occurrences(named("FREQ=DAILY;BYHOUR=9,13,17"), new Date("2026-12-07T00:00:00Z"), new Date("2027-12-01T00:00:00Z"))
    expect(three.slice(0, 4).map((o) => o.start.date_time)).toEqual(["2026-12-07T09:00:00Z", "2026-12-07T13:00:00Z", "2026-12-07T17:00:00Z", "2026-12-08T09:00:00Z"])
    expect(three).toHaveLength(1_000)
    // Every second of every day of the week: the set ical.js would build first holds 604,800 times.
    const everySecond = named(`FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR,SA,SU;BYHOUR=${seq(24)};BYMINUTE=${seq(60)};BYSECOND=${seq(60)}`)
    expect(times(everySecond, "2026-12-01T00:00:00Z", "2027-12-01T00:00:00Z")).toEqual([["2026-12-07T09:00:00Z", "2026-12-07T09:10:00Z", "confirmed"]])
    expect(times(named(`FREQ=DAILY;BYHOUR=9;BYMINUTE=${seq(25)}`), "2026-12-08T00:00:00Z", "2027-12-01T00:00:00Z")).toEqual([])
  })

  it("walks a series begun decades ago from near the range, with the repeats a walk from its start gives", () => {
    const series = (start: string, rule: string, ...more: Array<string>) =>
      apply(undefined, calendar("REQUEST", ...event("UID:old", start, `RRULE:${rule}`, ...more)))!
    // Mondays at 09:00 in Paris since January 2000: 07:00 UTC in the summer of 2027, as the standup begun in 2026.
    const mondays = series("DTSTART;TZID=Europe/Paris:20000103T090000", "FREQ=WEEKLY;BYDAY=MO", "DTEND;TZID=Europe/Paris:20000103T091500",
      "EXDATE;TZID=Europe/Paris:20270412T090000")
    expect(times(mondays, "2027-04-05T00:00:00Z", "2027-04-20T00:00:00Z")).toEqual(times(apply(undefined, weekly)!, "2027-04-05T00:00:00Z", "2027-04-20T00:00:00Z")
      .filter(([start]) => start !== "2027-04-12T07:00:00Z"))
    expect(times(mondays, "2027-04-05T00:00:00Z", "2027-04-20T00:00:00Z")).toHaveLength(2)
    // Every other week since 1990, on its phase; the last weekday of each month since 1950 (Outlook's
    // BYSETPOS, over a millisecond a repeat to walk); a 29 February, yearly, until 2030.
    expect(times(series("DTSTART:19900101T100000Z", "FREQ=WEEKLY;INTERVAL=2", "DURATION:PT1H"), "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z")
      .map(([start]) => start)).toEqual(["2026-12-14T10:00:00Z", "2026-12-28T10:00:00Z"]) // 1,927 weeks on: 7 December is off its phase
    expect(times(series("DTSTART:19500131T160000Z", "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1", "DURATION:PT1H"),
      "2026-11-01T00:00:00Z", "2027-01-01T00:00:00Z").map(([start]) => start)).toEqual(["2026-11-30T16:00:00Z", "2026-12-31T16:00:00Z"])
    const leap = series("DTSTART;VALUE=DATE:19960229", "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;UNTIL=20300101", "DTEND;VALUE=DATE:19960301")
    expect(times(leap, "2027-01-01T00:00:00Z", "2029-01-01T00:00:00Z").map(([start]) => start)).toEqual(["2028-02-29"])
    expect(times(leap, "2031-01-01T00:00:00Z", "2033-01-01T00:00:00Z")).toEqual([])
    // Without the day named, the years without a 29 February are skipped too (RFC 5545), not moved to 1 March.
    const birthday = series("DTSTART;VALUE=DATE:19960229", "FREQ=YEARLY")
    expect(times(birthday, "2025-01-01T00:00:00Z", "2030-01-01T00:00:00Z").map(([start]) => start)).toEqual(["2028-02-29"])
    // With two months named: the 29th of each, 29 February in leap years only (ical.js gave 1 March).
    const twoMonths = series("DTSTART;VALUE=DATE:19960229", "FREQ=YEARLY;BYMONTH=2,3")
    expect(times(twoMonths, "2026-01-01T00:00:00Z", "2029-01-01T00:00:00Z").map(([start]) => start))
      .toEqual(["2026-03-29", "2027-03-29", "2028-02-29", "2028-03-29"])
    // Its COUNT counts those repeats, not the 1 Marches left out (ical.js counted them: four of six), walked
    // from the start and as kept (span's last repeat); three ends on a 29 March where ical.js's third is a 1 March.
    const counted = (count: number) => series("DTSTART;VALUE=DATE:20240229", `FREQ=YEARLY;BYMONTH=2,3;COUNT=${count}`)
    const dates = (kept: string, repeatsUntil: string | null) =>
      occurrences(kept, new Date("2024-01-01T00:00:00Z"), new Date("2040-01-01T00:00:00Z"), { repeatsUntil }).map((o) => o.start.date)
    const six = ["2024-02-29", "2024-03-29", "2025-03-29", "2026-03-29", "2027-03-29", "2028-02-29"]
    expect(dates(counted(6), null)).toEqual(six)
    expect(dates(counted(6), span(counted(6))!.repeatsUntil)).toEqual(six)
    expect(span(counted(6))!.last?.toISOString()).toBe("2028-03-01T00:00:00.000Z")
    expect(dates(counted(3), span(counted(3))!.repeatsUntil)).toEqual(six.slice(0, 3))
  })

  /** The starts `occurrences` finds, and how many repeats ical.js stepped through to find them. */
  const walked = (kept: string, from: string, to: string, repeatsUntil: string | null = null) => {
    const steps = vi.spyOn(ICAL.RecurIterator.prototype, "next")
    try {
      const found = occurrences(kept, new Date(from), new Date(to), { repeatsUntil }).map((o) => o.start.date_time ?? o.start.date)
      return { found, steps: steps.mock.calls.length }
    } finally {
      steps.mockRestore()
    }
  }
  const since = (start: string, ...rules: Array<string>) =>
    apply(undefined, calendar("REQUEST", ...event("UID:since", `DTSTART:${start}`, "DURATION:PT1H", ...rules.map((r) => `RRULE:${r}`))))!

  it("walks a COUNT once, when kept, and a range from near it as a rule ending at the COUNT's last repeat: the same repeats", () => {
    // Outlook's last weekday of the month since 1950, a thousand times (0.7 ms a repeat to walk): the 1,000th is 29 April 2033.
    const lastWeekday = apply(undefined, calendar("REQUEST", ...event("UID:close", "DTSTART:19500131T160000Z", "DURATION:PT1H",
      "RRULE:FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1;COUNT=1000")))!
    // Walked whole (some 0.7 s), in slices of 10 ms between which the worker answers others.
    const walking = spanning(lastWeekday, Infinity)
    let slices = 0
    let step = walking.next()
    for (; !step.done; step = walking.next()) slices++
    expect(slices).toBeGreaterThan(10)
    const kept = step.value!
    expect(kept).toEqual({ first: new Date("1950-01-31T16:00:00Z"), last: new Date("2033-04-29T17:00:00Z"), repeatsUntil: "2033-04-29T16:00:00Z" })
    const fromStart = walked(lastWeekday, "2026-11-01T00:00:00Z", "2027-01-01T00:00:00Z", null)
    const fromNear = walked(lastWeekday, "2026-11-01T00:00:00Z", "2027-01-01T00:00:00Z", kept.repeatsUntil)
    expect(fromNear.found).toEqual(["2026-11-30T16:00:00Z", "2026-12-31T16:00:00Z"])
    expect(fromNear.found).toEqual(fromStart.found)
    expect(fromStart.steps).toBeGreaterThan(900)
    expect(fromNear.steps).toBeLessThan(30)
    expect(walked(lastWeekday, "2033-04-01T00:00:00Z", "2033-07-01T00:00:00Z", kept.repeatsUntil).found).toEqual(["2033-04-29T16:00:00Z"])
    // A walk the budget stops is kept as far as it got, and a range stops there too: here, at the first.
    const stopped = span(lastWeekday, 0)!
    expect(stopped).toEqual({ first: new Date("1950-01-31T16:00:00Z"), last: new Date("1950-01-31T17:00:00Z"), repeatsUntil: "1950-01-31T16:00:00Z" })
    expect(walked(lastWeekday, "2026-11-01T00:00:00Z", "2027-01-01T00:00:00Z", stopped.repeatsUntil).found).toEqual([])
    // An UNTIL the budget stops the walk short of bounds the span (in any zone); a range walks it from near.
    const until = apply(undefined, calendar("REQUEST", ...event("UID:until", "DTSTART:19500131T160000Z", "DURATION:PT1H",
      "RRULE:FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1;UNTIL=20300101T000000Z")))!
    expect(span(until, 0)).toEqual({ first: new Date("1950-01-31T16:00:00Z"), last: new Date("2030-01-01T16:00:00Z"), repeatsUntil: null })
    expect(span(until, Infinity)!.last).toEqual(new Date("2029-12-31T17:00:00Z"))
    // Dates listed (RDATE) the budget stops the walk short of bound the span by the last of them (and its hour, in any zone).
    const listed = since("20261201T100000Z")
      .replace("DURATION:PT1H", ["DURATION:PT1H", ...Array.from({ length: 50 }, (_, i) => `RDATE:2027${String(1 + Math.floor(i / 28)).padStart(2, "0")}${String(1 + (i % 28)).padStart(2, "0")}T100000Z`)].join("\r\n"))
    expect(span(listed, 0)).toEqual({ first: new Date("2026-12-01T10:00:00Z"), last: new Date("2027-02-23T02:00:00Z"), repeatsUntil: null })
    expect(span(listed, Infinity)).toEqual({ first: new Date("2026-12-01T10:00:00Z"), last: new Date("2027-02-22T11:00:00Z"), repeatsUntil: null })
    // A 29 February start is walked from a leap year near the range (2024's, some 5,000 months after 1600's).
    const leapMonthly = apply(undefined, calendar("REQUEST", ...event("UID:leap", "DTSTART:16000229T090000Z", "DURATION:PT1H",
      "RRULE:FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1")))!
    const leap = walked(leapMonthly, "2027-03-01T00:00:00Z", "2027-05-01T00:00:00Z", null)
    expect(leap.found).toEqual(["2027-03-31T09:00:00Z", "2027-04-30T09:00:00Z"])
    expect(leap.steps).toBeLessThan(60)
  })

  it("walks several rules of one kind from near the range, by whole periods of them all; rules of mixed kinds each alone from near it", () => {
    // The last weekday and the first Monday of each month since 1800.
    const two = walked(since("18000131T160000Z", "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1", "FREQ=MONTHLY;BYDAY=1MO"),
      "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z")
    expect(two.found).toEqual(["2026-12-07T16:00:00Z", "2026-12-31T16:00:00Z"])
    expect(two.steps).toBeLessThan(30)
    // Each 31st since 1990 and every third year's 30 June: moved on by 36 months, to a month with a 31st; as a walk from the start
    // (the same rules with a COUNT, which is counted from it) gives.
    const rules = ["FREQ=MONTHLY", "FREQ=YEARLY;INTERVAL=3;BYMONTH=6;BYMONTHDAY=30"]
    const near = walked(since("19900131T090000Z", ...rules), "2026-05-01T00:00:00Z", "2026-09-01T00:00:00Z")
    const fromStart = walked(since("19900131T090000Z", ...rules.map((r) => `${r};COUNT=5000`)), "2026-05-01T00:00:00Z", "2026-09-01T00:00:00Z")
    expect(near.found).toEqual(fromStart.found)
    expect(near.found).toEqual(["2026-05-31T09:00:00Z", "2026-06-30T09:00:00Z", "2026-07-31T09:00:00Z", "2026-08-31T09:00:00Z"])
    expect(walked(since("19900131T090000Z", ...rules), "2029-06-01T00:00:00Z", "2029-07-01T00:00:00Z").found).toEqual(["2029-06-30T09:00:00Z"])
    expect(near.steps * 5).toBeLessThan(fromStart.steps)
    // Weekly and monthly: no whole number of both, so each rule is walked alone from near the range and their
    // repeats merged, as a walk from the start gives (the same rules with a COUNT): an endless event since 1990
    // (capped at 10,000 repeats from its start it ended in 2013). A start both give (Monday 1 February 2027) is one.
    const mixedRules = ["FREQ=WEEKLY;BYDAY=MO", "FREQ=MONTHLY;BYMONTHDAY=1"]
    const mixed = since("19900101T090000Z", ...mixedRules)
    expect(span(mixed, Infinity)).toMatchObject({ last: null, repeatsUntil: null })
    const december = walked(mixed, "2026-12-01T00:00:00Z", "2026-12-29T00:00:00Z")
    expect(december.found).toEqual(["2026-12-01T09:00:00Z", "2026-12-07T09:00:00Z", "2026-12-14T09:00:00Z", "2026-12-21T09:00:00Z", "2026-12-28T09:00:00Z"])
    expect(december.steps).toBeLessThan(30)
    const counted = since("19900101T090000Z", ...mixedRules.map((r) => `${r};COUNT=2000`))
    expect(walked(counted, "2026-12-01T00:00:00Z", "2026-12-29T00:00:00Z").found).toEqual(december.found)
    expect(walked(mixed, "2027-02-01T00:00:00Z", "2027-02-09T00:00:00Z").found).toEqual(["2027-02-01T09:00:00Z", "2027-02-08T09:00:00Z"])
    // Each with an UNTIL: the event ends with the later one's last repeat.
    const ending = since("19900101T090000Z", "FREQ=WEEKLY;BYDAY=MO;UNTIL=20270301T000000Z", "FREQ=MONTHLY;BYMONTHDAY=1;UNTIL=20270601T000000Z")
    expect(span(ending, Infinity)!.last?.toISOString()).toBe("2027-05-01T10:00:00.000Z")
    expect(walked(ending, "2027-02-20T00:00:00Z", "2027-07-01T00:00:00Z").found).toEqual(["2027-02-22T09:00:00Z", "2027-03-01T09:00:00Z", "2027-04-01T09:00:00Z", "2027-05-01T09:00:00Z"])
  })

  it("capped, answers the earliest so many occurrences its rules give in the range, and every override", () => {
    const moved = apply(apply(undefined, weekly), calendar(
      "REQUEST",
      ...event("UID:standup", "SEQUENCE:0", "RECURRENCE-ID;TZID=Europe/Paris:20261207T090000", "DTSTART;TZID=Europe/Paris:20261231T170000",
        "DTEND;TZID=Europe/Paris:20261231T171500", "SUMMARY:Standup, moved")
    ))!
    const first = (max: number) =>
      occurrences(moved, new Date("2026-11-01T00:00:00Z"), new Date("2027-01-01T00:00:00Z"), { max }).map((o) => o.start.date_time)
    expect(first(2)).toEqual(["2026-11-02T08:00:00Z", "2026-11-09T08:00:00Z", "2026-12-31T16:00:00Z"])
    expect(first(Infinity)).toHaveLength(9)
  })

  it("a start given twice (a rule and an RDATE, two rules) is one occurrence, and a COUNT counts the rule's own", () => {
    const mondays = (...more: Array<string>) =>
      apply(undefined, calendar("REQUEST", ...event("UID:twice", "DTSTART:20261207T100000Z", "DURATION:PT1H", ...more)))!
    const starts = (kept: string, max = Infinity) =>
      occurrences(kept, new Date("2026-12-01T00:00:00Z"), new Date("2027-01-01T00:00:00Z"), { max }).map((o) => o.start.date_time!.slice(0, 10))
    expect(starts(mondays("RRULE:FREQ=WEEKLY;BYDAY=MO", "RDATE:20261214T100000Z,20261216T100000Z")))
      .toEqual(["2026-12-07", "2026-12-14", "2026-12-16", "2026-12-21", "2026-12-28"])
    expect(starts(mondays("RRULE:FREQ=WEEKLY;BYDAY=MO;COUNT=3", "RDATE:20261214T100000Z"))).toEqual(["2026-12-07", "2026-12-14", "2026-12-21"])
    const twoRules = mondays("RRULE:FREQ=WEEKLY;BYDAY=MO", "RRULE:FREQ=WEEKLY;BYDAY=MO,WE")
    expect(starts(twoRules)).toEqual(["2026-12-07", "2026-12-09", "2026-12-14", "2026-12-16", "2026-12-21", "2026-12-23", "2026-12-28", "2026-12-30"])
    // A page's cap counts occurrences, not what ical.js gave twice.
    expect(starts(twoRules, 3)).toEqual(["2026-12-07", "2026-12-09", "2026-12-14"])
  })
})

describe("applying invitations, updates and cancellations", () => {
  it("an update with the next revision replaces the event; an older one arriving late changes nothing", () => {
    const first = apply(undefined, weekly)!
    const moved = calendar("REQUEST", ...event("UID:standup", "SEQUENCE:1", "DTSTART:20261027T100000Z", "DTEND:20261027T103000Z", "SUMMARY:Standup"))
    const kept = apply(first, moved)!
    expect(times(kept, "2026-10-01T00:00:00Z", "2027-01-01T00:00:00Z")).toEqual([["2026-10-27T10:00:00Z", "2026-10-27T10:30:00Z", "confirmed"]])
    expect(apply(kept, weekly)).toBeUndefined()
    expect(headline(kept)).toEqual({ sequence: 1, status: "confirmed", organizer: null })
  })

  it("one occurrence moved (its override): it shows at its new time, in place of the old, even from beyond the range", () => {
    const override = calendar("REQUEST", ...event("UID:standup", "SEQUENCE:0", "RECURRENCE-ID;TZID=Europe/Paris:20261109T090000",
      "DTSTART;TZID=Europe/Paris:20261102T140000", "DTEND;TZID=Europe/Paris:20261102T141500", "SUMMARY:Standup (moved)"))
    const kept = apply(apply(undefined, weekly), override)!
    const week = occurrences(kept, new Date("2026-11-02T00:00:00Z"), new Date("2026-11-03T00:00:00Z"))
    expect(week.map((o) => [o.start.date_time, o.summary, o.recurrenceId])).toEqual([
      ["2026-11-02T08:00:00Z", "Standup", "2026-11-02T08:00:00Z"],
      ["2026-11-02T13:00:00Z", "Standup (moved)", "2026-11-09T08:00:00Z"]
    ])
    expect(times(kept, "2026-11-09T00:00:00Z", "2026-11-10T00:00:00Z")).toEqual([])
  })

  it("a cancellation of one occurrence removes it; of the whole event marks every occurrence cancelled", () => {
    const one = calendar("CANCEL", ...event("UID:standup", "SEQUENCE:1", "RECURRENCE-ID;TZID=Europe/Paris:20261102T090000", "STATUS:CANCELLED"))
    const kept = apply(apply(undefined, weekly), one)!
    expect(times(kept, "2026-10-26T00:00:00Z", "2026-11-10T00:00:00Z").map(([start]) => start)).toEqual([
      "2026-10-26T08:00:00Z",
      "2026-11-09T08:00:00Z"
    ])
    // The invitation it outranks, come again (in another email, or read again when the mailbox answers it), puts nothing back.
    expect(apply(kept, weekly)).toBeUndefined()
    const all = apply(kept, calendar("CANCEL", ...event("UID:standup", "SEQUENCE:2", "STATUS:CANCELLED")))!
    expect(headline(all)).toEqual({ sequence: 2, status: "cancelled", organizer: null })
    expect(times(all, "2026-10-26T00:00:00Z", "2026-11-03T00:00:00Z").map(([, , status]) => status)).toEqual(["cancelled"])
  })

  it("a cancellation arriving before its invitation is kept and outranks it; replies and files that ask nothing are not invitations", () => {
    const cancelled = apply(undefined, calendar("CANCEL", ...event("UID:standup", "SEQUENCE:1", "DTSTART:20261026T080000Z")))!
    expect(headline(cancelled).status).toBe("cancelled")
    expect(apply(cancelled, weekly)).toBeUndefined()
    expect(invitationOf(calendar("REPLY", ...event("UID:standup", "DTSTART:20261026T080000Z")))).toBeUndefined()
    expect(invitationOf(["BEGIN:VCALENDAR", ...event("UID:x", "DTSTART:20261026T080000Z"), "END:VCALENDAR"].join("\r\n"))).toBeUndefined()
    expect(invitationOf("not a calendar")).toBeUndefined()
  })
})

describe("repeat rules (RRULE) as RFC 5545 writes them", () => {
  it("takes what calendar programs write", () => {
    for (const rule of [
      "FREQ=WEEKLY;BYDAY=TH", "FREQ=WEEKLY;COUNT=4;BYDAY=TH", "FREQ=MONTHLY;INTERVAL=1;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",
      "FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU", "FREQ=MONTHLY;BYDAY=5MO", "FREQ=DAILY;UNTIL=20270101T000000Z", "FREQ=DAILY;UNTIL=20270101",
      "FREQ=YEARLY;BYWEEKNO=20;BYDAY=MO", "FREQ=MONTHLY;BYMONTHDAY=-1", "freq=weekly;wkst=su;byday=mo", "FREQ=YEARLY;RSCALE=GREGORIAN;SKIP=OMIT",
      "FREQ=HOURLY;BYHOUR=9,10,11;BYMINUTE=0,30"
    ]) expect(ruleProblem(rule), rule).toBeUndefined()
  })

  it("says what is wrong with one that is not; a part of no standard is refused, or passed over in a received rule", () => {
    expect([
      "FREQ=MONTHLY;BYDAY=9MO", "FREQ=WEEKLY;BYDAY=2MO", "FREQ=WEEKLY;BYDAY=XX", "FREQ=WEEKLY;COUNT=abc", "FREQ=WEEKLY;COUNT=-1",
      "FREQ=WEEKLY;INTERVAL=0", "FREQ=WEEKLY;COUNT=2;UNTIL=20270101T000000Z", "FREQ=WEEKLY;UNTIL=garbage", "FREQ=WEEKLY;UNTIL=20270230",
      "FREQ=MONTHLY;BYMONTHDAY=40", "FREQ=YEARLY;BYMONTH=13", "FREQ=WEEKLY;WKST=ZZ", "FREQ=DAILY;BYHOUR=25", "FREQ=DAILY;BYSETPOS=1",
      "FREQ=DAILY;BYSETPOS=0;BYHOUR=9", "FREQ=WEEKLY;BYMONTHDAY=1", "FREQ=MONTHLY;BYWEEKNO=3", "FREQ=MONTHLY;BYYEARDAY=100",
      "FREQ=WEEKLY;FREQ=DAILY", "BYDAY=MO", "FREQ=FORTNIGHTLY", "FREQ=WEEKLY;BYDAY", "FREQ=WEEKLY;FOO=BAR"
    ].map((rule) => [rule, ruleProblem(rule)])).toEqual([
      ["FREQ=MONTHLY;BYDAY=9MO", "numbers a monthly BYDAY at most 5 (a month has at most five of a weekday)"],
      ["FREQ=WEEKLY;BYDAY=2MO", "numbers a BYDAY (such as 2MO) only when it repeats monthly or yearly"],
      ["FREQ=WEEKLY;BYDAY=XX", "has BYDAY=XX, which is no value of BYDAY"],
      ["FREQ=WEEKLY;COUNT=abc", "has COUNT=abc, which is no value of COUNT"],
      ["FREQ=WEEKLY;COUNT=-1", "has COUNT=-1, which is no value of COUNT"],
      ["FREQ=WEEKLY;INTERVAL=0", "has INTERVAL=0, which is no value of INTERVAL"],
      ["FREQ=WEEKLY;COUNT=2;UNTIL=20270101T000000Z", "must end by COUNT or by UNTIL, not both"],
      ["FREQ=WEEKLY;UNTIL=garbage", "has UNTIL=garbage, which is no value of UNTIL"],
      ["FREQ=WEEKLY;UNTIL=20270230", "has UNTIL=20270230, which is no value of UNTIL"],
      ["FREQ=MONTHLY;BYMONTHDAY=40", "has BYMONTHDAY=40, which is no value of BYMONTHDAY"],
      ["FREQ=YEARLY;BYMONTH=13", "has BYMONTH=13, which is no value of BYMONTH"],
      ["FREQ=WEEKLY;WKST=ZZ", "has WKST=ZZ, which is no value of WKST"],
      ["FREQ=DAILY;BYHOUR=25", "has BYHOUR=25, which is no value of BYHOUR"],
      ["FREQ=DAILY;BYSETPOS=1", "has BYSETPOS, which picks among what another BY… part gives (such as BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1)"],
      ["FREQ=DAILY;BYSETPOS=0;BYHOUR=9", "has BYSETPOS=0, which is no value of BYSETPOS"],
      ["FREQ=WEEKLY;BYMONTHDAY=1", "has BYMONTHDAY, which a weekly rule cannot"],
      ["FREQ=MONTHLY;BYWEEKNO=3", "has BYWEEKNO, which only a yearly rule can"],
      ["FREQ=MONTHLY;BYYEARDAY=100", "has BYYEARDAY, which only a yearly (or finer than daily) rule can"],
      ["FREQ=WEEKLY;FREQ=DAILY", "names FREQ twice"],
      ["BYDAY=MO", "must name FREQ (DAILY, WEEKLY, MONTHLY, YEARLY…)"],
      ["FREQ=FORTNIGHTLY", "has FREQ=FORTNIGHTLY, which is no value of FREQ"],
      ["FREQ=WEEKLY;BYDAY", "has \"BYDAY\" where a part such as FREQ=WEEKLY belongs"],
      ["FREQ=WEEKLY;FOO=BAR", "has FOO, which is no part of a repeat rule"]
    ])
    expect(ruleProblem("FREQ=WEEKLY;X-OUTLOOK=1;BYDAY=MO", "ignore")).toBeUndefined()
  })

  it("an invitation whose event's rule is not one is damaged: not an invitation the schedule keeps; a zone's own rules are the zone's", () => {
    const stranger = (rule: string) =>
      calendar("REQUEST", ...event("UID:x", "DTSTART:20261208T100000Z", "DTEND:20261208T110000Z", `RRULE:${rule}`, "SUMMARY:Stranger"))
    for (const rule of ["FREQ=MONTHLY;BYDAY=9MO", "FREQ=WEEKLY;UNTIL=garbage"]) {
      expect(invitationOf(stranger(rule)), rule).toBeUndefined()
      expect(Either.match(readInvitation(stranger(rule)), { onLeft: (why) => why, onRight: () => "read" }), rule).toBe("damaged")
    }
    expect(invitationOf(stranger("FREQ=WEEKLY;BYDAY=TU;X-NAME=1"))).toMatchObject({ uid: "x" })
    expect(invitationOf(fixture("outlook-request.ics"))).toBeDefined()
  })
})
