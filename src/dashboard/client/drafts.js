/**
 * Drafts awaiting approval: what agents wrote (POST …/drafts) for a person to review, edit, approve
 * (send) or reject (delete). One mailbox's drafts, or those of every mailbox. A draft that is sent
 * stays listed with a link to the email it became; a scheduled one says it leaves at its time unless
 * rejected or unscheduled.
 *
 * What is approved is what is sent: approving and saving name the version of the draft the person
 * was shown (`if_updated_at`), and the server refuses (409) a draft changed since, by its agent say.
 * The page then reads the draft again and says so; it also follows agents' edits as they come (live.js
 * `onDrafts`), and says when a draft changed while it was shown.
 */
import { html } from "htm/preact"
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks"
import { allMailboxes, ApiError, call, fieldError, findMailbox, isNotFound, query } from "./api.js"
import { formatRecipients, MESSAGE_LABELS, parseRecipients, recipientError } from "./compose.js"
import { onDelivery, onDrafts } from "./live.js"
import { HtmlPreview } from "./mail-frame.js"
import { addressShown } from "./idn.js"
import { href } from "./router.js"
import { ErrorNote, Field, LoadFailed, MailboxNotFound, Pager, TextArea, useAction, useReloading, when } from "./ui.js"

/** Drafts are read a page of 100 at a time (the API's largest), newest first. */
const LIMIT = 100

/**
 * What an edited field sends: what the person left in it, emptied fields included (`to: []`,
 * `subject: ""` clear them), but a field the draft never had stays unsaid, so that a reply still
 * answers the original's sender with the original's subject when its To and Subject are left empty.
 * @template T
 * @param {string} typed @param {unknown} held what the draft holds now
 * @param {(typed: string) => T} read
 * @returns {T | undefined}
 */
const edited = (typed, held, read) => (typed.trim() === "" && (held === undefined || held === null) ? undefined : read(typed))
const asIs = (/** @type {string} */ typed) => typed

/**
 * An address header's first value as the email came (`email.headers`, keyed by lower-case name), its
 * names quoted as the send quotes them; undefined when the email has none.
 * @param {any} email @param {string} name
 */
const headerOf = (email, name) => {
  const value = email.headers?.[name]
  const first = Array.isArray(value) ? value[0] : value
  return typeof first === "string" && first.trim() !== "" ? formatRecipients(parseRecipients(first)) : undefined
}

/**
 * What a forward carries below the agent's note, as the send builds it (services/outbound/replies.ts,
 * `forward`): the "Forwarded message" block with the original's From, Date, Subject, To and Cc, then
 * its text; its HTML version (when it has one) in the HTML part; its attachments along.
 * @param {any} email the original, as GET /api/emails/{id} answers it
 */
export const forwardedText = (email) => [
  "---------- Forwarded message ---------",
  `From: ${headerOf(email, "from") ?? email.from}`,
  `Date: ${new Date(email.date).toUTCString()}`,
  `Subject: ${email.subject}`,
  `To: ${headerOf(email, "to") ?? email.to.join(", ")}`,
  ...(headerOf(email, "cc") ? [`Cc: ${headerOf(email, "cc")}`] : []),
  "",
  email.text
].join("\n")

/**
 * The email a forward draft forwards, as the approved message will carry it: so that what the person
 * approves is what is sent, the original's words, HTML and attachments included.
 * @param {{ emailId: string }} props
 */
const Forwarded = ({ emailId }) => {
  const [email, setEmail] = useState(/** @type {any} */ (null))
  const [failure, setFailure] = useState(/** @type {unknown} */ (null))
  useEffect(() => {
    setFailure(null)
    call("GET", `/api/emails/${encodeURIComponent(emailId)}`).then((answer) => setEmail(answer.data), setFailure)
  }, [emailId])
  if (failure) return html`<p class="note error">The forwarded email could not be read: ${failure instanceof Error ? failure.message : String(failure)}</p>`
  if (!email) return html`<p class="muted small">Reading the forwarded email…</p>`
  const names = email.attachments.map((/** @type {any} */ a, /** @type {number} */ i) => a.filename ?? `attachment-${i + 1}`)
  return html`
    <section class="forwarded" aria-label="Forwarded email">
      <div class="small" dir="auto">${`Forwards “${email.subject || "(no subject)"}” from ${email.from_name ? `${email.from_name} <${email.from}>` : email.from}${
    names.length > 0 ? `, with ${names.length === 1 ? "1 attachment" : `${names.length} attachments`} (${names.join(", ")})` : ", no attachments"
  }. Below the note, the message carries:`}</div>
      <pre class="mail-text draft-text" dir="auto" aria-label="Forwarded text">${forwardedText(email)}</pre>
      ${email.html && html`
        <details><summary class="small">The forwarded email's HTML version (sent along; mail programs show it)</summary>
          <${HtmlPreview} title="HTML version of the forwarded email" html=${email.html} /></details>`}
    </section>`
}

/**
 * Whether the server refused an action because the draft changed after the version it named: a 409
 * whose details name the version asked for (`if_updated_at`), as a draft being sent's 409 does not.
 * @param {unknown} error
 */
const isChangedMeanwhile = (error) => error instanceof ApiError && error.status === 409 && typeof error.details?.if_updated_at === "string"

/** @param {any} draft */
const kindOf = (draft) => draft.in_reply_to ? (draft.reply_all ? "Reply to all" : "Reply") : draft.forward_of ? "Forward" : "New message"

/**
 * What became of a draft while the page showed it, told when the person acts on it: rejected too late,
 * it had been sent meanwhile (scheduled, or approved elsewhere), so the rejection removed only the
 * draft and the email it became went out all the same; or it was deleted meanwhile (withdrawn by its
 * agent, or rejected elsewhere: no `emailId`), so approving, saving or rejecting it did nothing.
 * @typedef {{ title: string, emailId: string, sentAt: string | null } | { title: string, emailId?: undefined }} Meanwhile
 */

/**
 * @param {{ draft: any, address?: string, run: (action: () => Promise<unknown>) => Promise<void>,
 *   onMeanwhile: (sent: Meanwhile) => void }} props
 */
const DraftItem = ({ draft, address, run, onMeanwhile }) => {
  const [editing, setEditing] = useState(false)
  // The version the edit form started from (read again after a save refused as stale): what Save compares with, and names.
  const [base, setBase] = useState(draft)
  // The version the person has taken in: a draft shown in a newer one (an agent's edit) says so until they act on it.
  const [acknowledged, setAcknowledged] = useState(draft.updated_at)
  // What the server refused because the draft had changed: the approval, or the save.
  const [stale, setStale] = useState(/** @type {"send" | "save" | null} */ (null))
  const [keepSchedule, setKeepSchedule] = useState(true)
  const [to, setTo] = useState(formatRecipients(draft.to))
  const [cc, setCc] = useState(formatRecipients(draft.cc))
  const [bcc, setBcc] = useState(formatRecipients(draft.bcc))
  const [subject, setSubject] = useState(draft.subject ?? "")
  const [text, setText] = useState(draft.text ?? "")
  const path = `/api/mailboxes/${encodeURIComponent(draft.mailbox_id)}/drafts/${encodeURIComponent(draft.draft_id)}`
  const title = draft.subject || (draft.in_reply_to ? "(reply)" : "(no subject)")

  // While an action runs its buttons are off: a double click approves (or rejects) once.
  const own = useAction({ once: true })
  const { busy, error } = own
  /**
   * This draft's own refusals are shown with it, not at the top of the page; the page's list is read
   * again after each action, refused or not.
   * @param {() => Promise<unknown>} action
   */
  const act = (action) =>
    own.run(async () => {
      setStale(null)
      try {
        await action()
      } catch (error) {
        // Changed since it was shown: nothing was done; the list read below shows it as it is now.
        if (isChangedMeanwhile(error)) return
        // Gone meanwhile: its card goes with the list read below, so the page says what happened.
        if (!isNotFound(error)) throw error
        onMeanwhile({ title })
      } finally {
        await run(async () => {})
      }
    })
  // DELETE answers the email a draft already became: the rejection came too late, and the person is told so.
  const reject = () =>
    confirm(`Reject the draft “${title}”? It is deleted.`) &&
    act(async () => {
      const emailId = (await call("DELETE", path)).data.email_id
      if (!emailId) return
      const sentAt = await call("GET", `/api/emails/${encodeURIComponent(emailId)}`).then((answer) => answer.data.received_at, () => null)
      onMeanwhile({ title, emailId, sentAt })
    })
  // Editing starts from the draft as it is now (an agent may have changed it since the page loaded).
  // Editing takes the keyboard to the form's first field; leaving it, back to Edit. A layout effect:
  // focus moves before the form is painted, never later, when the person may already be typing in
  // another of its fields (a plain effect runs after the paint, up to a frame later, and took the
  // focus, and the rest of what was being typed into Message, to To).
  const editButton = useRef(/** @type {HTMLButtonElement | null} */ (null))
  const wasEditing = useRef(false)
  useLayoutEffect(() => {
    if (editing) document.getElementById("draft-to-" + draft.draft_id)?.focus()
    else if (wasEditing.current) editButton.current?.focus()
    wasEditing.current = editing
  }, [editing])
  const edit = () => {
    setBase(draft)
    setAcknowledged(draft.updated_at)
    setStale(null)
    setKeepSchedule(true)
    setTo(formatRecipients(draft.to))
    setCc(formatRecipients(draft.cc))
    setBcc(formatRecipients(draft.bcc))
    setSubject(draft.subject ?? "")
    setText(draft.text ?? "")
    own.clear()
    setEditing(true)
  }
  // Saved over the version the form started from, or refused: then the draft as it is now is read,
  // shown with the form (the person's words kept in it), and becomes what a second Save replaces.
  const save = () =>
    act(async () => {
      const textChanged = text !== (base.text ?? "")
      try {
        const saved = await call("PATCH", path, {
          to: edited(to, base.to, parseRecipients),
          cc: edited(cc, base.cc, parseRecipients),
          bcc: edited(bcc, base.bcc, parseRecipients),
          subject: edited(subject, base.subject, asIs),
          text: edited(text, base.text, asIs),
          // Mail programs show the HTML version rather than the text: the person's wording replaces the agent's HTML.
          html: textChanged && base.html ? null : undefined,
          send_at: base.send_at && !keepSchedule ? null : undefined,
          if_updated_at: base.updated_at
        })
        setAcknowledged(saved.data.updated_at)
        setEditing(false)
      } catch (error) {
        if (!isChangedMeanwhile(error)) throw error
        const now = (await call("GET", path)).data
        setBase(now)
        setAcknowledged(now.updated_at)
        setStale("save")
        setKeepSchedule(true)
        throw error
      }
    })
  const approve = () =>
    act(async () => {
      setAcknowledged(draft.updated_at)
      try {
        await call("POST", path + "/send", { if_updated_at: draft.updated_at })
      } catch (error) {
        if (isChangedMeanwhile(error)) setStale("send")
        throw error
      }
    })
  const scheduled = draft.status === "draft" && draft.send_at ? new Date(draft.send_at).toLocaleString() : null
  // Changed while shown (an agent's edit the page followed, or one the server told of): said until the person acts on it.
  const changedWhileShown = draft.status === "draft" && !editing && stale === null && draft.updated_at !== acknowledged

  return html`
    <li class="item wrap" aria-label=${"Draft: " + title}>
      <div class="grow">
        <div><strong dir="auto">${title}</strong> <span class="tag">${kindOf(draft)}</span> <span class=${"tag " + (draft.status === "sent" ? "succeeded" : "")}>${
    draft.status === "draft" ? (scheduled ? "scheduled" : "awaiting approval") : draft.status
  }</span></div>
        <div class="muted small" dir="auto">${address ? `From ${addressShown(address)} · ` : ""}To ${draft.in_reply_to && (draft.to === undefined || draft.to === null) ? "the original's sender" : formatRecipients(draft.to) || "nobody yet"}${
    draft.cc?.length ? ` · Cc ${formatRecipients(draft.cc)}` : ""
  }${draft.bcc?.length ? ` · Bcc ${formatRecipients(draft.bcc)}` : ""}${
    draft.reply_to ? ` · Replies to ${formatRecipients([draft.reply_to])}` : ""
  } · written ${when(draft.created_at)}</div>
        ${scheduled && html`<div class="small">${`Scheduled: it will be sent by itself at ${scheduled}, without approval, unless you reject it or remove the schedule (Edit).`}</div>`}
        <div role="status">
          ${stale === "send" && html`<p class="notice">This draft was changed (by its agent, or elsewhere) after it was shown to you: nothing was sent. It now reads as below: review it, then approve it again.</p>`}
          ${changedWhileShown && html`<p class="notice">This draft was changed (by its agent, or elsewhere) while it was shown: it now reads as below. Review it before approving.</p>`}
          ${stale === "save" && html`<p class="notice">${`Not saved: this draft was changed (by its agent, or elsewhere) while you edited it. It now goes to ${formatRecipients(base.to) || "nobody yet"}${
    base.cc?.length ? `, Cc ${formatRecipients(base.cc)}` : ""
  }${base.bcc?.length ? `, Bcc ${formatRecipients(base.bcc)}` : ""}, with the subject “${base.subject ?? ""}”, and reads as below; your edits are still in the form: Save draft puts them in its place, Cancel keeps it as it is.`}</p>
            ${base.text && html`<pre class="mail-text draft-text" dir="auto" aria-label="The draft as it is now">${base.text}</pre>`}`}
          ${editing && stale === null && draft.updated_at !== base.updated_at && html`<p class="notice">This draft was changed (by its agent, or elsewhere) since you began editing it: saving will show you how.</p>`}
        </div>
        ${draft.last_error && html`<p class="note error">Its scheduled send was refused: ${draft.last_error}</p>`}
        ${!editing && draft.html && html`
          <${HtmlPreview} title=${"HTML version of " + title} html=${draft.html} />`}
        ${!editing && draft.text && (draft.html
          ? html`<details><summary class="small">Plain-text version</summary><pre class="mail-text draft-text" dir="auto">${draft.text}</pre></details>`
          : html`<pre class="mail-text draft-text" dir="auto">${draft.text}</pre>`)}
        ${!editing && draft.forward_of && html`<${Forwarded} emailId=${draft.forward_of} />`}
        ${draft.attachments.length > 0 && html`<div class="small">Attachments: ${draft.attachments.map((/** @type {any} */ a) => a.filename).join(", ")}</div>`}
        ${draft.list_unsubscribe && html`<div class="small">With an unsubscribe link: the recipient can stop the account's mail in one click.</div>`}
        ${draft.status === "sent" && draft.email_id && html`<a href=${href("emails", draft.email_id)}>Open the sent email</a>`}
      </div>
      ${draft.status === "draft" && !editing && html`
        <div class="actions">
          <button type="button" disabled=${busy} onClick=${approve}>${scheduled ? "Send now" : "Approve and send"}</button>
          <button type="button" class="secondary" disabled=${busy} ref=${editButton} onClick=${edit}>Edit</button>
          <button type="button" class="danger" disabled=${busy} onClick=${reject}>Reject</button>
        </div>`}
      ${editing && html`
        <form class="full" aria-label=${"Edit draft " + title} onSubmit=${(/** @type {Event} */ e) => (e.preventDefault(), save())}>
          <${Field} id=${"draft-to-" + draft.draft_id} label="To" value=${to} onInput=${setTo}
            hint=${draft.in_reply_to && (draft.to === undefined || draft.to === null) ? "Leave empty to answer the original's sender" : undefined} error=${recipientError(error, "to", to)} />
          <${Field} id=${"draft-cc-" + draft.draft_id} label="Cc" value=${cc} onInput=${setCc} error=${recipientError(error, "cc", cc)} />
          <${Field} id=${"draft-bcc-" + draft.draft_id} label="Bcc" value=${bcc} onInput=${setBcc} error=${recipientError(error, "bcc", bcc)} />
          <${Field} id=${"draft-subject-" + draft.draft_id} label="Subject" value=${subject} onInput=${setSubject} error=${fieldError(error, "subject")} />
          <${TextArea} id=${"draft-text-" + draft.draft_id} label="Message" value=${text} onInput=${setText} error=${fieldError(error, "text")}
            hint=${base.html ? "The agent also wrote an HTML version, which mail programs show instead of this text: changing the message removes it, so what you approve is what is sent." : undefined} />
          ${base.send_at && html`
            <label class="check"><input type="checkbox" checked=${keepSchedule} onChange=${(/** @type {any} */ e) => setKeepSchedule(e.currentTarget.checked)} />
              ${` Send it by itself at ${new Date(base.send_at).toLocaleString()} (untick to remove the schedule: it then waits for approval)`}</label>`}
          <div class="actions">
            <button type="submit">Save draft</button>
            <button type="button" class="secondary" onClick=${() => (setStale(null), setEditing(false))}>Cancel</button>
          </div>
        </form>`}
      <div class="full"><${ErrorNote} error=${error} labels=${MESSAGE_LABELS} /></div>
    </li>
  `
}

/**
 * What a drafts page shows: a page of the drafts awaiting approval (`total` of them in all), and the
 * most recently sent ones (`sentTotal` in all).
 * @typedef {{ waiting: any[], total: number, sent: any[], sentTotal: number }} DraftPage
 */

/** The most recently sent drafts a page lists below those awaiting approval (the emails they became are in the mailbox). */
const SENT_SHOWN = 20

/** What the person is told of a draft that was sent or deleted before they acted on it. @param {{ sent: Meanwhile | null }} props */
const MeanwhileNote = ({ sent }) => html`
  <div role="status">${sent && (sent.emailId === undefined
  ? html`<p class="notice">${`The draft “${sent.title}” had been deleted, by its agent or elsewhere, before you acted on it: nothing was sent.`}</p>`
  : html`
    <p class="notice">${`The draft “${sent.title}” had already been sent${sent.sentAt ? ` at ${new Date(sent.sentAt).toLocaleString()}` : ""} when you rejected it: the email went out, and only the draft was deleted.`} <a href=${href("emails", sent.emailId)}>Open the sent email</a></p>`)}
  </div>`

/**
 * @param {{ drafts: DraftPage, addresses: Record<string, string>, run: (action: () => Promise<unknown>) => Promise<void>, pager: unknown,
 *   meanwhile: Meanwhile | null, onMeanwhile: (sent: Meanwhile) => void }} props
 */
const DraftLists = ({ drafts, addresses, run, pager, meanwhile, onMeanwhile }) => html`
  <${MeanwhileNote} sent=${meanwhile} />
  <h2>Awaiting approval (${drafts.total})</h2>
  ${drafts.waiting.length === 0 ? html`<p class="muted">Nothing to approve. Drafts your agents write appear here.</p>` : html`
    <ul class="list" aria-label="Drafts awaiting approval">
      ${drafts.waiting.map((d) => html`<${DraftItem} key=${d.draft_id} draft=${d} address=${addresses[d.mailbox_id]} run=${run} onMeanwhile=${onMeanwhile} />`)}
    </ul>`}
  ${pager}
  ${drafts.sent.length > 0 && html`
    <h2>Sent${drafts.sentTotal > drafts.sent.length ? ` (the ${drafts.sent.length} most recent of ${drafts.sentTotal})` : ""}</h2>
    <ul class="list" aria-label="Sent drafts">
      ${drafts.sent.map((d) => html`<${DraftItem} key=${d.draft_id} draft=${d} address=${addresses[d.mailbox_id]} run=${run} onMeanwhile=${onMeanwhile} />`)}
    </ul>`}
`

/**
 * Drafts read from `path` (one mailbox's, or every mailbox's): a page of those awaiting approval with
 * Newer and Older, and the most recently sent, asked apart so that a page of waiting drafts is never
 * crowded out by sent ones; what a person does to them. `before` runs with each read (the mailbox
 * addresses shown).
 * @param {string} path
 * @param {(drafts: any[]) => Promise<void>} [before]
 */
const useDraftPage = (path, before = async () => {}) => {
  const [drafts, setDrafts] = useState(/** @type {DraftPage | null} */ (null))
  const [offset, setOffset] = useState(0)
  const reading = useReloading(async (isCurrent) => {
    const [waiting, sent] = await Promise.all([
      call("GET", path + query({ status: "draft", limit: LIMIT, offset })),
      call("GET", path + query({ status: "sent", limit: SENT_SHOWN }))
    ])
    await before([...waiting.data, ...sent.data])
    if (!isCurrent()) return
    // The last drafts of the last page gone (approved elsewhere, rejected): the last page there is.
    if (waiting.data.length === 0 && offset > 0) return setOffset(Math.max(0, Math.floor((waiting.meta.total - 1) / LIMIT) * LIMIT))
    setDrafts({ waiting: waiting.data, total: waiting.meta.total, sent: sent.data, sentTotal: sent.meta.total })
  }, [offset])
  // A draft sent while the page is open (scheduled, or approved elsewhere) moves to Sent: the
  // delivery of an email the page does not list yet as a sent draft's reads the drafts again.
  const listed = useRef(/** @type {Set<string>} */ (new Set()))
  listed.current = new Set((drafts?.sent ?? []).map((d) => d.email_id))
  useEffect(() => onDelivery((event) => {
    if (!listed.current.has(event.data?.email_id)) reading.retry()
  }), [path, offset])
  // A draft an agent edits, writes, sends or deletes while the page is open: read again (live.js watches them).
  useEffect(() => onDrafts(() => reading.retry()), [path, offset])
  const [meanwhile, onMeanwhile] = useState(/** @type {Meanwhile | null} */ (null))
  const pager = html`<${Pager} offset=${offset} pageSize=${LIMIT} total=${drafts?.total ?? 0} noun="drafts awaiting approval" onOffset=${setOffset} />`
  return { drafts, pager, meanwhile, onMeanwhile, ...reading }
}

/** @param {{ mailboxId: string }} props */
export const MailboxDrafts = ({ mailboxId }) => {
  // undefined until the mailbox is read; null: the account has no such mailbox.
  const [mailbox, setMailbox] = useState(/** @type {any} */ (undefined))
  const known = useRef(/** @type {any} */ (undefined))
  const { drafts, pager, meanwhile, onMeanwhile, error, failure, retry, run } = useDraftPage(`/api/mailboxes/${encodeURIComponent(mailboxId)}/drafts`, async () => {
    if (known.current === undefined) setMailbox(known.current = await findMailbox(mailboxId))
  })
  if (mailbox === null || isNotFound(failure)) return html`<${MailboxNotFound} mailboxId=${mailboxId} />`
  return html`
    <p><a href=${href("mailboxes", mailboxId)}>← Back to the inbox</a></p>
    <h1>Drafts${mailbox ? ` of ${addressShown(mailbox.email_address)}` : ""}</h1>
    <div class="actions"><a class="button secondary" href=${href("mailboxes", mailboxId, "compose")}>New email</a></div>
    <${ErrorNote} error=${error} />
    ${failure ? html`<${LoadFailed} error=${failure} onRetry=${retry} />` : drafts === null ? html`<p class="muted">Loading…</p>` : html`
      <${DraftLists} drafts=${drafts} addresses=${{}} run=${run} pager=${pager} meanwhile=${meanwhile} onMeanwhile=${onMeanwhile} />`}
  `
}

/** Every mailbox's drafts, newest first: GET /api/drafts (awaiting and sent apart), and the mailboxes' addresses once. */
export const AllDrafts = () => {
  const [addresses, setAddresses] = useState(/** @type {Record<string, string>} */ ({}))
  const known = useRef(/** @type {Record<string, string> | null} */ (null))
  const { drafts, pager, meanwhile, onMeanwhile, error, failure, retry, run } = useDraftPage("/api/drafts", async (page) => {
    // The addresses are read again only for a mailbox made since they were.
    if (known.current && page.every((d) => d.mailbox_id in /** @type {Record<string, string>} */ (known.current))) return
    const mailboxes = await allMailboxes()
    setAddresses(known.current = Object.fromEntries(mailboxes.map((m) => [m.mailbox_id, m.email_address])))
  })
  return html`
    <h1>Drafts</h1>
    <p class="muted">What your agents drafted for a person to approve: review, edit, then send or reject.</p>
    <${ErrorNote} error=${error} />
    ${failure ? html`<${LoadFailed} error=${failure} onRetry=${retry} />` : drafts === null ? html`<p class="muted">Loading…</p>` : html`
      <${DraftLists} drafts=${drafts} addresses=${addresses} run=${run} pager=${pager} meanwhile=${meanwhile} onMeanwhile=${onMeanwhile} />`}
  `
}
