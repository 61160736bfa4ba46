/**
 * How fine a repeat rule the schedule walks, shared by the rule's reader (occurrences.ts) and the
 * meetings' schemas; plain text, no calendar library (the schemas travel in the client package).
 */

/**
 * At most this many times of day a rule may name (its BYHOUR × BYMINUTE × BYSECOND values) to be
 * walked. ical.js builds each period's whole set before its first repeat: a weekly rule naming every
 * second of the day took 400 ms to begin, one naming every minute of the day took 240 ms to walk a
 * day. No calendar program writes such a rule.
 */
export const MAX_TIMES_OF_DAY = 24

/** How many times of day an RRULE's text names (1 when it names none: DTSTART's). */
export const timesOfDay = (rule: string) =>
  ["BYHOUR", "BYMINUTE", "BYSECOND"].reduce((n, part) => {
    const values = new RegExp(`(?:^|;)${part}=([^;]*)`, "i").exec(rule)?.[1]
    return n * (values === undefined ? 1 : values.split(",").length)
  }, 1)

const WEEKDAY = "(?:SU|MO|TU|WE|TH|FR|SA)"
const FREQUENCIES = ["SECONDLY", "MINUTELY", "HOURLY", "DAILY", "WEEKLY", "MONTHLY", "YEARLY"]

/** A list of whole numbers, each within [min, max] (with `signed`, also -max to -min). */
const numbers = (min: number, max: number, signed: boolean) => (value: string) =>
  value.split(",").every((item) => {
    const m = (signed ? /^[+-]?\d{1,3}$/ : /^\d{1,3}$/).test(item) ? Math.abs(Number(item)) : NaN
    return m >= min && m <= max
  })

/** Whether `value` is an RRULE's UNTIL: a date (YYYYMMDD) or a date-time (YYYYMMDDTHHMMSS, Z for UTC) that exists. */
const isUntil = (value: string) => {
  const m = /^(\d{4})(\d{2})(\d{2})(?:T(\d{2})(\d{2})(\d{2})Z?)?$/.exec(value)
  if (m === null) return false
  const [year, month, day, hour = 0, minute = 0, second = 0] = m.slice(1).map((f) => f === undefined ? undefined : Number(f))
  const date = new Date(Date.UTC(year!, month! - 1, day!))
  return date.getUTCMonth() === month! - 1 && date.getUTCDate() === day && hour! <= 23 && minute! <= 59 && second! <= 60
}

/** Each known part's value, as RFC 5545 §3.3.10 (and RFC 7529's RSCALE and SKIP) write it. */
const PART_VALUES: Record<string, (value: string) => boolean> = {
  FREQ: (value) => FREQUENCIES.includes(value),
  UNTIL: isUntil,
  COUNT: (value) => /^\d{1,9}$/.test(value) && Number(value) >= 1,
  INTERVAL: (value) => /^\d{1,9}$/.test(value) && Number(value) >= 1,
  BYSECOND: numbers(0, 60, false),
  BYMINUTE: numbers(0, 59, false),
  BYHOUR: numbers(0, 23, false),
  BYDAY: (value) => value.split(",").every((day) => new RegExp(`^(?:[+-]?(?:[1-9]|[1-4]\\d|5[0-3]))?${WEEKDAY}$`).test(day)),
  BYMONTHDAY: numbers(1, 31, true),
  BYYEARDAY: numbers(1, 366, true),
  BYWEEKNO: numbers(1, 53, true),
  BYMONTH: numbers(1, 12, false),
  BYSETPOS: numbers(1, 366, true),
  WKST: (value) => new RegExp(`^${WEEKDAY}$`).test(value),
  RSCALE: (value) => /^[A-Z0-9-]+$/.test(value),
  SKIP: (value) => ["OMIT", "BACKWARD", "FORWARD"].includes(value)
}

/**
 * What is wrong with an RRULE's text as RFC 5545 §3.3.10 writes a rule, in words for the caller;
 * undefined when nothing is. Each part once, FREQ among them, its value in range, and the parts'
 * rules with each other (COUNT or UNTIL, not both; a numbered BYDAY only monthly, at most the 5th,
 * or yearly; BYWEEKNO only yearly; …). A rule a calendar program cannot read, or that makes the
 * calendar library fail (`FREQ=MONTHLY;BYDAY=9MO`), never reaches the schedule. `unknownParts`:
 * a part of no standard is refused, or passed over as calendar programs pass it (a received
 * invitation's rule).
 */
export const ruleProblem = (rule: string, unknownParts: "refuse" | "ignore" = "refuse"): string | undefined => {
  const parts = new Map<string, string>()
  for (const part of rule.split(";")) {
    const m = /^([A-Za-z-]+)=(.+)$/.exec(part.trim())
    if (m === null) return `has "${part}" where a part such as FREQ=WEEKLY belongs`
    const [name, value] = [m[1]!.toUpperCase(), m[2]!.toUpperCase()]
    const valid = PART_VALUES[name]
    if (valid === undefined) {
      if (unknownParts === "refuse") return `has ${name}, which is no part of a repeat rule`
      continue
    }
    if (parts.has(name)) return `names ${name} twice`
    if (!valid(value)) return `has ${name}=${m[2]}, which is no value of ${name}`
    parts.set(name, value)
  }
  const freq = parts.get("FREQ")
  if (freq === undefined) return "must name FREQ (DAILY, WEEKLY, MONTHLY, YEARLY…)"
  if (parts.has("COUNT") && parts.has("UNTIL")) return "must end by COUNT or by UNTIL, not both"
  const numbered = (parts.get("BYDAY") ?? "").split(",").map((day) => /^[+-]?(\d+)/.exec(day)?.[1]).filter((n) => n !== undefined).map(Number)
  if (numbered.length > 0) {
    if (freq !== "MONTHLY" && freq !== "YEARLY") return "numbers a BYDAY (such as 2MO) only when it repeats monthly or yearly"
    if (freq === "MONTHLY" && numbered.some((n) => n > 5)) return "numbers a monthly BYDAY at most 5 (a month has at most five of a weekday)"
    if (parts.has("BYWEEKNO")) return "numbers a BYDAY only without BYWEEKNO"
  }
  if (parts.has("BYMONTHDAY") && freq === "WEEKLY") return "has BYMONTHDAY, which a weekly rule cannot"
  if (parts.has("BYYEARDAY") && ["DAILY", "WEEKLY", "MONTHLY"].includes(freq)) return "has BYYEARDAY, which only a yearly (or finer than daily) rule can"
  if (parts.has("BYWEEKNO") && freq !== "YEARLY") return "has BYWEEKNO, which only a yearly rule can"
  if (parts.has("BYSETPOS") && ![...parts.keys()].some((name) => name.startsWith("BY") && name !== "BYSETPOS")) {
    return "has BYSETPOS, which picks among what another BY… part gives (such as BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1)"
  }
  return undefined
}
