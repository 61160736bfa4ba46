/**
 * Free time (services/schedule/availability.ts): slots within working hours in a zone, around busy
 * intervals. Pure: no database, no server.
 */
import { describe, expect, it } from "vitest"
import { freeSlots, localIso, type WorkingHours } from "../../services/schedule/availability.ts"

const MINUTE = 60_000
const at = (iso: string) => Date.parse(iso)
const weekdays = new Set([1, 2, 3, 4, 5])
const paris: WorkingHours = { timeZone: "Europe/Paris", opens: 9 * 60, closes: 12 * 60, weekdays }
const shown = (result: ReturnType<typeof freeSlots>, zone = "Europe/Paris") =>
  result.slots.map((s) => `${localIso(zone, s.start).slice(5, 16)}-${localIso(zone, s.end).slice(11, 16)}`)

describe("free slots", () => {
  it("start at a day's opening and every step after, in the zone's wall-clock time across summer time, on working days only", () => {
    // Friday 27 March to Monday 30 March 2026: Paris moves to summer time on Sunday 29.
    const range = { start: at("2026-03-27T00:00:00Z"), end: at("2026-03-31T00:00:00Z") }
    const result = freeSlots([], range, paris, 60 * MINUTE, 90 * MINUTE, 100)
    expect(shown(result)).toEqual(["03-27T09:00-10:00", "03-27T10:30-11:30", "03-30T09:00-10:00", "03-30T10:30-11:30"])
    // 09:00 in Paris is 08:00 UTC before the change and 07:00 after.
    expect(result.slots.map((s) => new Date(s.start).toISOString())).toEqual([
      "2026-03-27T08:00:00.000Z", "2026-03-27T09:30:00.000Z", "2026-03-30T07:00:00.000Z", "2026-03-30T08:30:00.000Z"
    ])
    expect(localIso("Europe/Paris", result.slots[2]!.start)).toBe("2026-03-30T09:00:00+02:00")
    // A year of fewer digits is written with four, as ISO 8601 writes it.
    expect([localIso("UTC", Date.UTC(999, 0, 4, 9)), localIso("UTC", new Date("0001-01-01T09:00:00Z").getTime())])
      .toEqual(["0999-01-04T09:00:00+00:00", "0001-01-01T09:00:00+00:00"])
  })

  it("leave out every slot a busy interval overlaps (touching is free), joined or not, and what lies outside the range", () => {
    const range = { start: at("2026-12-03T08:15:00Z"), end: at("2026-12-04T00:00:00Z") }
    const busy = [
      { start: at("2026-12-03T09:00:00Z"), end: at("2026-12-03T09:30:00Z") }, // 10:00-10:30 in Paris
      { start: at("2026-12-03T09:20:00Z"), end: at("2026-12-03T09:45:00Z") }, // overlaps it: until 10:45
      { start: at("2026-12-03T10:30:00Z"), end: at("2026-12-03T10:30:00Z") } // no length: takes nothing
    ]
    const result = freeSlots(busy, range, paris, 30 * MINUTE, 30 * MINUTE, 100)
    // 09:00 starts before the range (08:15 UTC is 09:15 in Paris).
    expect(shown(result)).toEqual(["12-03T09:30-10:00", "12-03T11:00-11:30", "12-03T11:30-12:00"])
  })

  it("stop at the limit, saying there were more", () => {
    const range = { start: at("2026-12-01T00:00:00Z"), end: at("2026-12-31T00:00:00Z") }
    const result = freeSlots([], range, { ...paris, weekdays: new Set([7]) }, 3 * 60 * MINUTE, 60 * MINUTE, 2)
    expect([shown(result), result.hasMore]).toEqual([["12-06T09:00-12:00", "12-13T09:00-12:00"], true])
    expect(freeSlots([], range, { ...paris, weekdays: new Set([7]) }, 3 * 60 * MINUTE, 60 * MINUTE, 4).hasMore).toBe(false)
  })
})
