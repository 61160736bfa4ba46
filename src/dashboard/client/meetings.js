/**
 * A mailbox's meetings page: what is on its schedule in the next two weeks (its meetings and the invitations
 * it received, each occurrence with its answer); the meetings it organizes, each with when and where, its
 * attendees and their answers (as their calendars send them back), called off with Cancel; and a form to
 * schedule one (times in this browser's zone; attendees by address), the server's refusals shown by their
 * fields.
 */
import { html } from "htm/preact"
import { useState } from "preact/hooks"
import { call, fieldError, fieldErrorWithin } from "./api.js"
import { href } from "./router.js"
import { ErrorNote, Field, lastDay, LoadFailed, TextArea, useReloading, WithMailbox } from "./ui.js"
import { addressShown } from "./idn.js"

/** The fields the server may refuse, each shown by its input (any other refusal below the form). */
const FIELDS = ["summary", "start", "end", "attendees", "location", "url", "description"]

const ANSWER_TAGS = /** @type {Record<string, string>} */ ({ accepted: "succeeded", declined: "failed" })
const ANSWER_WORDS = /** @type {Record<string, string>} */ ({
  needs_action: "no answer yet",
  accepted: "accepted",
  declined: "declined",
  tentative: "maybe",
  delegated: "delegated"
})

/** A day (YYYY-MM-DD) in this browser's words, with `style`'s parts. */
const day = (/** @type {string} */ date, /** @type {Intl.DateTimeFormatOptions} */ style) => new Date(`${date}T00:00:00`).toLocaleDateString([], style)

/**
 * When a meeting is: "Dec 3, 2026, 3:00 PM – Dec 3, 2026, 4:00 PM" (this browser's zone), or its whole
 * days, the first and the last ("Jan 10, 2027 – Jan 11, 2027"; one day alone): the API's end of whole days
 * is the day after the last (RFC 5545).
 * @param {{ date_time: string | null, date: string | null }} start
 * @param {{ date_time: string | null, date: string | null }} end
 */
const shown = (start, end) => {
  if (start.date !== null) return days(start.date, end.date, { dateStyle: "medium" })
  const moment = (/** @type {{ date_time: string | null }} */ time) =>
    new Date(/** @type {string} */ (time.date_time)).toLocaleString([], { dateStyle: "medium", timeStyle: "short" })
  return `${moment(start)} – ${moment(end)}`
}

/**
 * Whole days from `first` to the day before `end` (exclusive, as iCalendar ends them): the day alone
 * when there is one.
 * @param {string} first @param {string | null} end @param {Intl.DateTimeFormatOptions} style
 */
const days = (first, end, style) => {
  const last = end === null ? first : lastDay(end)
  return last <= first ? day(first, style) : `${day(first, style)} – ${day(last, style)}`
}

/** @param {{ meeting: any, onCancel: () => Promise<void> }} props */
const MeetingCard = ({ meeting, onCancel }) => {
  const [asking, setAsking] = useState(false)
  const cancelled = meeting.status === "cancelled"
  return html`
    <li class="card meeting" aria-label=${meeting.summary}>
      <h2><span dir="auto">${meeting.summary}</span> ${cancelled && html`<span class="tag failed">cancelled</span>`}</h2>
      <p class="muted">${shown(meeting.start, meeting.end)}${meeting.recurrence ? `, repeating (${meeting.recurrence})` : ""}${
    meeting.location ? html` · <span dir="auto">${meeting.location}</span>` : ""
  }</p>
      <ul class="tags" aria-label=${`Answers to ${meeting.summary}`}>
        ${meeting.attendees.map((/** @type {any} */ a) => html`
          <li key=${a.address} class=${"tag " + (ANSWER_TAGS[a.status] ?? "")} title=${a.comment ?? ""}>
            ${a.name ?? a.address}: ${ANSWER_WORDS[a.status] ?? a.status}</li>`)}
      </ul>
      ${!cancelled && (asking
    ? html`
          <div class="confirm" role="group" aria-label=${`Cancel ${meeting.summary}`}>
            <p>Every attendee is told, and their calendar removes it.</p>
            <div class="actions">
              <button type="button" class="danger" onClick=${onCancel}>Cancel the meeting</button>
              <button type="button" class="secondary" onClick=${() => setAsking(false)}>Keep it</button>
            </div>
          </div>`
    : html`<div class="actions"><button type="button" class="secondary" aria-label=${`Cancel ${meeting.summary}…`}
        onClick=${() => setAsking(true)}>Cancel…</button></div>`)}
    </li>`
}

/** How far ahead the schedule looks. */
const AHEAD_DAYS = 14

/**
 * An occurrence's day and hours, short: "Thu, Dec 3, 3:00 – 4:00 PM" (this browser's zone), or its whole
 * days ("Sun, Jan 10 – Mon, Jan 11", the last one inclusive; one day alone).
 * @param {{ date_time: string | null, date: string | null }} start
 * @param {{ date_time: string | null, date: string | null }} end
 */
const when = (start, end) => {
  if (start.date !== null) return days(start.date, end.date, { weekday: "short", month: "short", day: "numeric" })
  const from = new Date(/** @type {string} */ (start.date_time))
  const to = new Date(/** @type {string} */ (end.date_time))
  const day = from.toLocaleDateString([], { weekday: "short", month: "short", day: "numeric" })
  const time = (/** @type {Date} */ d) => d.toLocaleTimeString([], { timeStyle: "short" })
  return `${day}, ${time(from)} – ${time(to)}`
}

/** @param {{ occurrences: any[] }} props */
const Upcoming = ({ occurrences }) =>
  occurrences.length === 0
    ? html`<p class="muted">Nothing in the next ${AHEAD_DAYS} days: the invitations this mailbox receives and the meetings it organizes show here.</p>`
    : html`<ol class="card schedule-list" aria-label="Coming up">
        ${occurrences.map((o) => html`
          <li key=${`${o.uid} ${o.recurrence_id ?? ""}`} class=${o.busy ? "" : "free"}>
            <time datetime=${o.start.date_time ?? o.start.date}>${when(o.start, o.end)}</time>
            <span class="what"><span dir="auto">${o.summary ?? "(no title)"}</span>${o.location ? html` <span class="muted">· <span dir="auto">${o.location}</span></span>` : ""}</span>
            <span class="tags">
              <span class="tag">${o.role === "organizer" ? "yours" : `from ${o.organizer?.name ?? o.organizer?.address ?? "someone"}`}</span>
              ${o.role === "attendee" && html`<span class=${"tag " + (ANSWER_TAGS[o.response] ?? "")}>${ANSWER_WORDS[o.response] ?? o.response}</span>`}
            </span>
          </li>`)}
      </ol>`

/** This browser's time zone (an IANA name), which the form's times are in. */
const ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone

/** A datetime-local input's value as an ISO time with its offset (this browser's zone); "" for none. */
const isoOf = (/** @type {string} */ local) => (local === "" ? "" : new Date(local).toISOString())

/** @param {{ mailbox: any }} props */
const Meetings = ({ mailbox }) => {
  const base = `/api/mailboxes/${encodeURIComponent(mailbox.mailbox_id)}/meetings`
  const [meetings, setMeetings] = useState(/** @type {any[] | undefined} */ (undefined))
  const [upcoming, setUpcoming] = useState(/** @type {any[]} */ ([]))
  const [summary, setSummary] = useState("")
  const [start, setStart] = useState("")
  const [end, setEnd] = useState("")
  const [attendees, setAttendees] = useState("")
  const [location, setLocation] = useState("")
  const [description, setDescription] = useState("")
  const { error, failure, retry, run } = useReloading(
    async (isCurrent) => {
      const from = new Date()
      const to = new Date(from.getTime() + AHEAD_DAYS * 86_400_000)
      const schedule = `/api/mailboxes/${encodeURIComponent(mailbox.mailbox_id)}/schedule?from=${from.toISOString()}&to=${to.toISOString()}&limit=100`
      const [listed, scheduled] = await Promise.all([call("GET", `${base}?sort=start:asc&limit=100`), call("GET", schedule)])
      if (!isCurrent()) return
      setMeetings(listed.data)
      setUpcoming(scheduled.data)
    },
    [base]
  )

  /** @param {Event} event */
  const schedule = (event) => {
    event.preventDefault()
    return run(async () => {
      await call("POST", base, {
        summary,
        // Kept in this browser's zone: a repeating meeting stays at its local hour across summer time.
        start: { date_time: isoOf(start), time_zone: ZONE },
        end: { date_time: isoOf(end), time_zone: ZONE },
        attendees: attendees.split(/[,;\s]+/).filter((a) => a !== ""),
        ...(location.trim() === "" ? {} : { location }),
        ...(description.trim() === "" ? {} : { description })
      })
      setSummary("")
      setStart("")
      setEnd("")
      setAttendees("")
      setLocation("")
      setDescription("")
    })
  }

  if (failure) return html`<${LoadFailed} error=${failure} onRetry=${retry} />`
  if (meetings === undefined) return html`<p class="muted">Loading…</p>`
  return html`
    <h2>Coming up</h2>
    <${Upcoming} occurrences=${upcoming} />
    <h2>Organized here</h2>
    ${meetings.length === 0
      ? html`<p class="muted">No meetings yet: the ones this mailbox organizes show here, with each attendee's answer.</p>`
      : html`<ul class="meetings" aria-label="Meetings">
          ${meetings.map((m) => html`<${MeetingCard} key=${m.meeting_id} meeting=${m}
            onCancel=${() => run(() => call("POST", `/api/meetings/${encodeURIComponent(m.meeting_id)}/cancel`))} />`)}
        </ul>`}
    <form class="card" onSubmit=${schedule} aria-label="Schedule a meeting">
      <h2>Schedule a meeting</h2>
      <p class="muted small">Each attendee gets an invitation from ${addressShown(mailbox.email_address)} that their calendar answers.</p>
      <${Field} id="meeting-summary" label="Title" value=${summary} onInput=${setSummary} required error=${fieldError(error, "summary")} />
      <div class="row-form schedule">
        <${Field} id="meeting-start" label="Starts" type="datetime-local" value=${start} onInput=${setStart} required
          error=${fieldErrorWithin(error, "start")} />
        <${Field} id="meeting-end" label="Ends" type="datetime-local" value=${end} onInput=${setEnd} required
          error=${fieldErrorWithin(error, "end")} />
      </div>
      <${Field} id="meeting-attendees" label="Attendees (addresses, separated by commas)" value=${attendees} onInput=${setAttendees}
        required error=${fieldErrorWithin(error, "attendees")} />
      <${Field} id="meeting-location" label="Where (optional)" value=${location} onInput=${setLocation} error=${fieldError(error, "location")} />
      <${TextArea} id="meeting-description" label="Description (optional)" value=${description} onInput=${setDescription} rows=${3}
        error=${fieldError(error, "description")} />
      ${!FIELDS.some((field) => fieldErrorWithin(error, field)) && html`<${ErrorNote} error=${error} />`}
      <div class="actions"><button type="submit">Send invitations</button></div>
    </form>
  `
}

/** @param {{ mailboxId: string }} props */
export const MailboxMeetings = ({ mailboxId }) => html`
  <${WithMailbox} mailboxId=${mailboxId} render=${(/** @type {any} */ mailbox) => html`
    <p><a href=${href("mailboxes", mailboxId)}>← Back to the inbox</a></p>
    <h1>Meetings of ${addressShown(mailbox.email_address)}</h1>
    <${Meetings} mailbox=${mailbox} />
  `} />
`
