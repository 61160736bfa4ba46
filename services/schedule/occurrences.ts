/**
 * A mailbox's events as its schedule keeps them, with Mozilla's ical.js. Pure: calendar text in,
 * calendar text or occurrences out.
 *
 * The schedule keeps one calendar per event (per UID): the latest invitation's events, the master and
 * the occurrences it changes (RECURRENCE-ID), with the zones they name. `merge` applies an
 * invitation, an update or a cancellation to it as RFC 5546 §2.1.5 has an attendee's calendar do:
 * - an update of the whole event (a master with a higher or equal SEQUENCE) replaces it; an older one
 *   is ignored (mail arrives out of order);
 * - an update of one occurrence replaces that occurrence's override, or adds one;
 * - a cancellation of the whole event marks it cancelled; of one occurrence, removes that occurrence
 *   (an EXDATE on the master, its override dropped).
 *
 * `occurrences` expands the kept calendar between two moments: a repeating event's occurrences by its
 * rules (RRULE, RDATE, EXDATE) in its own zone's wall-clock time, each override in place of the
 * occurrence it changes. `spanning` (`span`), when the calendar is kept, says from when to when the
 * event has occurrences, for the index that finds the events a range can hold, and walks once, within a
 * time budget, the rules a range cannot be walked from near (a COUNT is counted from the first repeat):
 * the last repeat that walk reaches is kept with the calendar, and expanding stops there.
 */
import { Either } from "effect"
import ICAL from "ical.js"
import { contentLines, eventTime, parseCalendar, organizerOf, zoneOf } from "../invitations/icalendar.ts"
import type { EventTime, Party } from "../invitations/schemas.ts"
import { MAX_TIMES_OF_DAY, timesOfDay } from "./rule-limits.ts"
import { utcTime } from "../time-zones.ts"

/** At most this many repeats are walked through per event (a daily meeting for 27 years). */
const MAX_STEPS = 10_000
/**
 * At most this many for a rule repeating more often than daily (an hourly one for 41 days, or one
 * naming several times of day): walking costs 10-20 µs a repeat on the request's thread, and no
 * calendar program asks an event to repeat by the second or minute, so such a rule in a stranger's
 * invitation must not buy 10,000 of them on every schedule request.
 */
const MAX_SUB_DAILY_STEPS = 1_000
const SUB_DAILY = new Set(["SECONDLY", "MINUTELY", "HOURLY"])
/**
 * How long keeping an event may spend walking its rules from their first repeat (`spanning`), once: ical.js
 * walks a repeat in 10 µs to over a millisecond by the rule's shape (Outlook's "last weekday of the
 * month" ~0.7 ms), so a stranger's COUNT=10000 from centuries ago would otherwise cost the worker
 * seconds. Ten years of that monthly rule take ~90 ms; a rule the budget stops is kept as far as it got.
 */
export const WALK_BUDGET_MS = 250

/**
 * The most dates an event the schedule keeps may name in RDATE and EXDATE, all its parts together:
 * ical.js reads every one at each expansion (~0.05 ms each), so a stranger's calendar listing 40,000
 * (1 MB) cost every schedule request of the mailbox over a second. A longer one is not kept.
 */
const MAX_KEPT_DATES = 500
/** The longest calendar text the schedule keeps: each range asked reads it whole (~0.4 ms a kilobyte). */
const MAX_KEPT_CHARS = 256 * 1024

const DATES = /^(?:RDATE|EXDATE)[;:]/i

/** Why the schedule does not keep a calendar (too long, or naming too many dates), or undefined when it does. */
export const unkeepable = (kept: string): string | undefined => {
  if (kept.length > MAX_KEPT_CHARS) return `${kept.length} characters, at most ${MAX_KEPT_CHARS}`
  let dates = 0
  for (const line of contentLines(kept)) {
    // The values follow the last colon: a parameter may hold one (a quoted TZID), dates hold none.
    if (DATES.test(line)) dates += line.slice(line.lastIndexOf(":") + 1).split(",").length
  }
  return dates > MAX_KEPT_DATES ? `${dates} dates in RDATE and EXDATE, at most ${MAX_KEPT_DATES}` : undefined
}

export type EventStatus = "confirmed" | "tentative" | "cancelled"

/** One occurrence of an event: when, and what its (possibly changed) copy says. */
export interface Occurrence {
  /** For a repeating event, the occurrence's original start (what RECURRENCE-ID names), as `start` is answered. */
  readonly recurrenceId: string | null
  readonly start: EventTime
  readonly end: EventTime
  /** Its start and end in milliseconds since 1970 (a floating time or a day read as UTC), to order and filter by. */
  readonly startsAt: number
  readonly endsAt: number
  readonly status: EventStatus
  readonly summary: string | null
  readonly location: string | null
  readonly url: string | null
  /** Whether it keeps its attendees busy: TRANSP:TRANSPARENT (a reminder, a holiday) does not. */
  readonly opaque: boolean
}

const uidOf = (event: ICAL.Component) => String(event.getFirstPropertyValue("uid") ?? "")
const sequenceOf = (event: ICAL.Component) => {
  const n = Number(event.getFirstPropertyValue("sequence") ?? 0)
  return Number.isSafeInteger(n) && n >= 0 ? n : 0
}
const recurrenceKey = (event: ICAL.Component) => {
  const value = event.getFirstPropertyValue("recurrence-id")
  return value instanceof ICAL.Time ? value.toString() : null
}
const masterOf = (calendar: ICAL.Component) => calendar.getAllSubcomponents("vevent").find((e) => !e.hasProperty("recurrence-id"))

const text = (event: ICAL.Component, name: string) => {
  const value = event.getFirstPropertyValue(name)
  return typeof value === "string" && value.trim() !== "" ? value.trim() : null
}

const statusOf = (event: ICAL.Component): EventStatus => {
  const status = text(event, "status")?.toLowerCase()
  return status === "cancelled" || status === "tentative" ? status : "confirmed"
}

/** A moment to order and filter by: UTC for a zoned or UTC time; a floating time or a day as if in UTC. */
const instant = (value: string) => Date.parse(/^\d{4}-\d{2}-\d{2}$|[Zz]$|[+-]\d\d:\d\d$/.test(value) ? value : `${value}Z`)
const momentOf = (time: EventTime) => instant(time.date ?? time.date_time!)

/** The zones and the events given, as a calendar of their own (each zone once). */
const keep = (zones: ReadonlyArray<ICAL.Component>, events: ReadonlyArray<ICAL.Component>) => {
  const kept = new ICAL.Component("vcalendar")
  kept.addPropertyWithValue("prodid", "-//Mailroom//Schedule//EN")
  kept.addPropertyWithValue("version", "2.0")
  const seen = new Set<string>()
  for (const zone of zones) {
    const tzid = String(zone.getFirstPropertyValue("tzid"))
    if (seen.has(tzid)) continue
    seen.add(tzid)
    kept.addSubcomponent(new ICAL.Component(zone.toJSON()))
  }
  for (const event of events) kept.addSubcomponent(new ICAL.Component(event.toJSON()))
  return `${kept.toString()}\r\n`
}

/** What an invitation says of one event, for the schedule: its UID and revision, and whether it cancels. */
export interface Invitation {
  readonly uid: string
  readonly method: "REQUEST" | "CANCEL"
  readonly sequence: number
  /** A calendar of this event's parts only (the zones they name included). */
  readonly calendar: string
  /** The one occurrence it moves or calls off (its RECURRENCE-ID, as the schedule's items name one); null: the whole event. */
  readonly occurrence: string | null
}

/**
 * The event an iTIP REQUEST or CANCEL is about, ready to `merge`; undefined for any other calendar
 * (a REPLY, a PUBLISH, a file that asks nothing) or one that cannot be read.
 */
export const invitationOf = (calendarText: string): Invitation | undefined => {
  const parsed = parseCalendar(calendarText)
  if (Either.isLeft(parsed)) return undefined
  const calendar = parsed.right
  const method = String(calendar.getFirstPropertyValue("method") ?? "").trim().toUpperCase()
  if (method !== "REQUEST" && method !== "CANCEL") return undefined
  const events = calendar.getAllSubcomponents("vevent")
  const first = events.find((e) => !e.hasProperty("recurrence-id")) ?? events[0]
  if (first === undefined) return undefined
  const uid = uidOf(first)
  if (uid === "") return undefined
  const about = events.filter((e) => uidOf(e) === uid)
  // A REQUEST says when; a CANCEL may name only the UID (and the occurrence).
  if (method === "REQUEST" && about.some((e) => !(e.getFirstPropertyValue("dtstart") instanceof ICAL.Time))) return undefined
  const overridden = about.every((e) => e.hasProperty("recurrence-id")) ? about[0]!.getFirstProperty("recurrence-id") : null
  const occurrence = overridden === null || !(overridden.getFirstValue() instanceof ICAL.Time)
    ? null
    : (() => {
      const id = eventTime(overridden.getFirstValue() as ICAL.Time, zoneOf(overridden), calendar)
      return id.date_time ?? id.date
    })()
  return {
    uid,
    method,
    sequence: Math.max(...about.map(sequenceOf)),
    calendar: keep(calendar.getAllSubcomponents("vtimezone"), about),
    occurrence
  }
}

/**
 * The calendar the schedule keeps once `invitation` is applied to what it kept (`kept`, undefined for
 * an event it does not know); undefined when the invitation changes nothing (an older revision).
 */
export const merge = (kept: string | undefined, invitation: Invitation): string | undefined => {
  const incoming = Either.getOrThrow(parseCalendar(invitation.calendar))
  const incomingEvents = incoming.getAllSubcomponents("vevent")
  const stored = kept === undefined ? undefined : Either.getOrUndefined(parseCalendar(kept))
  if (stored === undefined) {
    // A cancellation of an event not known yet is kept cancelled: the invitation it outranks may still arrive, late.
    return invitation.method === "REQUEST" ? invitation.calendar : cancelled(incoming)
  }
  const zones = [...incoming.getAllSubcomponents("vtimezone"), ...stored.getAllSubcomponents("vtimezone")]
  const storedEvents = stored.getAllSubcomponents("vevent")
  const storedMaster = masterOf(stored)
  const incomingMaster = masterOf(incoming)
  if (incomingMaster !== undefined) {
    if (storedMaster !== undefined && sequenceOf(incomingMaster) < sequenceOf(storedMaster)) return undefined
    if (invitation.method === "REQUEST") return keep(zones, incomingEvents)
    // The whole event called off: kept, cancelled, at the cancellation's revision.
    const master = storedMaster ?? incomingMaster
    master.updatePropertyWithValue("status", "CANCELLED")
    master.updatePropertyWithValue("sequence", Math.max(sequenceOf(incomingMaster), storedMaster === undefined ? 0 : sequenceOf(storedMaster)))
    return keep(zones, storedMaster === undefined ? [master] : storedEvents)
  }
  let events = [...storedEvents]
  let changed = false
  for (const override of incomingEvents) {
    const key = recurrenceKey(override)
    const before = events.find((e) => recurrenceKey(e) === key)
    if (before !== undefined && sequenceOf(override) < sequenceOf(before)) continue
    events = events.filter((e) => e !== before)
    changed = true
    if (invitation.method === "REQUEST") {
      events.push(override)
    } else if (storedMaster !== undefined) {
      // One occurrence called off: it no longer happens.
      const id = override.getFirstProperty("recurrence-id")!
      const removed = new ICAL.Property("exdate")
      removed.setValue(id.getFirstValue() as ICAL.Time)
      const tzid = zoneOf(id)
      if (tzid !== null) removed.setParameter("tzid", tzid)
      storedMaster.addProperty(removed)
      // At the cancellation's revision: the invitation it outranks (the same REQUEST in another email,
      // or read again when the mailbox answers it) no longer puts the occurrence back.
      storedMaster.updatePropertyWithValue("sequence", Math.max(sequenceOf(storedMaster), sequenceOf(override)))
    } else {
      override.updatePropertyWithValue("status", "CANCELLED")
      events.push(override)
    }
  }
  return changed ? keep(zones, events) : undefined
}

/** The incoming events, each marked cancelled (what an unknown event's cancellation is kept as). */
const cancelled = (incoming: ICAL.Component) => {
  const events = incoming.getAllSubcomponents("vevent")
  for (const event of events) event.updatePropertyWithValue("status", "CANCELLED")
  return keep(incoming.getAllSubcomponents("vtimezone"), events)
}

/**
 * A kept calendar read once, for a request that asks it both its `headline` and its `occurrences`
 * (each reads the text itself when given the text).
 */
export const readKept = (kept: string): ICAL.Component => Either.getOrThrow(parseCalendar(kept))
const keptCalendar = (kept: string | ICAL.Component) => typeof kept === "string" ? readKept(kept) : kept

/** The kept event's revision, status and organizer (the master's, else its first part's). */
export const headline = (
  kept: string | ICAL.Component
): { readonly sequence: number; readonly status: EventStatus; readonly organizer: Party | null } => {
  const calendar = keptCalendar(kept)
  const event = masterOf(calendar) ?? calendar.getFirstSubcomponent("vevent")!
  return { sequence: sequenceOf(event), status: statusOf(event), organizer: organizerOf(event) }
}

/** One part's occurrence at `start` (an ICAL time in the part's own zone), lasting `duration` ms (or days). */
const occurrence = (
  item: ICAL.Component,
  calendar: ICAL.Component,
  start: ICAL.Time,
  recurrenceId: ICAL.Time | null,
  zone: string | null,
  duration: { readonly ms: number; readonly days: number }
): Occurrence | undefined => {
  const startTime = eventTime(start, zone, calendar)
  const startsAt = momentOf(startTime)
  if (Number.isNaN(startsAt)) return undefined
  const endsAt = startsAt + (startTime.date !== null ? duration.days * 86_400_000 : duration.ms)
  const end: EventTime = startTime.date !== null
    ? { date_time: null, date: new Date(endsAt).toISOString().slice(0, 10), time_zone: null }
    : {
      date_time: startTime.date_time!.endsWith("Z")
        ? new Date(endsAt).toISOString().replace(".000Z", "Z")
        : new Date(endsAt).toISOString().slice(0, 19),
      date: null,
      time_zone: startTime.time_zone
    }
  return {
    recurrenceId: recurrenceId === null ? null : (() => {
      const id = eventTime(recurrenceId, zone, calendar)
      return id.date_time ?? id.date
    })(),
    start: startTime,
    end,
    startsAt,
    endsAt,
    status: statusOf(item),
    summary: text(item, "summary"),
    location: text(item, "location"),
    url: text(item, "url"),
    opaque: text(item, "transp")?.toUpperCase() !== "TRANSPARENT"
  }
}

/** How long a part lasts: DTEND less DTSTART, else its DURATION, else a day for a day and nothing for a moment (RFC 5545 §3.6.1). */
const durationOf = (item: ICAL.Component, calendar: ICAL.Component) => {
  const startProperty = item.getFirstProperty("dtstart")
  const start = startProperty?.getFirstValue()
  if (startProperty === null || !(start instanceof ICAL.Time)) return undefined
  const endProperty = item.getFirstProperty("dtend")
  const end = endProperty?.getFirstValue()
  const duration = item.getFirstPropertyValue("duration")
  let ms = 0
  if (endProperty !== null && end instanceof ICAL.Time) {
    ms = momentOf(eventTime(end, zoneOf(endProperty), calendar)) - momentOf(eventTime(start, zoneOf(startProperty), calendar))
  } else if (duration instanceof ICAL.Duration) {
    ms = duration.toSeconds() * 1000
  } else if (start.isDate) {
    ms = 86_400_000
  }
  ms = Number.isFinite(ms) && ms > 0 ? ms : 0
  return { ms, days: Math.max(1, Math.round(ms / 86_400_000)) }
}

/** A part's own occurrence: its DTSTART and length (an override's, or an event that does not repeat). */
const singleOf = (item: ICAL.Component, calendar: ICAL.Component, recurrenceId: ICAL.Time | null) => {
  const property = item.getFirstProperty("dtstart")
  const start = property?.getFirstValue()
  const duration = durationOf(item, calendar)
  if (property === null || !(start instanceof ICAL.Time) || duration === undefined) return undefined
  return occurrence(item, calendar, start, recurrenceId, zoneOf(property), duration)
}

/** The occurrences the kept calendar's overrides (its parts with a RECURRENCE-ID) describe. */
const walkOverrides = (calendar: ICAL.Component): Array<Occurrence> =>
  calendar.getAllSubcomponents("vevent").flatMap((event) => {
    const id = event.getFirstPropertyValue("recurrence-id")
    const found = id instanceof ICAL.Time ? singleOf(event, calendar, id) : undefined
    return found === undefined ? [] : [found]
  })

/** A wall-clock time read as if in UTC: within 14 hours of the moment it is in any zone. */
const wallClock = (time: ICAL.Time) => utcTime(time.year, time.month - 1, time.day, time.hour, time.minute, time.second)
/** More than any zone's offset from UTC. */
const SLACK = 15 * 3_600_000

/** The master's repeat rules (RRULE), as this reading of the calendar holds them. */
const rulesOf = (master: ICAL.Component) => master.getAllProperties("rrule").map((p) => p.getFirstValue() as ICAL.Recur)

const gcd = (a: number, b: number): number => b === 0 ? a : gcd(b, a % b)
const hasCount = (rule: ICAL.Recur) => rule.count !== null && rule.count !== undefined

/**
 * The step by which the rules' start can be moved on and give the same repeats after it: a whole
 * number of every rule's periods (RFC 5545's sets are built per period from DTSTART's phase and fields,
 * which whole periods keep), in days for daily and weekly rules, in months for monthly and yearly ones.
 * Undefined for rules that mix the two, or repeat within a day (capped instead).
 */
const forwardStep = (rules: ReadonlyArray<ICAL.Recur>): { readonly unit: "days" | "months"; readonly step: number } | undefined => {
  const periods = rules.map((rule) => {
    const interval = Math.max(1, rule.interval || 1)
    switch (rule.freq) {
      case "DAILY":
        return { unit: "days" as const, step: interval }
      case "WEEKLY":
        return { unit: "days" as const, step: 7 * interval }
      case "MONTHLY":
        return { unit: "months" as const, step: interval }
      case "YEARLY":
        return { unit: "months" as const, step: 12 * interval }
      default:
        return undefined
    }
  })
  const first = periods[0]
  if (first === undefined || periods.some((p) => p === undefined || p.unit !== first.unit)) return undefined
  return { unit: first.unit, step: periods.reduce((lcm, p) => lcm * p!.step / gcd(lcm, p!.step), 1) }
}

/**
 * Where to begin walking the master's rules to reach `before` (a wall-clock time) without walking
 * the years before it: its DTSTART moved on by whole steps (forwardStep) to the last such start at or
 * before `before` whose day of the month the month has (a 31st, a 29 February). Undefined when that
 * cannot be, or need not: a COUNT (counted from DTSTART), rules forwardStep has no step for, or less
 * than a step to skip. ical.js walks a repeat in 10 µs to over 1 ms by the rule's shape, so an
 * invitation whose series began decades ago would otherwise cost every request that walk.
 */
const fastForward = (master: ICAL.Component, before: number): ICAL.Time | undefined => {
  const rules = rulesOf(master)
  const start = master.getFirstPropertyValue("dtstart")
  const by = forwardStep(rules)
  if (by === undefined || rules.some(hasCount) || !(start instanceof ICAL.Time)) return undefined
  const moved = (steps: number) => {
    const time = start.clone()
    if (by.unit === "days") {
      time.adjust(steps * by.step, 0, 0, 0)
      return time
    }
    const months = start.month - 1 + steps * by.step
    const year = start.year + Math.floor(months / 12)
    const month = (months % 12) + 1
    if (start.day > ICAL.Time.daysInMonth(month, year)) return undefined
    // Set, not read between: ical.js normalizes a time when it is next read (29 February 2026 would read as 1 March).
    time.year = year
    time.month = month
    return time
  }
  const limit = new Date(before)
  const gap = by.unit === "days"
    ? Math.floor((before - wallClock(start)) / 86_400_000)
    : (limit.getUTCFullYear() - start.year) * 12 + limit.getUTCMonth() + 1 - start.month
  for (let steps = Math.floor(gap / by.step); steps >= 1; steps--) {
    const time = moved(steps)
    if (time !== undefined && wallClock(time) <= before) return time
  }
  return undefined
}

/**
 * A yearly rule from a 29 February that names no day repeats on 29 February only, skipping the years
 * without one (RFC 5545 §3.3.10: a date that does not exist is ignored); ical.js gives 1 March in
 * those years unless the day is named, so it is named (on this walk's own copy of the rule). With
 * several months named (BYMONTH=2,3) ical.js still gives 1 March for it: the walk leaves out every
 * repeat of such a rule that is not on a 29th. True when the rule was named so.
 */
const skipMissingLeapDays = (rule: ICAL.Recur, start: ICAL.Time): boolean => {
  const named = ["BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYDAY"].some((part) => (rule.getComponent(part) as Array<unknown>).length > 0)
  if (rule.freq !== "YEARLY" || start.month !== 2 || start.day !== 29 || named) return false
  rule.setComponent("BYMONTHDAY", [29])
  if ((rule.getComponent("BYMONTH") as Array<unknown>).length === 0) rule.setComponent("BYMONTH", [2])
  return true
}

/**
 * A 29th rule's COUNT (skipMissingLeapDays) as the UNTIL of the repeat it ends on: ical.js counts the
 * 1 Marches it makes of the missing 29 Februaries, which are no repeats (RFC 5545), so its COUNT ended
 * early. The rule is walked alone for it (no EXDATE: those count), within the walk's cap.
 */
const countLeapDays = (rule: ICAL.Recur, start: ICAL.Time) => {
  const count = rule.count!
  rule.count = null
  const iterator = rule.iterator(start)
  let found = 0
  let end: ICAL.Time | undefined
  for (let steps = 0; steps < MAX_STEPS && found < count; steps++) {
    const next = iterator.next()
    if (next === null || next === undefined) break
    if (next.day === 29) {
      found += 1
      end = next.clone()
    }
  }
  if (end !== undefined) rule.until = end
}

/** How a walk of the master's rules goes: from near a moment, up to a repeat. */
interface Walk {
  /** Begin at or before this wall-clock moment (fastForward): what comes before it is incomplete. */
  readonly after?: number | undefined
  /** The last repeat to give (as `span` found it, ICAL.Time's text): a COUNT is read as ending there. */
  readonly until?: string | null
}

/**
 * Rules of mixed kinds (a weekly and a monthly one: no step moves both on), none with a COUNT, each of
 * which alone has a step (forwardStep): walked apart, each from near the range, their repeats merged.
 */
const walkedApart = (rules: ReadonlyArray<ICAL.Recur>) =>
  rules.length > 1 && forwardStep(rules) === undefined && !rules.some(hasCount) && rules.every((rule) => forwardStep([rule]) !== undefined)

/** Whether the master's rules can only be walked from their first repeat: a COUNT, or rules fastForward has no step for. */
const walkedFromStart = (master: ICAL.Component) => {
  const rules = rulesOf(master)
  return rules.length > 0 && (rules.some(hasCount) || (forwardStep(rules) === undefined && !walkedApart(rules)))
}

/** The master with `rule` its only rule: its RDATEs with the first rule's copy only, its EXDATEs with every one. */
const withRuleAlone = (master: ICAL.Component, rule: ICAL.Recur, first: boolean): ICAL.Component => {
  const alone = new ICAL.Component(structuredClone(master.toJSON()) as Array<unknown>, master.parent ?? undefined)
  alone.removeAllProperties("rrule")
  if (!first) alone.removeAllProperties("rdate")
  alone.addPropertyWithValue("rrule", rule.clone())
  return alone
}

/**
 * The repeats of rules walked apart (walkedApart), each rule alone from near `after`, merged in order
 * (a start two of them give comes from each: `occurrences` keeps it once).
 */
const walkApart = (master: ICAL.Component, rules: ReadonlyArray<ICAL.Recur>, after: number | undefined) => {
  const walks = rules.map((rule, index) => {
    const alone = withRuleAlone(master, rule, index === 0)
    return new ICAL.Event(alone, { exceptions: [] }).iterator(after === undefined ? undefined : fastForward(alone, after))
  })
  const heads: Array<ICAL.Time | undefined> = walks.map((walk) => walk.next() ?? undefined)
  return {
    next: (): ICAL.Time | undefined => {
      let earliest = -1
      for (let i = 0; i < heads.length; i++) {
        if (heads[i] !== undefined && (earliest < 0 || wallClock(heads[i]!) < wallClock(heads[earliest]!))) earliest = i
      }
      if (earliest < 0) return undefined
      const found = heads[earliest]
      heads[earliest] = walks[earliest]!.next() ?? undefined
      return found
    }
  }
}

/**
 * The repeating master's occurrences, walked by its rules in its own wall-clock time (no zone is
 * resolved on the way: that is the costly part), one at a time; with `after`, from a start at or
 * before it (fastForward), so what comes before `after` is incomplete and for the caller to leave
 * out; with `until`, up to that repeat, a single rule's COUNT read as ending there (so fastForward
 * applies). Occurrences an override changes are left out (walkOverrides answers them). Returns true
 * when the rules ran out (or reached `until`), false at the walk's cap (MAX_STEPS,
 * MAX_SUB_DAILY_STEPS); a rule naming over MAX_TIMES_OF_DAY gives its DTSTART alone.
 */
function* repeatsOf(calendar: ICAL.Component, master: ICAL.Component, walk: Walk = {}): Generator<ICAL.Time, boolean, undefined> {
  const overrides = calendar.getAllSubcomponents("vevent").filter((e) => e !== master && e.hasProperty("recurrence-id"))
  const changed = new Set(overrides.map(recurrenceKey))
  const rules = rulesOf(master)
  const times = rules.map((rule) => timesOfDay(rule.toString()))
  const start = master.getFirstPropertyValue("dtstart")
  if (times.some((n) => n > MAX_TIMES_OF_DAY)) {
    if (start instanceof ICAL.Time && !changed.has(start.toString())) yield start
    return true
  }
  // Every rule a 29th of some months (skipMissingLeapDays): a repeat on another day is ical.js's 1 March.
  const leapDaysOnly = start instanceof ICAL.Time && rules.length > 0 && rules.map((rule) => skipMissingLeapDays(rule, start)).every(Boolean)
  const subDaily = rules.some((rule, i) => SUB_DAILY.has(rule.freq) || times[i]! > 1)
  const last = walk.until === undefined || walk.until === null ? undefined : wallClock(ICAL.Time.fromString(walk.until, null))
  // The rules are this walk's own (the calendar is parsed for it): the COUNT is known to end at `until`.
  if (last !== undefined && rules.length === 1) rules[0]!.count = null
  if (leapDaysOnly && rules.length === 1 && rules[0]!.count) countLeapDays(rules[0]!, start)
  const iterator = walkedApart(rules)
    ? walkApart(master, rules, walk.after)
    : new ICAL.Event(master, { exceptions: [] }).iterator(walk.after === undefined ? undefined : fastForward(master, walk.after))
  // DTSTART is always the first occurrence (RFC 5545 §3.8.5.2); ical.js leaves it out of dates listed without a rule.
  const listedOnly = rules.length === 0 && start instanceof ICAL.Time ? start : undefined
  if (listedOnly !== undefined && !changed.has(listedOnly.toString()) && !datesOf(master, "exdate").some((d) => wallClock(d) === wallClock(listedOnly))) {
    yield listedOnly
  }
  const maxSteps = subDaily ? MAX_SUB_DAILY_STEPS : MAX_STEPS
  for (let steps = 0; steps < maxSteps; steps++) {
    const next = iterator.next()
    if (next === null || next === undefined || (last !== undefined && wallClock(next) > last)) return true
    if (leapDaysOnly && next.day !== 29) continue
    if (!changed.has(next.toString()) && (listedOnly === undefined || wallClock(next) !== wallClock(listedOnly))) yield next
  }
  return false
}

/** The dates (a period's end) an event's RDATE or EXDATE properties name. */
const datesOf = (event: ICAL.Component, name: "rdate" | "exdate"): Array<ICAL.Time> =>
  event.getAllProperties(name).flatMap((property) => property.getValues()).flatMap((value) =>
    value instanceof ICAL.Time ? [value] : value instanceof ICAL.Period ? [value.getEnd()] : []
  )

const repeats = (master: ICAL.Component) => master.hasProperty("rrule") || master.hasProperty("rdate")

/** When a kept event has occurrences (`span`). */
export interface Span {
  readonly first: Date
  /** Null when it repeats without end. */
  readonly last: Date | null
  /** The last repeat the walk from the first reached, for `occurrences` (null when none was needed). */
  readonly repeatsUntil: string | null
}

/** How long `spanning` walks before it lets its caller do other work. */
const SLICE_MS = 10

/**
 * When the kept event has occurrences, for the index that finds the events a range can hold: from its
 * earliest start to its latest end (`last` null when it repeats without end). Rules a range cannot be
 * walked from near (walkedFromStart) are walked here, once, for `budgetMs` of walking at most (and the
 * walk's caps): `repeatsUntil` is the last repeat reached (DTSTART when none is), which `occurrences`
 * is to be given, so a request walks no further than this did (a single rule's COUNT, ended there,
 * from near the range). Rules with an UNTIL are walked from near it, and bounded by it when that walk
 * stops short. A generator: it yields after each SLICE_MS of walking, so that a server can answer
 * others between (Schedule does); its return value is the span (`span` runs it through).
 */
export function* spanning(kept: string, budgetMs = WALK_BUDGET_MS): Generator<void, Span | undefined, undefined> {
  const calendar = Either.getOrThrow(parseCalendar(kept))
  const master = masterOf(calendar)
  const found = walkOverrides(calendar)
  let endless = false
  let repeatsUntil: string | null = null
  let bound: number | undefined
  if (master !== undefined) {
    const first = singleOf(master, calendar, null)
    if (first !== undefined) found.push(first)
    if (repeats(master)) {
      const rules = rulesOf(master)
      const fromStart = walkedFromStart(master)
      endless = !fromStart && rules.some((rule) => !rule.isFinite())
      let last: ICAL.Time | undefined
      const duration = durationOf(master, calendar)
      if (!endless) {
        const start = master.getFirstPropertyValue("dtstart")
        // Rules ending at an UNTIL (inclusive, a start), walked from near the last of them.
        const until = Math.max(...rules.map((rule) => rule.until).filter((t): t is ICAL.Time => t instanceof ICAL.Time).map(wallClock))
        const after = fromStart || rules.length === 0 ? undefined : until
        const walk = repeatsOf(calendar, master, { after })
        let ranOut = false
        let spent = 0
        let slice = performance.now()
        for (let step = walk.next(); ; step = walk.next()) {
          if (step.done) {
            ranOut = step.value
            break
          }
          last = step.value
          const walked = performance.now() - slice
          if (spent + walked >= budgetMs) break
          if (walked >= SLICE_MS) {
            spent += walked
            yield
            slice = performance.now()
          }
        }
        if (fromStart) repeatsUntil = (last ?? (start instanceof ICAL.Time ? start : undefined))?.toString() ?? null
        else if ((!ranOut || last === undefined) && duration !== undefined) {
          // The walk stopped short, or found none after where it began: no occurrence starts after the last
          // UNTIL (inclusive) or RDATE, nor ends later than that and the event's length, in any zone.
          const latest = Math.max(after ?? -Infinity, ...datesOf(master, "rdate").map(wallClock))
          if (Number.isFinite(latest)) bound = latest + (start instanceof ICAL.Time && start.isDate ? duration.days * 86_400_000 : duration.ms) + SLACK
        }
      }
      const lastOne = last === undefined || duration === undefined
        ? undefined
        : occurrence(master, calendar, last, last, zoneOf(master.getFirstProperty("dtstart")!), duration)
      if (lastOne !== undefined) found.push(lastOne)
    }
  }
  if (found.length === 0) return undefined
  return {
    first: new Date(Math.min(...found.map((o) => o.startsAt))),
    last: endless ? null : new Date(Math.max(bound ?? -Infinity, ...found.map((o) => o.endsAt))),
    repeatsUntil
  }
}

/** `spanning` run through at once. */
export const span = (kept: string, budgetMs = WALK_BUDGET_MS): Span | undefined => {
  const walking = spanning(kept, budgetMs)
  for (let step = walking.next(); ; step = walking.next()) if (step.done) return step.value
}

/**
 * The kept event's occurrences that overlap [from, to) (one without length when it starts in it), in
 * order of start; an occurrence an override moved into the range from outside it among them. With
 * `max`, the earliest `max` its rules give there (and every override): what a page of `max - 1`
 * occurrences of several events, merged by start, can show of it and whether there are more. With
 * `repeatsUntil` (what `span` found when the calendar was kept), none after that repeat.
 */
export const occurrences = (
  kept: string | ICAL.Component,
  from: Date,
  to: Date,
  { max = Infinity, repeatsUntil = null }: { readonly max?: number; readonly repeatsUntil?: string | null } = {}
): Array<Occurrence> => {
  const inRange = (o: Occurrence) =>
    o.startsAt < to.getTime() && (o.endsAt > from.getTime() || (o.endsAt === o.startsAt && o.startsAt >= from.getTime()))
  const calendar = keptCalendar(kept)
  const master = masterOf(calendar)
  const found = walkOverrides(calendar)
  if (master !== undefined) {
    const duration = durationOf(master, calendar)
    const zone = zoneOf(master.getFirstProperty("dtstart")!)
    if (!repeats(master)) {
      const once = singleOf(master, calendar, null)
      if (once !== undefined) found.push(once)
    } else if (duration !== undefined) {
      const length = Math.max(duration.ms, duration.days * 86_400_000)
      // A start two rules give, or a rule and an RDATE, is one occurrence (RFC 5545 §3.8.5.3: duplicate
      // instances are ignored); ical.js gives it once from each.
      const starts = new Set<number>()
      for (const next of repeatsOf(calendar, master, { after: from.getTime() - SLACK - length, until: repeatsUntil })) {
        const at = wallClock(next)
        if (at >= to.getTime() + SLACK || starts.size >= max) break
        if (at + length > from.getTime() - SLACK) {
          const one = occurrence(master, calendar, next, next, zone, duration)
          if (one !== undefined && inRange(one) && !starts.has(one.startsAt)) {
            starts.add(one.startsAt)
            found.push(one)
          }
        }
      }
    }
  }
  return found.filter(inRange).sort((a, b) => a.startsAt - b.startsAt)
}
