/**
 * IANA time zones through the runtime's own database (Intl): the offset of a zone at a moment, a
 * moment's wall-clock time in a zone, and a zone written as an iCalendar VTIMEZONE.
 *
 * A VTIMEZONE is written as Outlook writes one: each change of offset (summer time starting, ending)
 * as a yearly rule (month, the nth or last weekday, the local time), read off the changes of a year
 * the event falls in, so a repeating meeting keeps its local time across the changes in every year
 * the zone keeps that rule. A zone without summer time is one standard offset.
 *
 * Pure, but for a bounded memo of the offsets read (`offsetMinutes`).
 */

const MINUTE = 60_000
const DAY = 86_400_000

/**
 * The UTC moment of a date and time, as Date.UTC gives it (month from 0, fields past their range roll
 * over) but for every year: Date.UTC reads years 0-99 as 1900-1999.
 */
export const utcTime = (year: number, month: number, day: number, hour = 0, minute = 0, second = 0): number => {
  const moment = new Date(0)
  moment.setUTCFullYear(year, month, day)
  moment.setUTCHours(hour, minute, second, 0)
  return moment.getTime()
}

const formatters = new Map<string, Intl.DateTimeFormat>()

/** A formatter of wall-clock fields in `zone`; throws RangeError for a zone Intl does not know. */
const formatterOf = (zone: string) => {
  let formatter = formatters.get(zone)
  if (formatter === undefined) {
    formatter = new Intl.DateTimeFormat("en-US", {
      timeZone: zone,
      hourCycle: "h23",
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
      hour: "2-digit",
      minute: "2-digit",
      second: "2-digit"
    })
    formatters.set(zone, formatter)
  }
  return formatter
}

export interface WallTime {
  readonly year: number
  readonly month: number
  readonly day: number
  readonly hour: number
  readonly minute: number
  readonly second: number
}

/**
 * Whether a wall time's fields name one that exists: Date.parse and ical.js roll 30 February over into
 * March and 24:00 into the next day, which nobody who wrote them meant. `leapSecond`: a :60 is allowed
 * (iCalendar's times may have one).
 */
export const isRealWallTime = (wall: WallTime, options?: { readonly leapSecond?: boolean }): boolean => {
  const daysInMonth = new Date(utcTime(wall.year, wall.month, 0)).getUTCDate()
  return wall.month >= 1 && wall.month <= 12 && wall.day >= 1 && wall.day <= daysInMonth && wall.hour <= 23 &&
    wall.minute <= 59 && wall.second <= (options?.leapSecond ? 60 : 59)
}

/** The wall-clock time in `zone` at the UTC moment `utc` (milliseconds). */
export const wallTime = (zone: string, utc: number): WallTime => {
  const parts = formatterOf(zone).formatToParts(new Date(utc))
  const part = (type: Intl.DateTimeFormatPartTypes) => Number(parts.find((p) => p.type === type)?.value)
  return { year: part("year"), month: part("month"), day: part("day"), hour: part("hour"), minute: part("minute"), second: part("second") }
}

const asUtc = (wall: WallTime) => utcTime(wall.year, wall.month - 1, wall.day, wall.hour, wall.minute, wall.second)

/**
 * Offsets asked for before, by zone and moment: Intl's formatting costs ~10 µs a reading, and a schedule
 * reads the same moments at every request (a weekly meeting's). Let go of whole once it holds MAX_KEPT.
 */
const offsets = new Map<string, number | undefined>()
const MAX_KEPT = 50_000

/** The longest zone name taken: IANA's are under 32 characters. */
const MAX_ZONE_CHARS = 64

/** The offset of `zone` from UTC at the moment `utc`, in minutes; undefined when Intl does not know the zone. */
export const offsetMinutes = (zone: string, utc: number): number | undefined => {
  if (zone.length > MAX_ZONE_CHARS) return undefined
  const key = `${utc} ${zone}`
  if (offsets.has(key)) return offsets.get(key)
  let offset: number | undefined
  try {
    offset = Math.round((asUtc(wallTime(zone, utc)) - utc) / MINUTE)
  } catch {
    offset = undefined
  }
  if (offsets.size >= MAX_KEPT) offsets.clear()
  offsets.set(key, offset)
  return offset
}

/** Whether `zone` is an IANA time zone this runtime knows ("Europe/Paris"; "UTC"). */
export const isTimeZone = (zone: string): boolean => offsetMinutes(zone, 0) !== undefined

/**
 * The UTC moments at which a zone's clocks read `wall`, earliest first, `offsetAt` giving the zone's
 * offset (minutes) at a UTC moment: one as a rule, none for a time they skip (moving forward), two for
 * one they pass twice (moving back), of which RFC 5545 §3.3.5 means the first. Each offset the zone has
 * within a day of it is tried: those that give back the same wall time are the moments.
 */
export const wallMoments = (wall: WallTime, offsetAt: (utc: number) => number): Array<number> => {
  const guess = asUtc(wall)
  const offsets = new Set([offsetAt(guess - DAY), offsetAt(guess), offsetAt(guess + DAY)])
  return [...offsets].map((offset) => guess - offset * MINUTE).filter((utc) => offsetAt(utc) * MINUTE === guess - utc).sort((a, b) => a - b)
}

/**
 * The UTC moment of a wall-clock time in `zone` (an IANA zone Intl knows): for one the clocks pass
 * twice, the first (RFC 5545 §3.3.5), as `localMoment` places a meeting's.
 */
export const fromWallTime = (zone: string, wall: WallTime): number => {
  const first = wallMoments(wall, (utc) => offsetMinutes(zone, utc)!)[0]
  if (first !== undefined) return first
  // A time the clocks skip, placed as it always was: by the offset at the wall time read as UTC's moment.
  const guess = asUtc(wall)
  const near = offsetMinutes(zone, guess)!
  return guess - (offsetMinutes(zone, guess - near * MINUTE) ?? near) * MINUTE
}

/** A local time written without an offset (`2026-12-03T15:00`, seconds optional) that exists on a calendar; else undefined. */
export const localTime = (local: string): WallTime | undefined => {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?$/.exec(local)
  if (m === null) return undefined
  const [year, month, day, hour, minute, second = 0] = m.slice(1).map((f) => f === undefined ? undefined : Number(f))
  const wall: WallTime = { year: year!, month: month!, day: day!, hour: hour!, minute: minute!, second }
  return isRealWallTime(wall) ? wall : undefined
}

/**
 * The UTC moment of a local time written without an offset (`2026-12-03T15:00` or `…T15:00:00`,
 * seconds optional) in `zone`: for a time the clocks skip (moving forward), undefined; for one they
 * pass twice (moving back), the first. Undefined too for what is no such local time.
 */
export const localMoment = (local: string, zone: string): number | undefined => {
  const wall = localTime(local)
  if (wall === undefined || offsetMinutes(zone, 0) === undefined) return undefined
  return wallMoments(wall, (utc) => offsetMinutes(zone, utc)!)[0]
}

interface Change {
  /** The change's moment, in UTC milliseconds. */
  readonly at: number
  readonly from: number
  readonly to: number
}

/** The changes of `zone`'s offset during `year`, each found to the minute. */
const changesIn = (zone: string, year: number): Array<Change> => {
  const changes: Array<Change> = []
  const end = utcTime(year + 1, 0, 1)
  let previous = offsetMinutes(zone, utcTime(year, 0, 1))!
  for (let day = utcTime(year, 0, 1) + DAY; day <= end; day += DAY) {
    const offset = offsetMinutes(zone, day)!
    if (offset === previous) continue
    let [before, after] = [day - DAY, day]
    while (after - before > MINUTE) {
      const middle = Math.floor((before + after) / 2 / MINUTE) * MINUTE
      if (offsetMinutes(zone, middle) === previous) before = middle
      else after = middle
    }
    changes.push({ at: after, from: previous, to: offset })
    previous = offset
  }
  return changes
}

const pad = (n: number, width = 2) => String(n).padStart(width, "0")

/** An offset as iCalendar writes it: +0100, -0430. */
const utcOffset = (minutes: number) => `${minutes < 0 ? "-" : "+"}${pad(Math.floor(Math.abs(minutes) / 60))}${pad(Math.abs(minutes) % 60)}`

const WEEKDAYS = ["SU", "MO", "TU", "WE", "TH", "FR", "SA"]

/** The day in `year`'s `month` that is the `nth` (-1: last) `weekday` (0 Sunday). */
const nthWeekday = (year: number, month: number, weekday: number, nth: number) => {
  const days = new Date(utcTime(year, month, 0)).getUTCDate()
  if (nth > 0) {
    const first = new Date(utcTime(year, month - 1, 1)).getUTCDay()
    return 1 + ((weekday - first + 7) % 7) + (nth - 1) * 7
  }
  const last = new Date(utcTime(year, month - 1, days)).getUTCDay()
  return days - ((last - weekday + 7) % 7)
}

/**
 * `zone` as a VTIMEZONE's lines (CRLF not included), its rules read off the changes of `year`: a
 * STANDARD and a DAYLIGHT observance for a zone with summer time, one STANDARD for one without. Each
 * rule's first onset is written in 1970 (as Outlook writes 1601), so the zone is defined for any date.
 */
export const vtimezoneLines = (zone: string, year: number): Array<string> => {
  const changes = changesIn(zone, year)
  const lines = ["BEGIN:VTIMEZONE", `TZID:${zone}`]
  if (changes.length === 0) {
    const offset = utcOffset(offsetMinutes(zone, utcTime(year, 6, 1))!)
    lines.push("BEGIN:STANDARD", "DTSTART:19700101T000000", `TZOFFSETFROM:${offset}`, `TZOFFSETTO:${offset}`, "END:STANDARD")
  }
  for (const change of changes) {
    // The change's local time, as the clock read just before it.
    const local = wallTime("UTC", change.at + change.from * MINUTE)
    const weekday = new Date(utcTime(local.year, local.month - 1, local.day)).getUTCDay()
    const daysInMonth = new Date(utcTime(local.year, local.month, 0)).getUTCDate()
    const nth = local.day + 7 > daysInMonth ? -1 : Math.ceil(local.day / 7)
    const kind = change.to > change.from ? "DAYLIGHT" : "STANDARD"
    const onset = nthWeekday(1970, local.month, weekday, nth)
    lines.push(
      `BEGIN:${kind}`,
      `DTSTART:1970${pad(local.month)}${pad(onset)}T${pad(local.hour)}${pad(local.minute)}00`,
      `RRULE:FREQ=YEARLY;BYMONTH=${local.month};BYDAY=${nth}${WEEKDAYS[weekday]}`,
      `TZOFFSETFROM:${utcOffset(change.from)}`,
      `TZOFFSETTO:${utcOffset(change.to)}`,
      `END:${kind}`
    )
  }
  lines.push("END:VTIMEZONE")
  return lines
}
