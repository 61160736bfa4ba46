/**
 * When a mailbox is free (Schedule.availability): the times of a given length, within its working
 * hours in its time zone, that none of its busy occurrences overlaps. Pure: intervals in, slots out.
 *
 * Working hours are wall-clock times in the zone on the weekdays given, so 09:00-17:00 in Paris is
 * 08:00-16:00 UTC in winter and 07:00-15:00 in summer; a day's slots start at its opening and every
 * `step` after, each `length` long, the last ending by its close.
 */
import { fromWallTime, utcTime, wallTime } from "../time-zones.ts"

export const MINUTE = 60_000
const DAY = 86_400_000

export interface WorkingHours {
  readonly timeZone: string
  /** Minutes after midnight, local time. */
  readonly opens: number
  readonly closes: number
  /** ISO weekdays: 1 Monday … 7 Sunday. */
  readonly weekdays: ReadonlySet<number>
}

export interface Interval {
  readonly start: number
  readonly end: number
}

/** The busy intervals in order of start, overlapping and touching ones joined. */
const joined = (busy: ReadonlyArray<Interval>): Array<Interval> => {
  const sorted = [...busy].filter((b) => b.end > b.start).sort((a, b) => a.start - b.start)
  const out: Array<{ start: number; end: number }> = []
  for (const b of sorted) {
    const last = out.at(-1)
    if (last !== undefined && b.start <= last.end) last.end = Math.max(last.end, b.end)
    else out.push({ ...b })
  }
  return out
}

/**
 * The free slots between `from` and `to` (milliseconds since 1970), at most `limit` of them and
 * whether there were more: each `length` long, starting at a day's opening and every `step` after.
 */
export const freeSlots = (
  busy: ReadonlyArray<Interval>,
  range: Interval,
  hours: WorkingHours,
  length: number,
  step: number,
  limit: number
): { readonly slots: Array<Interval>; readonly hasMore: boolean } => {
  const blocks = joined(busy)
  const slots: Array<Interval> = []
  const first = wallTime(hours.timeZone, range.start)
  // Each local day from the one `from` falls on, until a day opening at or after `to`.
  for (let day = utcTime(first.year, first.month - 1, first.day); ; day += DAY) {
    const date = new Date(day)
    const wall = (minutes: number) =>
      fromWallTime(hours.timeZone, {
        year: date.getUTCFullYear(),
        month: date.getUTCMonth() + 1,
        day: date.getUTCDate(),
        hour: Math.floor(minutes / 60),
        minute: minutes % 60,
        second: 0
      })
    const opens = wall(hours.opens)
    if (opens >= range.end) break
    const weekday = date.getUTCDay() === 0 ? 7 : date.getUTCDay()
    if (!hours.weekdays.has(weekday)) continue
    const closes = wall(hours.closes)
    let i = 0
    for (let start = opens; start + length <= closes; start += step) {
      const end = start + length
      if (start < range.start || end > range.end) continue
      while (i < blocks.length && blocks[i]!.end <= start) i++
      if (i < blocks.length && blocks[i]!.start < end) continue
      if (slots.length === limit) return { slots, hasMore: true }
      slots.push({ start, end })
    }
  }
  return { slots, hasMore: false }
}

/** "09:00" as minutes after midnight. */
export const minutesOf = (clock: string) => Number(clock.slice(0, 2)) * 60 + Number(clock.slice(3, 5))

/** A moment as RFC 3339 with the offset `zone` has then: "2026-12-03T15:00:00+01:00". */
export const localIso = (zone: string, utc: number) => {
  const w = wallTime(zone, utc)
  const offset = Math.round((utcTime(w.year, w.month - 1, w.day, w.hour, w.minute, w.second) - utc) / MINUTE)
  const pad = (n: number) => String(n).padStart(2, "0")
  const sign = offset < 0 ? "-" : "+"
  // Four digits, as ISO 8601 writes a year (0999, not 999).
  return `${String(w.year).padStart(4, "0")}-${pad(w.month)}-${pad(w.day)}T${pad(w.hour)}:${pad(w.minute)}:${pad(w.second)}` +
    `${sign}${pad(Math.floor(Math.abs(offset) / 60))}:${pad(Math.abs(offset) % 60)}`
}
