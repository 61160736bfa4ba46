/**
 * Time zones through Intl, and as the VTIMEZONE a meeting's invitation carries
 * (services/time-zones.ts): read back by ical.js, the zone must put a local time at the
 * UTC moment Intl does, in summer and in winter, in later years, north and south of the equator.
 */
import ICAL from "ical.js"
import { describe, expect, it } from "vitest"
import { fromWallTime, isRealWallTime, isTimeZone, localMoment, localTime, offsetMinutes, utcTime, vtimezoneLines, wallTime } from "../../services/time-zones.ts"

/** The UTC moment (ISO) of local `wall` in `zone` as the written VTIMEZONE (from `year`'s rules) puts it. */
const throughVtimezone = (zone: string, year: number, wall: string) => {
  const component = new ICAL.Component(ICAL.parse(["BEGIN:VCALENDAR", ...vtimezoneLines(zone, year), "END:VCALENDAR", ""].join("\r\n")))
  const timezone = new ICAL.Timezone(component.getFirstSubcomponent("vtimezone")!)
  const [date, time] = wall.split("T") as [string, string]
  const [y, m, d] = date.split("-").map(Number) as [number, number, number]
  const [hh, mm] = time.split(":").map(Number) as [number, number]
  return new Date(ICAL.Time.fromData({ year: y, month: m, day: d, hour: hh, minute: mm, second: 0, isDate: false }, timezone).toUnixTime() * 1000).toISOString()
}

describe("time zones", () => {
  it("knows IANA zones and refuses others", () => {
    expect([isTimeZone("Europe/Paris"), isTimeZone("UTC"), isTimeZone("Pacific Standard Time"), isTimeZone("Mars/Olympus")]).toEqual([true, true, false, false])
    expect([offsetMinutes("Asia/Kolkata", Date.UTC(2026, 0, 1)), offsetMinutes("Mars/Olympus", 0)]).toEqual([330, undefined])
  })

  it("turns wall-clock times into moments and back, on both sides of a change to summer time", () => {
    expect(new Date(fromWallTime("Europe/Paris", { year: 2026, month: 3, day: 29, hour: 1, minute: 30, second: 0 })).toISOString()).toBe("2026-03-29T00:30:00.000Z")
    expect(new Date(fromWallTime("Europe/Paris", { year: 2026, month: 3, day: 29, hour: 3, minute: 30, second: 0 })).toISOString()).toBe("2026-03-29T01:30:00.000Z")
    expect(wallTime("America/New_York", Date.UTC(2026, 6, 4, 16))).toEqual({ year: 2026, month: 7, day: 4, hour: 12, minute: 0, second: 0 })
    // Any year: Date.UTC reads 0-99 as 1900-1999.
    expect(new Date(utcTime(50, 0, 1, 12)).toISOString()).toBe("0050-01-01T12:00:00.000Z")
    expect(new Date(fromWallTime("UTC", { year: 50, month: 1, day: 1, hour: 12, minute: 0, second: 0 })).toISOString()).toBe("0050-01-01T12:00:00.000Z")
    expect([0, 100, 1900, 2000].map((year) => isRealWallTime({ year, month: 2, day: 29, hour: 0, minute: 0, second: 0 }))).toEqual([true, false, false, true])
  })

  it("places a local time written without an offset: none where the clocks skip it, the first where they pass it twice", () => {
    const at = (local: string, zone: string) => {
      const moment = localMoment(local, zone)
      return moment === undefined ? undefined : new Date(moment).toISOString()
    }
    expect(at("2026-12-03T15:00", "Europe/Paris")).toBe("2026-12-03T14:00:00.000Z")
    expect(at("2026-07-03T15:00:00", "Europe/Paris")).toBe("2026-07-03T13:00:00.000Z")
    expect(at("2026-12-03T15:00", "Asia/Kolkata")).toBe("2026-12-03T09:30:00.000Z")
    // Spring forward: 02:30 never happens in Paris; fall back: 02:30 happens at +02:00, then at +01:00.
    expect(at("2026-03-29T02:30", "Europe/Paris")).toBeUndefined()
    expect(at("2026-10-25T02:30", "Europe/Paris")).toBe("2026-10-25T00:30:00.000Z")
    expect(at("2026-11-01T01:30", "America/New_York")).toBe("2026-11-01T05:30:00.000Z")
    // Not a local time: a day that does not exist, an offset, another zone's name.
    expect([at("2026-02-30T10:00", "UTC"), at("2026-12-03T15:00Z", "UTC"), at("2026-12-03T15:00", "Mars/Olympus")]).toEqual([undefined, undefined, undefined])
  })

  it("places a wall-clock time the clocks pass twice at the first pass, east and west of Greenwich and by half an hour; one they skip as before", () => {
    const first = (zone: string, local: string) => {
      const wall = localTime(local)!
      return [new Date(fromWallTime(zone, wall)).toISOString(), new Date(localMoment(local, zone)!).toISOString()]
    }
    // Paris falls back from 03:00 (+02:00) to 02:00 (+01:00); New York from 02:00 (-04:00) to 01:00 (-05:00);
    // Lord Howe from 02:00 (+11:00) to 01:30 (+10:30).
    expect(first("Europe/Paris", "2027-10-31T02:30")).toEqual(["2027-10-31T00:30:00.000Z", "2027-10-31T00:30:00.000Z"])
    expect(first("America/New_York", "2027-11-07T01:30")).toEqual(["2027-11-07T05:30:00.000Z", "2027-11-07T05:30:00.000Z"])
    expect(first("Australia/Lord_Howe", "2027-04-04T01:45")).toEqual(["2027-04-03T14:45:00.000Z", "2027-04-03T14:45:00.000Z"])
    // Either side of the repeated hour, the one moment there is.
    expect(first("Europe/Paris", "2027-10-31T01:59")).toEqual(["2027-10-30T23:59:00.000Z", "2027-10-30T23:59:00.000Z"])
    expect(first("Europe/Paris", "2027-10-31T03:00")).toEqual(["2027-10-31T02:00:00.000Z", "2027-10-31T02:00:00.000Z"])
    // Skipped (spring forward): the schedule reads it as it did; a meeting refuses it.
    expect(new Date(fromWallTime("Europe/Paris", localTime("2027-03-28T02:30")!)).toISOString()).toBe("2027-03-28T01:30:00.000Z")
    expect(new Date(fromWallTime("America/New_York", localTime("2027-03-14T02:30")!)).toISOString()).toBe("2027-03-14T06:30:00.000Z")
    expect(localMoment("2027-03-28T02:30", "Europe/Paris")).toBeUndefined()
  })

  it("writes a zone with summer time as two yearly rules that hold in later years, north and south", () => {
    expect(vtimezoneLines("Europe/Paris", 2026)).toEqual([
      "BEGIN:VTIMEZONE",
      "TZID:Europe/Paris",
      "BEGIN:DAYLIGHT",
      "DTSTART:19700329T020000",
      "RRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU",
      "TZOFFSETFROM:+0100",
      "TZOFFSETTO:+0200",
      "END:DAYLIGHT",
      "BEGIN:STANDARD",
      "DTSTART:19701025T030000",
      "RRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU",
      "TZOFFSETFROM:+0200",
      "TZOFFSETTO:+0100",
      "END:STANDARD",
      "END:VTIMEZONE"
    ])
    for (const [zone, wall] of [
      ["Europe/Paris", "2026-12-03T15:00"],
      ["Europe/Paris", "2028-07-06T15:00"],
      ["America/New_York", "2027-03-15T09:00"],
      ["America/New_York", "2029-11-30T09:00"],
      ["Australia/Sydney", "2027-01-10T10:00"],
      ["Australia/Sydney", "2027-06-10T10:00"],
      ["Asia/Kolkata", "2027-06-10T10:00"]
    ] as const) {
      const [date, time] = wall.split("T") as [string, string]
      const [y, m, d] = date.split("-").map(Number) as [number, number, number]
      const [hh, mm] = time.split(":").map(Number) as [number, number]
      const byIntl = new Date(fromWallTime(zone, { year: y, month: m, day: d, hour: hh, minute: mm, second: 0 })).toISOString()
      expect(`${zone} ${wall} ${throughVtimezone(zone, 2026, wall)}`).toBe(`${zone} ${wall} ${byIntl}`)
    }
  })

  it("writes a zone without summer time as its one offset", () => {
    expect(vtimezoneLines("Asia/Kolkata", 2026)).toEqual([
      "BEGIN:VTIMEZONE",
      "TZID:Asia/Kolkata",
      "BEGIN:STANDARD",
      "DTSTART:19700101T000000",
      "TZOFFSETFROM:+0530",
      "TZOFFSETTO:+0530",
      "END:STANDARD",
      "END:VTIMEZONE"
    ])
  })
})
