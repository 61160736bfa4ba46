/** The inbox: one mailbox's mail with paging and sort, or the newest mail across all mailboxes; live. */
import { html } from "htm/preact"
import { useEffect, useState } from "preact/hooks"
import { call, query } from "./api.js"
import { onMail } from "./live.js"
import { href } from "./router.js"
import { ThreadList } from "./threads.js"
import { ErrorNote, when } from "./ui.js"

const PAGE = 20
const SORTS = [
  ["received_at:desc", "Newest first"],
  ["received_at:asc", "Oldest first"],
  ["subject:asc", "Subject A–Z"]
]

/** @param {{ emails: any[] }} props */
const EmailList = ({ emails }) => html`
  <ul class="list mail" aria-label="Emails">
    ${emails.map((email) => {
      const unread = email.labels.includes("unread")
      return html`
        <li key=${email.email_id} class=${unread ? "item unread" : "item"}>
          <a class="mail-link" href=${href("emails", email.email_id)}>
            <span class="from">${unread && html`<span class="dot" aria-label="Unread"></span>`}${email.from}</span>
            <span class="subject">${email.subject || "(no subject)"}${email.has_attachments && html` <span class="tag" aria-label="Has attachments">attachment</span>`}</span>
            <span class="snippet muted">${email.snippet}</span>
            <time class="muted small" datetime=${email.received_at}>${when(email.received_at)}</time>
          </a>
        </li>`
    })}
  </ul>
`

/**
 * @param {() => Promise<void>} load
 * @param {unknown[]} deps
 */
const useLiveLoad = (load, deps) => {
  useEffect(() => {
    load()
    return onMail(() => load())
  }, deps)
}

/** @param {{ mailboxId: string }} props */
export const MailboxInbox = ({ mailboxId }) => {
  const [mailbox, setMailbox] = useState(/** @type {any} */ (null))
  const [emails, setEmails] = useState(/** @type {any[] | null} */ (null))
  const [total, setTotal] = useState(0)
  const [offset, setOffset] = useState(0)
  const [sort, setSort] = useState("received_at:desc")
  const [grouped, setGrouped] = useState(false)
  const [error, setError] = useState(/** @type {unknown} */ (null))

  useEffect(() => {
    call("GET", "/api/mailboxes?limit=100").then(
      (answer) => setMailbox(answer.mailboxes.find((/** @type {any} */ m) => m.mailbox_id === mailboxId) ?? null),
      setError
    )
  }, [mailboxId])

  useLiveLoad(async () => {
    try {
      const answer = await call("GET", `/api/mailboxes/${encodeURIComponent(mailboxId)}/emails` + query({ limit: PAGE, offset, sort }))
      setEmails(answer.data)
      setTotal(answer.meta.total)
    } catch (failure) {
      setError(failure)
    }
  }, [mailboxId, offset, sort])

  return html`
    <h1>${mailbox ? mailbox.email_address : "Inbox"}</h1>
    <div class="actions">
      <a class="button" href=${href("mailboxes", mailboxId, "compose")}>New email</a>
      <a class="button secondary" href=${href("mailboxes", mailboxId, "drafts")}>Drafts</a>
    </div>
    <div class="toolbar">
      <label for="sort">Sort</label>
      <select id="sort" value=${sort} onChange=${(/** @type {any} */ e) => (setSort(e.currentTarget.value), setOffset(0))}>
        ${SORTS.map(([value, label]) => html`<option value=${value}>${label}</option>`)}
      </select>
      <label class="check"><input type="checkbox" checked=${grouped} onChange=${(/** @type {any} */ e) => setGrouped(e.currentTarget.checked)} />
        Group by conversation</label>
      <span class="muted small" aria-live="polite">${total} ${total === 1 ? "email" : "emails"}</span>
    </div>
    <${ErrorNote} error=${error} />
    ${emails === null ? html`<p class="muted">Loading…</p>` : emails.length === 0
      ? html`<p class="muted">No mail yet. It appears here as soon as it arrives.</p>`
      : grouped ? html`<${ThreadList} emails=${emails} />` : html`<${EmailList} emails=${emails} />`}
    ${total > PAGE && html`
      <nav class="pager" aria-label="Pages">
        <button type="button" class="secondary" disabled=${offset === 0} onClick=${() => setOffset(Math.max(0, offset - PAGE))}>Newer</button>
        <span class="muted small">${offset + 1}–${Math.min(offset + PAGE, total)} of ${total}</span>
        <button type="button" class="secondary" disabled=${offset + PAGE >= total} onClick=${() => setOffset(offset + PAGE)}>Older</button>
      </nav>`}
  `
}

/** The newest mail of every mailbox, merged: each mailbox's newest page, newest first. */
export const AllInbox = () => {
  const [emails, setEmails] = useState(/** @type {any[] | null} */ (null))
  const [error, setError] = useState(/** @type {unknown} */ (null))
  useLiveLoad(async () => {
    try {
      const { mailboxes } = await call("GET", "/api/mailboxes?limit=100")
      const pages = await Promise.all(mailboxes.map((/** @type {any} */ m) =>
        call("GET", `/api/mailboxes/${encodeURIComponent(m.mailbox_id)}/emails?limit=${PAGE}`)))
      const merged = pages.flatMap((page) => page.data).sort((a, b) => b.received_at.localeCompare(a.received_at))
      setEmails(merged.slice(0, PAGE))
    } catch (failure) {
      setError(failure)
    }
  }, [])
  return html`
    <h1>Inbox</h1>
    <p class="muted">The newest mail across all your mailboxes.</p>
    <${ErrorNote} error=${error} />
    ${emails === null ? html`<p class="muted">Loading…</p>` : emails.length === 0
      ? html`<p class="muted">No mail yet. <a href=${href()}>Create a mailbox</a> and send mail to it.</p>`
      : html`<${EmailList} emails=${emails} />`}
  `
}
