/**
 * Calendars as iTIP (RFC 5546) carries them by mail, with Mozilla's ical.js. Pure: text in, fields or
 * text out. The attendee's side: reading an invitation (iCalendar, RFC 5545) and writing the answer to
 * it (a REPLY, §3.2.3). The organizer's side (services/meetings): writing invitations, their updates
 * and cancellations (REQUEST, CANCEL) and reading the answers that come back.
 *
 * - The event read is the calendar's first VEVENT without a RECURRENCE-ID (a repeating event's
 *   master), else its first VEVENT (an invitation to one occurrence).
 * - Times are answered in UTC. A zone is resolved by the calendar's own VTIMEZONE of that TZID (what
 *   Outlook and Exchange send, e.g. "Pacific Standard Time"), else as an IANA name (what Google and
 *   Apple send, e.g. "Europe/Paris"); a time without a zone, or with one neither resolves, is
 *   floating: answered as its wall-clock time, without an offset.
 * - A reply carries what RFC 5546 requires (METHOD:REPLY; the event's UID, SEQUENCE and
 *   RECURRENCE-ID; ORGANIZER; DTSTAMP; the one ATTENDEE answering, with its PARTSTAT) and, as Google
 *   and Outlook do, the event's start, end and summary (with the zones they name) so a client can show
 *   it without its copy.
 */
import { Either } from "effect"
import ICAL from "ical.js"
import type { Attendee, EventTime, Invitation, ParticipationStatus, Party, ResponseStatus } from "./schemas.ts"
import { ruleProblem } from "../schedule/rule-limits.ts"
import { fromWallTime, isRealWallTime, isTimeZone, utcTime, vtimezoneLines, wallMoments, wallTime } from "../time-zones.ts"

// ical.js cuts a long line every 75 octets and then puts the continuation's space in front, making
// 76-octet lines; RFC 5545 §3.1 wants at most 75 with it. Its setting is read as it writes.
ICAL.foldLength = 74

/** What a calendar says, before the email and the mailbox add theirs. */
export type CalendarEvent = Omit<
  Invitation,
  "email_id" | "attachment_id" | "respondable" | "not_respondable_reason" | "latest_email_id" | "schedule_status" | "not_applied_reason" | "response"
  | "attendees"
> & {
  readonly attendees: ReadonlyArray<Attendee>
}

export type CalendarUnreadable = "damaged" | "no_event"

/** Text longer than this in one field (a description pasted whole) is cut. */
const MAX_FIELD_CHARS = 100_000

/** A calendar's content lines, unfolded (RFC 5545 §3.1: a line break then a space or tab continues a line). */
export const contentLines = (text: string): Array<string> => text.replace(/\r?\n[ \t]/g, "").split(/\r?\n/)

/** The properties whose values are dates or date-times an event is placed by. */
const TIMED = /^(?:DTSTART|DTEND|DUE|RECURRENCE-ID|EXDATE|RDATE)[;:]/i

/**
 * Whether every date and date-time the calendar places its events by is one that exists: ical.js reads
 * 20261345T256199Z as 15 February 2027, 02:02:39, which no organizer meant (RFC 5545 §3.3.4-5).
 */
const timesExist = (text: string): boolean => {
  for (const line of contentLines(text)) {
    if (!TIMED.test(line)) continue
    for (const value of line.slice(line.indexOf(":", line.search(/[;:]/)) + 1).split(",")) {
      const m = /^(\d{4})(\d{2})(\d{2})(?:T(\d{2})(\d{2})(\d{2})Z?)?$/i.exec(value.trim())
      if (m === null) continue // a period (RDATE) or a form ical.js refuses by itself
      const [year, month, day, hour, minute, second] = m.slice(1).map((field) => Number(field ?? 0)) as [number, number, number, number, number, number]
      if (!isRealWallTime({ year, month, day, hour, minute, second }, { leapSecond: true })) return false
    }
  }
  return true
}

/**
 * Whether every repeat rule of the calendar's events is one RFC 5545 writes (rule-limits.ts
 * `ruleProblem`; a part of no standard passed over, as calendar programs pass it): ical.js fails on
 * `FREQ=MONTHLY;BYDAY=9MO` only when the event is walked, so a schedule keeping one failed at every
 * request, and `UNTIL=garbage` at every reading. Zones' rules (in VTIMEZONE) are the zone's own affair.
 */
const rulesReadable = (text: string): boolean => {
  let inEvent = false
  for (const line of contentLines(text)) {
    if (/^BEGIN:VEVENT\s*$/i.test(line)) inEvent = true
    else if (/^END:VEVENT\s*$/i.test(line)) inEvent = false
    else if (inEvent && /^RRULE[;:]/i.test(line)) {
      if (ruleProblem(line.slice(line.indexOf(":") + 1).trim(), "ignore") !== undefined) return false
    }
  }
  return true
}

/**
 * How many zones, as calendars define them, are kept made (`definedZone`); how long a definition kept
 * may be; and how many worked-out changes of offset they may hold together. Outlook's zones, worked out
 * from 1601 to now, hold ~860 changes (~180 KB) each; one worked out to a stranger's year 9999 holds
 * ~17,000 (3.5 MB, 0.4 s to work out), so past MAX_KEPT_CHANGES all are let go, to be made again as used.
 */
const MAX_DEFINED_ZONES = 100
const MAX_DEFINITION_CHARS = 16 * 1024
const MAX_KEPT_CHANGES = 200_000
const definedZones = new Map<string, ICAL.Timezone>()

/**
 * The zone a calendar's VTIMEZONE defines, made once per definition (the last MAX_DEFINED_ZONES used
 * are kept): ical.js works out a zone's changes from its first observance up to the year asked, and
 * Outlook's begin in 1601, so a zone made afresh for each calendar read (ical.js makes its own for
 * each) cost ~14 ms a time converted: 85 ms to read an Outlook invitation's headline and a week of it.
 * Made once, it keeps the changes it has worked out. Made from a copy of the definition, so that it
 * does not keep the calendar it came in; a definition over MAX_DEFINITION_CHARS (real ones are under
 * 2K) is made afresh each time, as ical.js would.
 */
const definedZone = (definition: ICAL.Component) => {
  // The definition as read (jCal), written out natively: 2.6 µs for Outlook's against ical.js's own writing's 7.8.
  const key = JSON.stringify(definition.toJSON())
  if (key.length > MAX_DEFINITION_CHARS) return new ICAL.Timezone(definition)
  let changes = 0
  for (const zone of definedZones.values()) changes += zone.changes.length
  if (changes > MAX_KEPT_CHANGES) definedZones.clear()
  const kept = definedZones.get(key)
  if (kept !== undefined) {
    // The most recently used last: the first is the one to let go.
    definedZones.delete(key)
    definedZones.set(key, kept)
    return kept
  }
  const zone = new ICAL.Timezone(new ICAL.Component(definition.toJSON()))
  if (definedZones.size >= MAX_DEFINED_ZONES) definedZones.delete(definedZones.keys().next().value!)
  definedZones.set(key, zone)
  return zone
}

/**
 * ical.js's cache of a calendar's zones by TZID, from which it gives each time its zone as it reads it
 * (a private field in its types; none if a later version drops it, which costs only time).
 */
const zoneCacheOf = (calendar: ICAL.Component): Map<string, ICAL.Timezone> | undefined => {
  const cache = (calendar as unknown as { readonly _timezoneCache?: unknown })._timezoneCache
  return cache instanceof Map ? cache as Map<string, ICAL.Timezone> : undefined
}

export const parseCalendar = (text: string): Either.Either<ICAL.Component, CalendarUnreadable> => {
  try {
    if (!timesExist(text) || !rulesReadable(text)) return Either.left("damaged")
    const parsed: unknown = ICAL.parse(text)
    // A text of several calendars parses to a list of them; the first is the invitation.
    const first = Array.isArray(parsed) && Array.isArray(parsed[0]) ? parsed[0] : parsed
    const calendar = new ICAL.Component(first as Array<unknown>)
    if (calendar.name !== "vcalendar") return Either.left("damaged")
    // Its times read in the zones made once per definition (definedZone), not in ones made for this reading.
    const zones = zoneCacheOf(calendar)
    for (const zone of zones === undefined ? [] : calendar.getAllSubcomponents("vtimezone")) {
      const tzid = zone.getFirstPropertyValue("tzid")
      try {
        if (typeof tzid === "string") zones!.set(tzid, definedZone(zone))
      } catch {
        // A definition ical.js cannot make a zone of: its times are read as ical.js reads them on its own.
      }
    }
    return Either.right(calendar)
  } catch {
    return Either.left("damaged")
  }
}

const eventOf = (calendar: ICAL.Component): ICAL.Component | undefined => {
  const events = calendar.getAllSubcomponents("vevent")
  return events.find((event) => !event.hasProperty("recurrence-id")) ?? events[0]
}

const pad = (n: number, width = 2) => String(n).padStart(width, "0")

/** An IANA name in a TZID: itself, or the end of a path some producers put before it ("/mozilla.org/…/Europe/Berlin"). */
const ianaNames = (tzid: string) => {
  const tail = /([A-Za-z_]+\/[A-Za-z0-9_+-]+(?:\/[A-Za-z0-9_+-]+)?)$/.exec(tzid)?.[1]
  return tail !== undefined && tail !== tzid ? [tzid, tail] : [tzid]
}

/** The moments (UTC milliseconds) of a defined zone's changes of offset, as worked out so far, by zone. */
const changeMoments = new WeakMap<ICAL.Timezone, { readonly count: number; readonly at: Float64Array }>()

/**
 * The offset (minutes) of a zone a calendar defines at the UTC moment `utc`, as far as its changes are
 * worked out (ical.js works them out to the year a time it converts falls in, and some years beyond).
 * Before its first change, none, as ical.js reads it.
 */
const definedOffsetAt = (zone: ICAL.Timezone) => (utc: number): number => {
  // ical.js keeps its changes in UTC, sorted, with offsets in seconds.
  const changes = zone.changes as ReadonlyArray<
    { year: number; month: number; day: number; hour: number; minute: number; second: number; utcOffset: number }
  >
  let kept = changeMoments.get(zone)
  if (kept === undefined || kept.count !== changes.length) {
    kept = { count: changes.length, at: Float64Array.from(changes, (c) => utcTime(c.year, c.month - 1, c.day, c.hour, c.minute, c.second)) }
    changeMoments.set(zone, kept)
  }
  // The last change at or before `utc`.
  let [low, high] = [0, kept.count]
  while (low < high) {
    const middle = (low + high) >>> 1
    if (kept.at[middle]! <= utc) low = middle + 1
    else high = middle
  }
  return low === 0 ? 0 : changes[low - 1]!.utcOffset / 60
}

/**
 * The UTC moment of a wall-clock time in `tzid`, or undefined when the zone cannot be resolved. A
 * time the clocks pass twice is the first (RFC 5545 §3.3.5): ical.js takes the second, the zone's
 * standard time; one they skip is read as ical.js reads it.
 */
const toUtc = (time: ICAL.Time, tzid: string, calendar: ICAL.Component): number | undefined => {
  const definition = calendar.getAllSubcomponents("vtimezone").find((zone) => zone.getFirstPropertyValue("tzid") === tzid)
  if (definition !== undefined) {
    try {
      // The zone parseCalendar gave the calendar for it, else made now.
      const zone = zoneCacheOf(calendar)?.get(tzid) ?? definedZone(definition)
      const zoned = ICAL.Time.fromData(
        { year: time.year, month: time.month, day: time.day, hour: time.hour, minute: time.minute, second: time.second, isDate: false },
        zone
      )
      // Converting works the zone's changes out to the time's year first.
      const byIcal = zoned.toUnixTime() * 1000
      return wallMoments(time, definedOffsetAt(zone))[0] ?? byIcal
    } catch {
      // A definition ical.js cannot use: the zone's name may still be one Intl knows.
    }
  }
  const name = ianaNames(tzid).find(isTimeZone)
  return name === undefined ? undefined : fromWallTime(name, time)
}

/** The zone a time property names (its TZID), if any. */
export const zoneOf = (property: ICAL.Property): string | null => {
  const tzid = property.getParameter("tzid")
  return typeof tzid === "string" && tzid !== "" ? tzid : null
}

/** A time as the API answers it, `zone` being the TZID its property names (null: none). */
export const eventTime = (value: ICAL.Time, zone: string | null, calendar: ICAL.Component): EventTime => {
  const date = `${pad(value.year, 4)}-${pad(value.month)}-${pad(value.day)}`
  if (value.isDate) return { date_time: null, date, time_zone: null }
  const wall = `${date}T${pad(value.hour)}:${pad(value.minute)}:${pad(value.second)}`
  if (zone === null && value.zone?.tzid === "UTC") return { date_time: `${wall}Z`, date: null, time_zone: null }
  const utc = zone === null ? undefined : toUtc(value, zone, calendar)
  return { date_time: utc === undefined ? wall : new Date(utc).toISOString().replace(".000Z", "Z"), date: null, time_zone: zone }
}

/** A DTSTART, DTEND or RECURRENCE-ID as the API answers it. */
const timeOf = (property: ICAL.Property | null, calendar: ICAL.Component): EventTime | null => {
  const value = property?.getFirstValue()
  return property === null || !(value instanceof ICAL.Time) ? null : eventTime(value, zoneOf(property), calendar)
}

/** DTEND, else DTSTART plus DURATION (RFC 5545 §3.6.1), else none. */
const endOf = (event: ICAL.Component, calendar: ICAL.Component): EventTime | null => {
  const end = event.getFirstProperty("dtend")
  if (end !== null) return timeOf(end, calendar)
  const start = event.getFirstProperty("dtstart")
  const duration = event.getFirstPropertyValue("duration")
  const startValue = start?.getFirstValue()
  if (start === null || !(duration instanceof ICAL.Duration) || !(startValue instanceof ICAL.Time)) return null
  const later = startValue.clone()
  later.addDuration(duration)
  const shifted = new ICAL.Property(start.toJSON())
  shifted.setValue(later)
  return timeOf(shifted, calendar)
}

const addressOf = (value: unknown): string | undefined => {
  if (typeof value !== "string") return undefined
  const address = value.replace(/^mailto:/i, "").trim()
  return address.includes("@") ? address : undefined
}

/**
 * The address of the organizer a calendar's first event names, in lower case; none when it names none
 * or cannot be read. Any message about an event names it, a cancellation of one occurrence too.
 */
export const organizerAddress = (calendarText: string): string | undefined => {
  const parsed = parseCalendar(calendarText)
  const event = Either.isLeft(parsed) ? undefined : parsed.right.getFirstSubcomponent("vevent")
  return event === undefined || event === null ? undefined : organizerOf(event)?.address.toLowerCase()
}

const nameOf = (property: ICAL.Property): string | null => {
  const cn = property.getParameter("cn")
  const name = (Array.isArray(cn) ? cn[0] : cn)?.trim()
  return name !== undefined && name !== "" ? name : null
}

const parameter = (property: ICAL.Property, name: string) => {
  const value = property.getParameter(name)
  return (Array.isArray(value) ? value[0] : value)?.toUpperCase()
}

const ROLES: Record<string, Attendee["role"]> = {
  "CHAIR": "chair",
  "REQ-PARTICIPANT": "required",
  "OPT-PARTICIPANT": "optional",
  "NON-PARTICIPANT": "non_participant"
}
const PARTICIPATION: Record<string, ParticipationStatus> = {
  "ACCEPTED": "accepted",
  "DECLINED": "declined",
  "TENTATIVE": "tentative",
  "DELEGATED": "delegated"
}
const PARTSTAT: Record<ResponseStatus, string> = { accepted: "ACCEPTED", declined: "DECLINED", tentative: "TENTATIVE" }

const textOf = (event: ICAL.Component, name: string): string | null => {
  const value = event.getFirstPropertyValue(name)
  if (typeof value !== "string") return null
  const text = value.trim()
  return text === "" ? null : text.slice(0, MAX_FIELD_CHARS)
}

/** An event's organizer as its ORGANIZER names it; null when it names none (or no address). */
export const organizerOf = (event: ICAL.Component): Party | null => {
  const organizer = event.getFirstProperty("organizer")
  const address = organizer === null ? undefined : addressOf(organizer.getFirstValue())
  return organizer === null || address === undefined ? null : { address, name: nameOf(organizer) }
}

/** The event an invitation's calendar text describes, or why there is none to read. */
export const readInvitation = (text: string): Either.Either<CalendarEvent, CalendarUnreadable> =>
  Either.flatMap(parseCalendar(text), (calendar) => {
    const event = eventOf(calendar)
    if (event === undefined) return Either.left("no_event")
    try {
      const uid = textOf(event, "uid")
      const start = timeOf(event.getFirstProperty("dtstart"), calendar)
      if (uid === null || start === null) return Either.left("no_event")
      const status = textOf(event, "status")?.toLowerCase()
      const method = calendar.getFirstPropertyValue("method")
      const sequence = Number(event.getFirstPropertyValue("sequence") ?? 0)
      const recurrenceId = timeOf(event.getFirstProperty("recurrence-id"), calendar)
      const rule = event.getFirstPropertyValue("rrule")
      const attendees = event.getAllProperties("attendee").flatMap((property): Array<Attendee> => {
        const address = addressOf(property.getFirstValue())
        return address === undefined ? [] : [{
          address,
          name: nameOf(property),
          role: ROLES[parameter(property, "role") ?? ""] ?? "required",
          status: PARTICIPATION[parameter(property, "partstat") ?? ""] ?? "needs_action",
          rsvp: parameter(property, "rsvp") === "TRUE"
        }]
      })
      return Either.right({
        method: typeof method === "string" && method.trim() !== "" ? method.trim().toUpperCase() : null,
        uid,
        sequence: Number.isSafeInteger(sequence) && sequence >= 0 ? sequence : 0,
        recurrence_id: recurrenceId === null ? null : recurrenceId.date_time ?? recurrenceId.date,
        status: status === "confirmed" || status === "tentative" || status === "cancelled" ? status : null,
        summary: textOf(event, "summary"),
        description: textOf(event, "description"),
        location: textOf(event, "location"),
        url: textOf(event, "url"),
        start,
        end: endOf(event, calendar),
        recurrence: rule instanceof ICAL.Recur ? rule.toString() : null,
        organizer: organizerOf(event),
        attendees
      } satisfies CalendarEvent)
    } catch {
      // A property ical.js could not read (a date that is not one, a malformed rule).
      return Either.left("damaged")
    }
  })

/** The attendee among an event's whom `isMine` recognises (the mailbox, as the organizer wrote it). */
export const attendeeOf = (event: CalendarEvent, isMine: (address: string) => boolean): Attendee | undefined =>
  event.attendees.find((attendee) => isMine(attendee.address))

/**
 * The iTIP REPLY by which `attendee` answers the invitation in `text` (read by readInvitation first):
 * CRLF line ends, folded as RFC 5545 asks.
 */
export const replyCalendar = (
  text: string,
  answer: { readonly attendee: Party; readonly status: ResponseStatus; readonly comment?: string | undefined; readonly now: Date }
): string => {
  const calendar = Either.getOrThrow(parseCalendar(text))
  const event = eventOf(calendar)!
  const reply = new ICAL.Component("vcalendar")
  reply.addPropertyWithValue("prodid", "-//Mailroom//Invitation reply//EN")
  reply.addPropertyWithValue("version", "2.0")
  reply.addPropertyWithValue("method", "REPLY")
  const copied = ["dtstart", "dtend", "recurrence-id"].map((name) => event.getFirstProperty(name)).filter((p) => p !== null)
  const zones = new Set(copied.map((p) => p.getParameter("tzid")).filter((tzid) => typeof tzid === "string"))
  for (const zone of calendar.getAllSubcomponents("vtimezone")) {
    if (zones.has(String(zone.getFirstPropertyValue("tzid")))) reply.addSubcomponent(new ICAL.Component(zone.toJSON()))
  }
  const vevent = new ICAL.Component("vevent")
  vevent.addPropertyWithValue("uid", String(event.getFirstPropertyValue("uid")))
  const sequence = event.getFirstPropertyValue("sequence")
  if (sequence !== null) vevent.addPropertyWithValue("sequence", Number(sequence))
  vevent.addPropertyWithValue("dtstamp", ICAL.Time.fromJSDate(answer.now, true))
  for (const property of copied) vevent.addProperty(new ICAL.Property(property.toJSON()))
  const summary = event.getFirstProperty("summary")
  if (summary !== null) vevent.addProperty(new ICAL.Property(summary.toJSON()))
  const organizer = event.getFirstProperty("organizer")
  if (organizer !== null) vevent.addProperty(new ICAL.Property(organizer.toJSON()))
  const attendee = new ICAL.Property("attendee")
  attendee.setValue(`mailto:${answer.attendee.address}`)
  attendee.setParameter("partstat", PARTSTAT[answer.status])
  if (answer.attendee.name !== null) attendee.setParameter("cn", answer.attendee.name)
  vevent.addProperty(attendee)
  if (answer.comment !== undefined && answer.comment.trim() !== "") vevent.addPropertyWithValue("comment", answer.comment.trim())
  reply.addSubcomponent(vevent)
  return `${reply.toString()}\r\n`
}

/** An event a mailbox organizes, as its invitations describe it (services/meetings). */
export interface OrganizedEvent {
  readonly uid: string
  readonly sequence: number
  readonly summary: string
  readonly description: string | null
  readonly location: string | null
  readonly url: string | null
  /** `date_time` in UTC (…Z), written in `time_zone` when it names one; or `date`. */
  readonly start: EventTime
  readonly end: EventTime
  readonly recurrence: string | null
  readonly organizer: Party
  readonly attendees: ReadonlyArray<{ readonly address: string; readonly name: string | null; readonly status: ParticipationStatus }>
}

const STATUS_PARTSTAT: Record<ParticipationStatus, string> = {
  needs_action: "NEEDS-ACTION",
  accepted: "ACCEPTED",
  declined: "DECLINED",
  tentative: "TENTATIVE",
  delegated: "DELEGATED"
}

/** A start or end as a DTSTART or DTEND: a day, a UTC time, or the wall-clock time in the zone it names (TZID). */
const timeProperty = (name: "dtstart" | "dtend", time: EventTime): ICAL.Property => {
  const property = new ICAL.Property(name)
  if (time.date !== null) {
    property.setValue(ICAL.Time.fromDateString(time.date))
  } else if (time.time_zone === null) {
    property.setValue(ICAL.Time.fromJSDate(new Date(time.date_time!), true))
  } else {
    const wall = wallTime(time.time_zone, Date.parse(time.date_time!))
    property.setValue(ICAL.Time.fromData({ ...wall, isDate: false }))
    property.setParameter("tzid", time.time_zone)
  }
  return property
}

const party = (name: "organizer" | "attendee", who: { readonly address: string; readonly name: string | null }) => {
  const property = new ICAL.Property(name)
  property.setValue(`mailto:${who.address}`)
  if (who.name !== null) property.setParameter("cn", who.name)
  return property
}

/**
 * The organizer's calendar for an event: an invitation or its update (REQUEST: every attendee with
 * their answer so far, asked to answer), or its cancellation (CANCEL: STATUS:CANCELLED). The
 * revision (`sequence`) is the caller's: each message about a changed event carries the next.
 */
export const organizerCalendar = (method: "REQUEST" | "CANCEL", event: OrganizedEvent, now: Date): string => {
  const calendar = new ICAL.Component("vcalendar")
  calendar.addPropertyWithValue("prodid", "-//Mailroom//Meetings//EN")
  calendar.addPropertyWithValue("version", "2.0")
  calendar.addPropertyWithValue("method", method)
  const vevent = new ICAL.Component("vevent")
  vevent.addPropertyWithValue("uid", event.uid)
  vevent.addPropertyWithValue("sequence", event.sequence)
  vevent.addPropertyWithValue("dtstamp", ICAL.Time.fromJSDate(now, true))
  // Each zone the times name, defined as its rules stand in the year the meeting starts.
  const year = new Date(event.start.date ?? event.start.date_time!).getUTCFullYear()
  for (const zone of new Set([event.start.time_zone, event.end.time_zone].filter((z) => z !== null))) {
    calendar.addSubcomponent(new ICAL.Component(ICAL.parse(`BEGIN:VCALENDAR\r\n${vtimezoneLines(zone, year).join("\r\n")}\r\nEND:VCALENDAR\r\n`)).getFirstSubcomponent("vtimezone")!)
  }
  vevent.addProperty(timeProperty("dtstart", event.start))
  vevent.addProperty(timeProperty("dtend", event.end))
  if (event.recurrence !== null) vevent.addPropertyWithValue("rrule", ICAL.Recur.fromString(event.recurrence))
  vevent.addPropertyWithValue("summary", event.summary)
  if (event.description !== null) vevent.addPropertyWithValue("description", event.description)
  if (event.location !== null) vevent.addPropertyWithValue("location", event.location)
  if (event.url !== null) vevent.addPropertyWithValue("url", event.url)
  vevent.addPropertyWithValue("status", method === "CANCEL" ? "CANCELLED" : "CONFIRMED")
  vevent.addProperty(party("organizer", event.organizer))
  for (const attendee of event.attendees) {
    const property = party("attendee", attendee)
    property.setParameter("role", "REQ-PARTICIPANT")
    property.setParameter("partstat", STATUS_PARTSTAT[attendee.status])
    if (method === "REQUEST") property.setParameter("rsvp", "TRUE")
    vevent.addProperty(property)
  }
  calendar.addSubcomponent(vevent)
  return `${calendar.toString()}\r\n`
}

/** What an attendee's REPLY says: the event it answers, each answering attendee's answer, and its note. */
export interface ReplyAnswers {
  readonly uid: string
  /** The revision answered; undefined when the reply names none (it is then taken for the current one). */
  readonly sequence: number | undefined
  readonly attendees: ReadonlyArray<{ readonly address: string; readonly name: string | null; readonly status: ParticipationStatus }>
  readonly comment: string | null
}

/** The answers in a calendar, when it is a REPLY; undefined for anything else. */
export const replyAnswers = (text: string): ReplyAnswers | undefined => {
  const read = readInvitation(text)
  if (Either.isLeft(read) || read.right.method !== "REPLY") return undefined
  const event = eventOf(Either.getOrThrow(parseCalendar(text)))
  return {
    uid: read.right.uid,
    sequence: event?.hasProperty("sequence") === true ? read.right.sequence : undefined,
    attendees: read.right.attendees.map(({ address, name, status }) => ({ address, name, status })),
    comment: event === undefined ? null : textOf(event, "comment")
  }
}

const FREQUENCIES: Record<string, readonly [string, string]> = {
  SECONDLY: ["second", "seconds"],
  MINUTELY: ["minute", "minutes"],
  HOURLY: ["hour", "hours"],
  DAILY: ["day", "days"],
  WEEKLY: ["week", "weeks"],
  MONTHLY: ["month", "months"],
  YEARLY: ["year", "years"]
}
const DAY_NAMES: Record<string, string> = { MO: "Monday", TU: "Tuesday", WE: "Wednesday", TH: "Thursday", FR: "Friday", SA: "Saturday", SU: "Sunday" }

/**
 * A repeat rule in words, for people reading an invitation's text: "every week on Thursday, 4 times",
 * "every 2 weeks on Monday and Wednesday, until 2027-03-01". Parts it cannot say (BYSETPOS, BYMONTHDAY…)
 * leave the rule as written, in brackets after the words.
 */
export const describeRule = (rule: string): string => {
  const parts = new Map(rule.split(";").map((part) => part.split("=") as [string, string]).map(([k, v]) => [k.toUpperCase(), v ?? ""]))
  const unit = FREQUENCIES[parts.get("FREQ")?.toUpperCase() ?? ""]
  if (unit === undefined) return rule
  const interval = Number(parts.get("INTERVAL") ?? "1")
  const words = [interval > 1 ? `every ${interval} ${unit[1]}` : `every ${unit[0]}`]
  const days = (parts.get("BYDAY") ?? "").split(",").filter((d) => d !== "").map((d) => DAY_NAMES[d.toUpperCase()])
  if (days.length > 0 && days.every((d) => d !== undefined)) words[0] += ` on ${days.length === 1 ? days[0] : `${days.slice(0, -1).join(", ")} and ${days.at(-1)}`}`
  const count = parts.get("COUNT")
  const until = parts.get("UNTIL")
  if (count !== undefined) words.push(`${count} ${count === "1" ? "time" : "times"}`)
  else if (until !== undefined && /^\d{8}/.test(until)) words.push(`until ${until.slice(0, 4)}-${until.slice(4, 6)}-${until.slice(6, 8)}`)
  const said = new Set(["FREQ", "INTERVAL", "BYDAY", "COUNT", "UNTIL", "WKST"])
  const unsaid = [...parts.keys()].some((key) => !said.has(key)) || (days.length > 0 && days.some((d) => d === undefined))
  return `${words.join(", ")}${unsaid ? ` (${rule})` : ""}`
}
