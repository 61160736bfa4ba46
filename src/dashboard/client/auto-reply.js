/**
 * A mailbox's automatic reply: what it answers received mail with (subject, message), how often one
 * sender hears it, and when it is on (from, until, in this browser's time); turned on or changed with
 * Save, off with Turn off. The server's refusals show by their fields.
 */
import { html } from "htm/preact"
import { useState } from "preact/hooks"
import { call, fieldError } from "./api.js"
import { href } from "./router.js"
import { ErrorNote, Field, LoadFailed, TextArea, useReloading, when, WithMailbox } from "./ui.js"
import { addressShown } from "./idn.js"

/** The fields the server may refuse, each shown by its input (any other refusal below the form). */
const FIELDS = ["subject", "text", "interval_days", "starts_at", "ends_at"]

/** An ISO time as a datetime-local input shows it, in this browser's time zone; "" for none. */
const localInput = (/** @type {string | null} */ iso) => {
  if (!iso) return ""
  const date = new Date(iso)
  return new Date(date.getTime() - date.getTimezoneOffset() * 60_000).toISOString().slice(0, 16)
}

/** A datetime-local input's value as the API takes it; null for none. */
const isoOf = (/** @type {string} */ local) => (local === "" ? null : new Date(local).toISOString())

/** What the reply does now, in words. */
const stateOf = (/** @type {any} */ reply) =>
  reply === null
    ? "Off: received mail is not answered."
    : reply.active
    ? `On: mail received now is answered${reply.ends_at ? ` until ${when(reply.ends_at)}` : ""}.`
    : reply.starts_at && Date.parse(reply.starts_at) > Date.now()
    ? `Scheduled: mail received from ${when(reply.starts_at)}${reply.ends_at ? ` until ${when(reply.ends_at)}` : ""} is answered.`
    : "Ended: its time has passed."

/** @param {{ mailbox: any }} props */
const AutoReplyForm = ({ mailbox }) => {
  const base = `/api/mailboxes/${encodeURIComponent(mailbox.mailbox_id)}/auto-reply`
  const [reply, setReply] = useState(/** @type {any} */ (undefined))
  const [subject, setSubject] = useState("")
  const [text, setText] = useState("")
  const [days, setDays] = useState("7")
  const [from, setFrom] = useState("")
  const [until, setUntil] = useState("")
  /** @param {any} saved */
  const show = (saved) => {
    setReply(saved)
    setSubject(saved?.subject ?? "")
    setText(saved?.text ?? "")
    setDays(String(saved?.interval_days ?? 7))
    setFrom(localInput(saved?.starts_at ?? null))
    setUntil(localInput(saved?.ends_at ?? null))
  }
  const { error, failure, retry, run } = useReloading((isCurrent) => call("GET", base).then((a) => isCurrent() && show(a.data)), [base])

  /** @param {Event} event */
  const save = (event) => {
    event.preventDefault()
    return run(async () =>
      show((await call("PUT", base, {
        subject: subject.trim() === "" ? null : subject,
        text,
        interval_days: Number(days),
        starts_at: isoOf(from),
        ends_at: isoOf(until)
      })).data)
    )
  }

  if (failure) return html`<${LoadFailed} error=${failure} onRetry=${retry} />`
  if (reply === undefined) return html`<p class="muted">Loading…</p>`
  return html`
    <p class="note" role="status">${stateOf(reply)}</p>
    <form class="card" onSubmit=${save} aria-label="Automatic reply">
      <p class="muted small">
        Each person who writes to ${addressShown(mailbox.email_address)} gets this answer once, as a reply marked automatic. Mailing lists,
        automatic mail, bounces, no-reply senders and spam get none.
      </p>
      <${Field} id="auto-reply-subject" label="Subject (empty: Re: and the subject answered)" value=${subject} onInput=${setSubject}
        error=${fieldError(error, "subject")} />
      <${TextArea} id="auto-reply-text" label="Message" value=${text} onInput=${setText} rows=${6} error=${fieldError(error, "text")} />
      <div class="row-form schedule">
        <${Field} id="auto-reply-days" label="Days before answering a sender again" type="number" value=${days} onInput=${setDays}
          inputmode="numeric" required error=${fieldError(error, "interval_days")} />
        <${Field} id="auto-reply-from" label="From (empty: now)" type="datetime-local" value=${from} onInput=${setFrom}
          error=${fieldError(error, "starts_at")} />
        <${Field} id="auto-reply-until" label="Until (empty: until turned off)" type="datetime-local" value=${until} onInput=${setUntil}
          error=${fieldError(error, "ends_at")} />
      </div>
      ${!FIELDS.some((field) => fieldError(error, field)) && html`<${ErrorNote} error=${error} />`}
      <div class="actions">
        <button type="submit">${reply === null ? "Turn on" : "Save"}</button>
        ${reply !== null && html`
          <button type="button" class="secondary" onClick=${() => run(async () => (await call("DELETE", base), show(null)))}>Turn off</button>`}
      </div>
    </form>
  `
}

/** @param {{ mailboxId: string }} props */
export const MailboxAutoReply = ({ mailboxId }) => html`
  <${WithMailbox} mailboxId=${mailboxId} render=${(/** @type {any} */ mailbox) => html`
    <p><a href=${href("mailboxes", mailboxId)}>← Back to the inbox</a></p>
    <h1>Automatic reply of ${addressShown(mailbox.email_address)}</h1>
    <${AutoReplyForm} mailbox=${mailbox} />
  `} />
`
