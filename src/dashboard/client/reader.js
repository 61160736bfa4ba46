/**
 * One email: who, when, its labels (editable), attachments (and their text), the raw download, its thread, the body
 * shown safely, each recipient's delivery for sent mail (a received email's forwarded copies), and replying.
 */
import { html } from "htm/preact"
import { useEffect, useMemo, useRef, useState } from "preact/hooks"
import { call } from "./api.js"
import { ReplyForm } from "./compose.js"
import { MailFrame, mailDocument } from "./mail-frame.js"
import { addressesShown, addressShown, storedTitle } from "./idn.js"
import { backToList, go, href } from "./router.js"
import { ConfirmDelete, ErrorNote, lastDay, size, useAction, when } from "./ui.js"

/** Labels that state what an email is: Mailroom sets them, nobody changes them. */
const FACT_LABELS = ["inbound", "sent"]

/**
 * The email's labels, each removable (but the facts), and a field to add one. A refusal (a fact
 * label, a comma in the name) is shown here; the email shown is the server's answer.
 * @param {{ email: any, onChanged: (email: any) => void }} props
 */
const Labels = ({ email, onChanged }) => {
  const [label, setLabel] = useState("")
  const [error, setError] = useState(/** @type {unknown} */ (null))
  const box = useRef(/** @type {HTMLDivElement | null} */ (null))
  /**
   * Remove a label; the keyboard moves to the next label's remove button (else the one before, else
   * the new label's field), not to the page.
   * @param {string} name
   */
  const remove = async (name) => {
    const removable = email.labels.filter((/** @type {string} */ l) => !FACT_LABELS.includes(l))
    const at = removable.indexOf(name)
    if (!(await change({ remove_labels: [name] }))) return
    requestAnimationFrame(() => {
      const buttons = box.current?.querySelectorAll("button.remove") ?? []
      const next = buttons[Math.min(at, buttons.length - 1)] ?? box.current?.querySelector("#new-label")
      if (next instanceof HTMLElement) next.focus()
    })
  }
  /** @param {{ add_labels?: string[], remove_labels?: string[] }} change */
  const change = async (change) => {
    setError(null)
    try {
      onChanged((await call("PATCH", `/api/emails/${encodeURIComponent(email.email_id)}`, change)).data)
      return true
    } catch (failure) {
      setError(failure)
      return false
    }
  }
  return html`
    <div class="labels" ref=${box}>
      <ul class="tags" aria-label="Labels">
        ${email.labels.map((/** @type {string} */ name) => html`
          <li key=${name} class="tag"><span dir="auto">${name}</span>${!FACT_LABELS.includes(name) && html`
            <button type="button" class="link remove" aria-label=${`Remove label ${name}`}
              onClick=${() => remove(name)}>×</button>`}</li>`)}
      </ul>
      <form class="inline-form" aria-label="Add a label"
        onSubmit=${async (/** @type {Event} */ e) => (e.preventDefault(), (await change({ add_labels: [label] })) && setLabel(""))}>
        <label for="new-label" class="visually-hidden">New label</label>
        <input id="new-label" value=${label} placeholder="New label" maxLength=${64} dir="auto"
          onInput=${(/** @type {any} */ e) => setLabel(e.currentTarget.value)} />
        <button type="submit" class="secondary" disabled=${label.trim() === ""}>Add label</button>
      </form>
      <${ErrorNote} error=${error} />
    </div>
  `
}

/** Kinds that are never text (the server answers 422 for them): no "Show text" offered. */
const NEVER_TEXT = /^(image|audio|video|font)\/|^application\/(zip|gzip|x-7z-compressed|x-rar-compressed|x-tar)\b/i

/** @param {{ format: string, pages: number | null, characters: number, truncated: boolean }} text */
const describeText = (text) =>
  `${text.format === "pdf" ? `PDF, ${text.pages} ${text.pages === 1 ? "page" : "pages"}` : text.format.toUpperCase()} · ` +
  `${text.characters.toLocaleString()} characters${text.truncated ? " (the rest left out)" : ""}`

/**
 * An attachment: its download, and what it says (a PDF's pages, a text or HTML attachment's text),
 * shown on asking as plain text; why there is none when the server cannot read it.
 * @param {{ base: string, attachment: any }} props
 */
/** The most bytes of the message's own images the reader reads to show them in its HTML. */
const INLINE_IMAGES_BYTES = 10 * 1024 * 1024

/**
 * The images the email's HTML shows by `cid:` (its own attachments, with a Content-ID), read as data:
 * URLs (the frame's policy loads nothing else), keyed by Content-ID without angle brackets.
 * @param {string} base @param {any} email
 * @returns {Record<string, string>}
 */
const useInlineImages = (base, email) => {
  const [inline, setInline] = useState(/** @type {Record<string, string>} */ ({}))
  useEffect(() => {
    setInline({})
    if (!email?.html) return
    let bytes = 0
    const wanted = email.attachments.filter((/** @type {any} */ a) => {
      const id = a.content_id?.replace(/^<|>$/g, "")
      if (!id || !/^image\//i.test(a.content_type ?? "") || !email.html.includes(id) || bytes + a.size > INLINE_IMAGES_BYTES) return false
      bytes += a.size
      return true
    })
    let live = true
    Promise.all(wanted.map(async (/** @type {any} */ a) => {
      const response = await fetch(`${base}/attachments/${encodeURIComponent(a.attachment_id)}`, { credentials: "same-origin" })
      if (!response.ok) return undefined
      const blob = await response.blob()
      const url = await new Promise((resolve) => {
        const reader = new FileReader()
        reader.onload = () => resolve(String(reader.result).replace(/^data:[^;,]*/, `data:${a.content_type}`))
        reader.onerror = () => resolve(undefined)
        reader.readAsDataURL(blob)
      })
      return url === undefined ? undefined : [a.content_id.replace(/^<|>$/g, ""), url]
    })).then((found) => {
      if (live) setInline(Object.fromEntries(found.filter((entry) => entry !== undefined)))
    }, () => undefined)
    return () => {
      live = false
    }
  }, [email?.email_id, email?.html])
  return inline
}

const Attachment = ({ base, attachment }) => {
  const path = `${base}/attachments/${encodeURIComponent(attachment.attachment_id)}`
  const [text, setText] = useState(/** @type {any} */ (null))
  const [error, setError] = useState(/** @type {unknown} */ (null))
  const [busy, setBusy] = useState(false)
  const toggle = async () => {
    if (text !== null || error !== null) return (setText(null), setError(null))
    setBusy(true)
    try {
      setText((await call("GET", `${path}/text`)).data)
    } catch (failure) {
      setError(failure)
    } finally {
      setBusy(false)
    }
  }
  const shown = text !== null || error !== null
  return html`
    <li><a href=${path} download dir="auto">${attachment.filename ?? attachment.attachment_id}</a>
      <span class="muted small"> ${attachment.content_type}, ${size(attachment.size)}</span>
      ${!NEVER_TEXT.test(attachment.content_type) && html` <button type="button" class="link" aria-expanded=${shown} disabled=${busy}
        onClick=${toggle}>${busy ? "Reading…" : shown ? "Hide text" : "Show text"}</button>`}
      <${ErrorNote} error=${error} />
      ${text && html`
        <p class="muted small">${describeText(text)}</p>
        <pre class="mail-text" dir="auto" aria-label=${`Text of ${attachment.filename ?? "the attachment"}`}>${text.text}</pre>`}
    </li>`
}

/** Whether an attachment is a calendar (what GET …/invitation reads). */
const isCalendar = (/** @type {any} */ a) => /^(text\/calendar|application\/ics)$/i.test(a.content_type) || /\.ics$/i.test(a.filename ?? "")

/** A day (YYYY-MM-DD) as this browser writes it, in full: "Wednesday, January 20, 2027". */
const fullDay = (/** @type {string} */ date) => new Date(`${date}T00:00:00`).toLocaleDateString([], { dateStyle: "full" })

/**
 * When an event is: its start and end, or for whole days the first and the last (iCalendar's end is
 * the day after the last, RFC 5545: a one-day event shows its day alone).
 * @param {{ date_time: string | null, date: string | null }} start
 * @param {{ date_time: string | null, date: string | null } | null} end
 */
const eventTimes = (start, end) => {
  if (start.date !== null) {
    const last = end?.date ? lastDay(end.date) : start.date
    return last <= start.date ? fullDay(start.date) : `${fullDay(start.date)} – ${fullDay(last)}`
  }
  const moment = (/** @type {{ date_time: string | null }} */ time) =>
    new Date(/** @type {string} */ (time.date_time)).toLocaleString([], { dateStyle: "full", timeStyle: "short" })
  return end?.date_time ? `${moment(start)} – ${moment(end)}` : moment(start)
}

const ANSWERS = /** @type {const} */ ([["accepted", "Accept"], ["tentative", "Maybe"], ["declined", "Decline"]])
const ANSWERED = { accepted: "You accepted", tentative: "You answered maybe", declined: "You declined" }

/** Why an email's calendar changed nothing, for who sent it (the API's not_applied_reason), as the card says it. */
const NOT_APPLIED = /** @type {Record<string, string>} */ ({
  not_organizer: "it does not come from the event's organizer",
  not_attendee: "it answers for attendees other than its sender",
  unverified_sender: "nothing proves it comes from its sender. Take the unauthenticated label off this email to vouch for it"
})

/**
 * The one state an invitation's card shows, as the API ranks why an invitation cannot be answered
 * (services/invitations/invitations.ts closedReason): the schedule moved past this email's revision, "cancelled"
 * (called off since) outranking "superseded" (an update replaced it); else "not_applied" (this email's change was
 * refused for who sent it: vouching for it would apply it); else "cancelled" (this email, or the schedule at its
 * revision, calls it off). A cancellation refused for who sent it called nothing off: it shows as not applied,
 * unless the schedule has the event called off anyway. null: nothing to say.
 * @param {any} i the invitation as GET …/invitation answers it
 * @returns {"cancelled" | "superseded" | "not_applied" | null}
 */
const invitationState = (i) => {
  const reason = i.not_respondable_reason
  if (i.method === "CANCEL" && i.not_applied_reason && i.schedule_status !== "cancelled") return "not_applied"
  // An answer (REPLY) or a calendar that asks nothing is about an event the schedule may have called off since.
  if (reason === "cancelled" || (reason === "not_a_request" && i.schedule_status === "cancelled")) return "cancelled"
  if (reason === "superseded") return "superseded"
  return i.not_applied_reason ? "not_applied" : null
}

/**
 * A calendar invitation the email carries: what, when, where, who, and the mailbox's answer to the
 * organizer (Accept, Maybe, Decline, with an optional note), sent as a calendar reply.
 * @param {{ base: string }} props
 */
const Invitation = ({ base }) => {
  const [invitation, setInvitation] = useState(/** @type {any} */ (null))
  const [comment, setComment] = useState("")
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState(/** @type {unknown} */ (null))
  useEffect(() => {
    call("GET", `${base}/invitation`).then(({ data }) => setInvitation(data), setError)
  }, [base])
  /** @param {string} status */
  const answer = async (status) => {
    setBusy(true)
    setError(null)
    try {
      await call("POST", `${base}/invitation/respond`, comment.trim() === "" ? { status } : { status, comment })
      setInvitation((await call("GET", `${base}/invitation`)).data)
      setComment("")
    } catch (failure) {
      setError(failure)
    } finally {
      setBusy(false)
    }
  }
  if (!invitation) return html`<${ErrorNote} error=${error} />`
  const i = invitation
  // The mailbox's own answer is its latest through Mailroom, which the invitation it received cannot know.
  const going = i.attendees.filter((/** @type {any} */ a) => (a.is_mailbox && i.response ? i.response.status : a.status) === "accepted").length
  const state = invitationState(i)
  const latest = i.latest_email_id && html` <a href=${href("emails", i.latest_email_id)}>${state === "not_applied" ? "Open the one the schedule holds" : "Open the latest"}</a>`
  return html`
    <section class="invitation" aria-label="Invitation">
      <h2>${
    state === "cancelled" ? "Cancelled: " : state === "not_applied" && i.method === "CANCEL" ? "Cancellation not applied: " : i.method === "REPLY" ? "Answer to: " : ""
  }<span dir="auto">${i.summary ?? "(no title)"}</span></h2>
      ${state === "superseded" && html`<p class="note hint" role="status">Superseded by a later update: what this email says is no longer current.${latest}</p>`}
      ${state === "cancelled" && i.method !== "CANCEL" && html`<p class="note error" role="status">Cancelled by the organizer.${latest}</p>`}
      ${state === "not_applied" && html`<p class="note error" role="status">${i.method === "REPLY" ? "Not counted" : "Not applied to the schedule"}: ${NOT_APPLIED[i.not_applied_reason] ?? i.not_applied_reason}.${latest}</p>`}
      <dl class="meta">
        <dt>When</dt><dd>${eventTimes(i.start, i.end)}${
    i.recurrence && html` <span class="muted small">repeats: ${i.recurrence}</span>`
  }</dd>
        ${i.location && html`<dt>Where</dt><dd dir="auto">${i.location}</dd>`}
        ${i.organizer && html`<dt>Organizer</dt><dd>${i.organizer.name && html`<span dir="auto">${i.organizer.name}</span> `}${
    i.organizer.name ? `<${addressShown(i.organizer.address)}>` : addressShown(i.organizer.address)
  }</dd>`}
        ${i.attendees.length > 0 && html`<dt>Guests</dt><dd>${i.attendees.length} invited, ${going} going</dd>`}
      </dl>
      ${i.response && html`<p class="note" role="status">${ANSWERED[/** @type {keyof typeof ANSWERED} */ (i.response.status)]} on ${new Date(i.response.responded_at).toLocaleString()}.</p>`}
      ${i.respondable && html`
        <form class="inline-form" aria-label="Answer the invitation" onSubmit=${(/** @type {Event} */ e) => e.preventDefault()}>
          <label for="invitation-note" class="visually-hidden">Note to the organizer</label>
          <input id="invitation-note" value=${comment} placeholder="Note to the organizer (optional)" maxLength=${2000}
            onInput=${(/** @type {any} */ e) => setComment(e.currentTarget.value)} />
          ${ANSWERS.map(([status, label]) => html`
            <button type="button" key=${status} class=${i.response?.status === status ? "" : "secondary"} disabled=${busy}
              aria-pressed=${i.response?.status === status} onClick=${() => answer(status)}>${label}</button>`)}
        </form>`}
      <${ErrorNote} error=${error} />
    </section>`
}

/**
 * What became of the email at each address: a sent email's recipients ("Delivery"), or a received
 * email's copies to its mailbox's forwarding addresses ("Forwarded to").
 * @param {{ title: string, rows: { address: string, status: string, attempts: number, attempting: boolean, last_response: string | null, complained_at?: string | null }[] }} props
 */
const Deliveries = ({ title, rows }) => html`
  <h2>${title}</h2>
  <div class="table-scroll">
    <table class="deliveries" aria-label=${title}>
      <thead><tr><th scope="col">${title === "Delivery" ? "Recipient" : "Address"}</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Last answer</th></tr></thead>
      <tbody>
        ${rows.map((d) => html`
          <tr key=${d.address}><td>${d.address}</td>
            <td><span class=${"tag " + (d.status === "sent" ? "succeeded" : d.status === "bounced" || d.status === "failed" ? "failed" : "")}>${d.status}</span>${
    d.complained_at && html` <span class="tag failed" title=${"Reported as spam on " + new Date(d.complained_at).toLocaleString()}>reported as spam</span>`
  }${d.attempting && html` <span class="tag" title="The receiving server is being talked to now">sending now</span>`}</td>
            <td>${d.attempts}</td><td class="small">${d.last_response ?? ""}</td></tr>`)}
      </tbody>
    </table>
  </div>
`

/**
 * A header's first value (the API answers a repeated header as a list).
 * @param {Record<string, string | string[]>} headers @param {string} name
 */
const firstHeader = (headers, name) => {
  const value = headers[name]
  return Array.isArray(value) ? value[0] : value
}

/**
 * What an email's List-Unsubscribe offers, read as the server reads it (services/mail/list-unsubscribe.ts):
 * a web address that takes one click (List-Unsubscribe-Post), an address to write to, or only a page
 * for a person to open.
 * @param {Record<string, string | string[]>} headers
 */
const unsubscribeWays = (headers) => {
  const uris = [...(firstHeader(headers, "list-unsubscribe") ?? "").matchAll(/<\s*([^>]+?)\s*>/g)].map((m) => m[1])
  const oneClick = /\bList-Unsubscribe\s*=\s*One-Click\b/i.test(firstHeader(headers, "list-unsubscribe-post") ?? "")
  const web = uris.find((uri) => /^https?:\/\//i.test(uri))
  const mailto = uris.some((uri) => /^mailto:/i.test(uri))
  return { byServer: (oneClick && web !== undefined) || mailto, page: oneClick ? undefined : web }
}

/**
 * Leaving the list a received email came from: the Unsubscribe button where the server can do it
 * (one click, or a message to the list's address); a list that only offers a web page is linked for
 * the person to open; mail from a sender that is not authenticated says why it is not offered.
 * @param {{ email: any }} props
 */
const Unsubscribe = ({ email }) => {
  const [done, setDone] = useState(/** @type {string | null} */ (null))
  const [error, setError] = useState(/** @type {any} */ (null))
  const ways = unsubscribeWays(email.headers)
  if (!ways.byServer && ways.page === undefined) return null
  if (!ways.byServer) {
    return html`<p class="note unsubscribe">This list unsubscribes on its own page: <a href=${ways.page} target="_blank" rel="noopener noreferrer">unsubscribe there</a>.</p>`
  }
  if (email.labels.includes("unauthenticated")) {
    return html`<p class="note unsubscribe">No Unsubscribe: the sender is not authenticated, and unsubscribing would tell whoever
      sent this that the address is read. Block the sender instead.</p>`
  }
  const leave = () =>
    call("POST", `/api/emails/${encodeURIComponent(email.email_id)}/unsubscribe`).then(
      ({ data }) => (setError(null), setDone(data.method === "one_click" ? "Unsubscribed: the sender's list took the request." : `Unsubscribed: a request went to ${data.address}.`)),
      setError
    )
  if (done) return html`<p class="notice" role="status">${done}</p>`
  return html`
    <div class="unsubscribe">
      <button type="button" class="secondary" onClick=${leave}>Unsubscribe</button>
      <${ErrorNote} error=${error} />
    </div>`
}

/** @param {{ emailId: string }} props */
export const ReaderPage = ({ emailId }) => {
  const [email, setEmail] = useState(/** @type {any} */ (null))
  const [thread, setThread] = useState(/** @type {any} */ (null))
  const [allowImages, setAllowImages] = useState(false)
  const [replying, setReplying] = useState(/** @type {"reply" | "all" | null} */ (null))
  const [error, setError] = useState(/** @type {unknown} */ (null))
  const marking = useAction({ once: true })
  const base = `/api/emails/${encodeURIComponent(emailId)}`

  useEffect(() => {
    setEmail(null)
    setThread(null)
    setAllowImages(false)
    setReplying(null)
    ;(async () => {
      try {
        let { data } = await call("GET", base)
        if (data.labels.includes("unread")) data = (await call("PATCH", base, { remove_labels: ["unread"] })).data
        setEmail(data)
        const answer = await call("GET", `/api/threads/${encodeURIComponent(data.thread_id)}`)
        if (answer.data.message_count > 1) setThread(answer.data)
      } catch (failure) {
        setError(failure)
      }
    })()
  }, [emailId])

  // A sent email's delivery (a received one's forwarded copies) changes as the mta works: asked again until none is queued.
  const pending = [...(email?.delivery ?? []), ...(email?.forwarded ?? [])].some((/** @type {any} */ d) => d.status === "queued" || d.status === "deferred")
  useEffect(() => {
    if (!pending) return
    const timer = setTimeout(() => call("GET", base).then((answer) => setEmail(answer.data), setError), 1000)
    return () => clearTimeout(timer)
  }, [email])

  const inline = useInlineImages(base, email)
  // Its frame is keyed by the document: a new document (the message's images read, remote ones allowed) gets
  // a new frame. A frame whose srcdoc changes navigates, a history entry Back would step through before leaving.
  const body = useMemo(() => (email?.html ? mailDocument(email.html, allowImages, inline) : null), [email?.html, allowImages, inline])

  if (error) return html`<${ErrorNote} error=${error} />`
  if (!email) return html`<p class="muted">Loading…</p>`
  const to = email.to.join(", ")
  const back = backToList(email.mailbox_id)
  // Unread again, for later: back to the list it came from, as mail programs do (staying would read it again).
  const markUnread = () => marking.run(async () => {
    await call("PATCH", base, { add_labels: ["unread"] })
    location.hash = back.href
  })
  return html`
    <p><a href=${back.href}>${back.label}</a></p>
    <article class="card reader">
      <h1 dir="auto">${email.subject || "(no subject)"}</h1>
      <dl class="meta">
        <dt>From</dt><dd title=${storedTitle(email.from)}>${email.from_name && html`<span dir="auto">${email.from_name}</span> `}${
    email.from_name ? `<${addressShown(email.from)}>` : addressShown(email.from)
  }${
    email.direction === "inbound" && email.from.includes("@") && html` <a class="small" href=${`${href("mailboxes", email.mailbox_id)}?${new URLSearchParams({ from: email.from })}`}>All mail from them</a>`
  }</dd>
        <dt>To</dt><dd title=${storedTitle(to)}>${addressesShown(to)}</dd>
        ${email.cc.length > 0 && html`<dt>Cc</dt><dd title=${storedTitle(email.cc.join(", "))}>${addressesShown(email.cc.join(", "))}</dd>`}
        ${email.reply_to.length > 0 && html`<dt>Reply-To</dt><dd title=${storedTitle(email.reply_to.join(", "))}>${addressesShown(email.reply_to.join(", "))}</dd>`}
        <dt>${email.direction === "outbound" ? "Sent" : "Received"}</dt><dd><time datetime=${email.received_at}>${new Date(email.received_at).toLocaleString()}</time></dd>
        <dt>Labels</dt><dd><${Labels} email=${email} onChanged=${setEmail} /></dd>
      </dl>
      <div class="actions">
        <button type="button" onClick=${() => setReplying("reply")}>Reply</button>
        <button type="button" class="secondary" onClick=${() => setReplying("all")}>Reply all</button>
        ${email.direction === "inbound" && html`<button type="button" class="secondary" disabled=${marking.busy} onClick=${markUnread}>Mark unread</button>`}
        <a class="button secondary" href=${base + "/raw"} download>Download raw (.eml)</a>
        <${ConfirmDelete} what="email" warning="The email, its attachments and its search data go for good."
          onConfirm=${async () => (await call("DELETE", base), go("mailboxes", email.mailbox_id))} />
      </div>
      ${marking.error && html`<${ErrorNote} error=${marking.error} />`}
      ${email.direction === "inbound" && html`<${Unsubscribe} key=${email.email_id} email=${email} />`}
      ${replying && html`<${ReplyForm} key=${replying} email=${email} all=${replying === "all"} onClose=${() => setReplying(null)} />`}
      ${email.delivery && email.delivery.length > 0 && html`
        <${Deliveries} title="Delivery" rows=${email.delivery.map((/** @type {any} */ d) => ({ ...d, address: d.recipient }))} />`}
      ${email.forwarded && email.forwarded.length > 0 && html`<${Deliveries} title="Forwarded to" rows=${email.forwarded} />`}
      ${email.attachments.some(isCalendar) && html`<${Invitation} key=${email.email_id} base=${base} />`}
      ${email.attachments.length > 0 && html`
        <h2>Attachments</h2>
        <ul class="attachments">
          ${email.attachments.map((/** @type {any} */ a) => html`<${Attachment} key=${a.attachment_id} base=${base} attachment=${a} />`)}
        </ul>`}
      ${body
        ? html`
          ${body.blockedImages > 0 && html`
            <p class="notice" role="status">Remote images are blocked: loading them tells the sender you read this.
              <button type="button" class="secondary" onClick=${() => setAllowImages(true)}>Show images</button></p>`}
          <${MailFrame} title="Email content" srcdoc=${body.srcdoc} />`
        : html`<pre class="mail-text" dir="auto">${email.text}</pre>`}
    </article>
    ${thread && html`
      <section class="card">
        <div class="toolbar"><h2>Thread (${thread.message_count})</h2>
          <a href=${href("threads", thread.thread_id)}>Read the whole conversation</a></div>
        <ol class="list">
          ${thread.emails.map((/** @type {any} */ e) => html`
            <li class="item"><a href=${href("emails", e.email_id)} title=${e.from} aria-current=${e.email_id === emailId ? "page" : undefined}>
              <span dir="auto">${e.from_name || addressShown(e.from)}</span> · <span dir="auto">${e.subject || "(no subject)"}</span></a> <span class="muted small">${when(e.received_at)}</span></li>`)}
        </ol>
      </section>`}
  `
}
