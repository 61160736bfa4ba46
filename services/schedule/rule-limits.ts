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
