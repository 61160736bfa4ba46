/**
 * Drafts awaiting approval: what agents wrote (POST …/drafts) for a person to review, edit, approve
 * (send) or reject (delete). One mailbox's drafts, or those of every mailbox. A draft that is sent
 * stays listed with a link to the email it became; a scheduled one shows when it will leave.
 */
import { html } from "htm/preact"
import { useState } from "preact/hooks"
import { call, fieldError } from "./api.js"
import { formatRecipients, parseRecipients, recipientError } from "./compose.js"
import { href } from "./router.js"
import { ErrorNote, Field, TextArea, useReloading, when } from "./ui.js"

const LIMIT = 100

/** @param {any} draft */
const kindOf = (draft) => draft.in_reply_to ? (draft.reply_all ? "Reply to all" : "Reply") : draft.forward_of ? "Forward" : "New message"

/** @param {{ draft: any, address?: string, run: (action: () => Promise<unknown>) => Promise<void> }} props */
const DraftItem = ({ draft, address, run }) => {
  const [editing, setEditing] = useState(false)
  const [to, setTo] = useState(formatRecipients(draft.to))
  const [cc, setCc] = useState(formatRecipients(draft.cc))
  const [subject, setSubject] = useState(draft.subject ?? "")
  const [text, setText] = useState(draft.text ?? "")
  const [error, setError] = useState(/** @type {unknown} */ (null))
  const path = `/api/mailboxes/${encodeURIComponent(draft.mailbox_id)}/drafts/${encodeURIComponent(draft.draft_id)}`
  const title = draft.subject || (draft.in_reply_to ? "(reply)" : "(no subject)")

  /** This draft's own refusals are shown with it, not at the top of the page. @param {() => Promise<unknown>} action */
  const act = (action) =>
    run(async () => {
      setError(null)
      try {
        await action()
      } catch (failure) {
        setError(failure)
      }
    })
  // Editing starts from the draft as it is now (an agent may have changed it since the page loaded).
  const edit = () => {
    setTo(formatRecipients(draft.to))
    setCc(formatRecipients(draft.cc))
    setSubject(draft.subject ?? "")
    setText(draft.text ?? "")
    setError(null)
    setEditing(true)
  }
  const save = () =>
    act(async () => {
      await call("PATCH", path, { to: to ? parseRecipients(to) : undefined, cc: parseRecipients(cc), subject: subject || undefined, text })
      setEditing(false)
    })

  return html`
    <li class="item wrap" aria-label=${"Draft: " + title}>
      <div class="grow">
        <div><strong>${title}</strong> <span class="tag">${kindOf(draft)}</span> <span class=${"tag " + (draft.status === "sent" ? "succeeded" : "")}>${
    draft.status === "draft" ? "awaiting approval" : draft.status
  }</span></div>
        <div class="muted small">${address ? `From ${address} · ` : ""}To ${formatRecipients(draft.to) || (draft.in_reply_to ? "the original's sender" : "nobody yet")}${
    draft.cc?.length ? ` · Cc ${formatRecipients(draft.cc)}` : ""
  } · written ${when(draft.created_at)}</div>
        ${draft.send_at && draft.status === "draft" && html`<div class="small">Scheduled for ${new Date(draft.send_at).toLocaleString()}</div>`}
        ${draft.last_error && html`<p class="note error">Its scheduled send was refused: ${draft.last_error}</p>`}
        ${!editing && draft.text && html`<pre class="mail-text draft-text">${draft.text}</pre>`}
        ${draft.attachments.length > 0 && html`<div class="small">Attachments: ${draft.attachments.map((/** @type {any} */ a) => a.filename).join(", ")}</div>`}
        ${draft.status === "sent" && draft.email_id && html`<a href=${href("emails", draft.email_id)}>Open the sent email</a>`}
      </div>
      ${draft.status === "draft" && !editing && html`
        <div class="actions">
          <button type="button" onClick=${() => act(() => call("POST", path + "/send"))}>Approve and send</button>
          <button type="button" class="secondary" onClick=${edit}>Edit</button>
          <button type="button" class="danger" onClick=${() => confirm(`Reject the draft “${title}”? It is deleted.`) && act(() => call("DELETE", path))}>Reject</button>
        </div>`}
      ${editing && html`
        <form class="full" aria-label=${"Edit draft " + title} onSubmit=${(/** @type {Event} */ e) => (e.preventDefault(), save())}>
          <${Field} id=${"draft-to-" + draft.draft_id} label="To" value=${to} onInput=${setTo}
            hint=${draft.in_reply_to ? "Leave empty to answer the original's sender" : undefined} error=${recipientError(error, "to")} />
          <${Field} id=${"draft-cc-" + draft.draft_id} label="Cc" value=${cc} onInput=${setCc} error=${recipientError(error, "cc")} />
          <${Field} id=${"draft-subject-" + draft.draft_id} label="Subject" value=${subject} onInput=${setSubject} error=${fieldError(error, "subject")} />
          <${TextArea} id=${"draft-text-" + draft.draft_id} label="Message" value=${text} onInput=${setText} error=${fieldError(error, "text")} />
          <div class="actions">
            <button type="submit">Save draft</button>
            <button type="button" class="secondary" onClick=${() => setEditing(false)}>Cancel</button>
          </div>
        </form>`}
      <div class="full"><${ErrorNote} error=${error} /></div>
    </li>
  `
}

/** @param {{ drafts: any[], addresses: Record<string, string>, run: (action: () => Promise<unknown>) => Promise<void> }} props */
const DraftLists = ({ drafts, addresses, run }) => {
  const waiting = drafts.filter((d) => d.status !== "sent")
  const sent = drafts.filter((d) => d.status === "sent")
  return html`
    <h2>Awaiting approval (${waiting.length})</h2>
    ${waiting.length === 0 ? html`<p class="muted">Nothing to approve. Drafts your agents write appear here.</p>` : html`
      <ul class="list" aria-label="Drafts awaiting approval">
        ${waiting.map((d) => html`<${DraftItem} key=${d.draft_id} draft=${d} address=${addresses[d.mailbox_id]} run=${run} />`)}
      </ul>`}
    ${sent.length > 0 && html`
      <h2>Sent</h2>
      <ul class="list" aria-label="Sent drafts">
        ${sent.map((d) => html`<${DraftItem} key=${d.draft_id} draft=${d} address=${addresses[d.mailbox_id]} run=${run} />`)}
      </ul>`}
  `
}

/** @param {{ mailboxId: string }} props */
export const MailboxDrafts = ({ mailboxId }) => {
  const [drafts, setDrafts] = useState(/** @type {any[] | null} */ (null))
  const [address, setAddress] = useState("")
  const { error, run } = useReloading(async () => {
    const [mailboxes, answer] = await Promise.all([
      call("GET", "/api/mailboxes?limit=100"),
      call("GET", `/api/mailboxes/${encodeURIComponent(mailboxId)}/drafts?limit=${LIMIT}`)
    ])
    setAddress(mailboxes.mailboxes.find((/** @type {any} */ m) => m.mailbox_id === mailboxId)?.email_address ?? "")
    setDrafts(answer.data)
  })
  return html`
    <p><a href=${href("mailboxes", mailboxId)}>← Back to the inbox</a></p>
    <h1>Drafts${address ? ` of ${address}` : ""}</h1>
    <div class="actions"><a class="button secondary" href=${href("mailboxes", mailboxId, "compose")}>New email</a></div>
    <${ErrorNote} error=${error} />
    ${drafts === null ? html`<p class="muted">Loading…</p>` : html`<${DraftLists} drafts=${drafts} addresses=${{}} run=${run} />`}
  `
}

/** Every mailbox's drafts, newest first. */
export const AllDrafts = () => {
  const [drafts, setDrafts] = useState(/** @type {any[] | null} */ (null))
  const [addresses, setAddresses] = useState(/** @type {Record<string, string>} */ ({}))
  const { error, run } = useReloading(async () => {
    const { mailboxes } = await call("GET", "/api/mailboxes?limit=100")
    const pages = await Promise.all(mailboxes.map((/** @type {any} */ m) =>
      call("GET", `/api/mailboxes/${encodeURIComponent(m.mailbox_id)}/drafts?limit=${LIMIT}`)))
    setAddresses(Object.fromEntries(mailboxes.map((/** @type {any} */ m) => [m.mailbox_id, m.email_address])))
    setDrafts(pages.flatMap((page) => page.data).sort((a, b) => b.created_at.localeCompare(a.created_at)))
  })
  return html`
    <h1>Drafts</h1>
    <p class="muted">What your agents drafted for a person to approve: review, edit, then send or reject.</p>
    <${ErrorNote} error=${error} />
    ${drafts === null ? html`<p class="muted">Loading…</p>` : html`<${DraftLists} drafts=${drafts} addresses=${addresses} run=${run} />`}
  `
}
