/**
 * A Date header's moment as RFC 5322 reads it (§3.3, with the obsolete forms of §4.3 a receiver must
 * take): `[day-of-week ","] day month year hour ":" minute [":" second] zone`, comments and folding
 * whitespace anywhere between. JavaScript's Date (what mailparser hands back) reads years its own way:
 * `0049` as 2049, `149` as 0149 and `49` as 2049, where RFC 5322 means 49, 2049 and 2049; and a two-digit
 * `99` as 1999 only by chance of its heuristics. Pure.
 */

import { isRealWallTime, utcTime } from "../time-zones.ts"

const MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

/** The obsolete zone names (§4.3), in minutes east of UTC; a military letter is "-0000", an unknown offset. */
const ZONES: Readonly<Record<string, number>> = {
  ut: 0,
  gmt: 0,
  edt: -4 * 60,
  est: -5 * 60,
  cdt: -5 * 60,
  cst: -6 * 60,
  mdt: -6 * 60,
  mst: -7 * 60,
  pdt: -7 * 60,
  pst: -8 * 60
}

const FORM =
  /^(?:[a-z]{3}\s*,\s*)?(\d{1,2})\s*([a-z]{3})\s*(\d{2,4})\s+(\d{1,2})\s*:\s*(\d{2})(?:\s*:\s*(\d{2}))?\s*(?:([+-])(\d{2})(\d{2})|([a-z]{1,3}))?$/i

/** Comments (nested, with quoted pairs) as the single space they stand for. */
const withoutComments = (value: string) => {
  let out = ""
  let depth = 0
  for (let i = 0; i < value.length; i++) {
    const c = value[i]!
    if (depth > 0 && c === "\\") i++
    else if (c === "(") depth++
    else if (c === ")" && depth > 0) {
      if (--depth === 0) out += " "
    } else if (depth === 0) out += c
  }
  return out.replace(/\s+/g, " ").trim()
}

/** The moment a Date header's value names, read as RFC 5322 writes it; undefined when it is not in that form. */
export const dateHeaderMoment = (value: string): Date | undefined => {
  const m = FORM.exec(withoutComments(value))
  if (m === null) return undefined
  const [, dayText, monthText, yearText, hourText, minuteText, secondText, sign, zoneHours, zoneMinutes, zoneName] = m
  const month = MONTHS.indexOf(monthText!.toLowerCase())
  const written = Number(yearText)
  // §4.3: two digits are 1950-2049, three 1900 more; four as written.
  const year = yearText!.length === 2 ? (written < 50 ? 2000 + written : 1900 + written) : yearText!.length === 3 ? 1900 + written : written
  const wall = { year, month: month + 1, day: Number(dayText), hour: Number(hourText), minute: Number(minuteText), second: Number(secondText ?? 0) }
  if (month < 0 || !isRealWallTime(wall, { leapSecond: true })) return undefined
  const offset = sign !== undefined
    ? (sign === "-" ? -1 : 1) * (Number(zoneHours) * 60 + Number(zoneMinutes))
    : zoneName === undefined
    ? 0
    : ZONES[zoneName.toLowerCase()] ?? (zoneName.length === 1 ? 0 : undefined)
  if (offset === undefined || Number(zoneMinutes ?? 0) > 59) return undefined
  // A leap second is the last second of its minute as a timestamp can hold it.
  return new Date(utcTime(year, month, wall.day, wall.hour, wall.minute - offset, Math.min(wall.second, 59)))
}
