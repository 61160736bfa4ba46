/** The inbox: one mailbox's mail with paging and sort, or the newest mail across all mailboxes; live. */
import { html } from "htm/preact"
import { useEffect, useState } from "preact/hooks"
import { call, findMailbox, isNotFound, query } from "./api.js"
import { onMail } from "./live.js"
import { href } from "./router.js"
import { ThreadList } from "./threads.js"
import { LoadFailed, MailboxNotFound, Pager, when } from "./ui.js"

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
 * A page of the emails `path` lists (with `params`), read again whenever they or the page change,
 * whenever new mail is announced and on `retry`. Reads may overlap (mail arriving in bursts, a page
 * turned meanwhile): only the latest read of a page still shown sets it. A page left empty by mail
 * deleted meanwhile moves to the last page there is.
 * @param {string} path
 * @param {Record<string, string>} [params]
 */
const useEmailPage = (path, params = {}) => {
  const [emails, setEmails] = useState(/** @type {any[] | null} */ (null))
  const [total, setTotal] = useState(0)
  const [offset, setOffset] = useState(0)
  const [failure, setFailure] = useState(/** @type {unknown} */ (null))
  const [attempt, setAttempt] = useState(0)
  const asked = path + query({ limit: PAGE, offset, ...params })
  useEffect(() => {
    let latest = 0
    let shown = true
    const read = async () => {
      const mine = ++latest
      const isCurrent = () => shown && mine === latest
      try {
        const answer = await call("GET", asked)
        if (!isCurrent()) return
        if (answer.data.length === 0 && offset > 0) return setOffset(Math.max(0, Math.floor((answer.meta.total - 1) / PAGE) * PAGE))
        setEmails(answer.data)
        setTotal(answer.meta.total)
        setFailure(null)
      } catch (failed) {
        if (isCurrent()) setFailure(failed)
      }
    }
    read()
    const stop = onMail(() => read())
    return () => {
      shown = false
      stop()
    }
  }, [asked, attempt])
  const retry = () => {
    setFailure(null)
    setAttempt((n) => n + 1)
  }
  return { emails, total, offset, setOffset, failure, retry }
}

/** @param {{ mailboxId: string }} props */
export const MailboxInbox = ({ mailboxId }) => {
  // undefined until the mailbox is read; null: the account has no such mailbox.
  const [mailbox, setMailbox] = useState(/** @type {any} */ (undefined))
  const [sort, setSort] = useState("received_at:desc")
  const [grouped, setGrouped] = useState(false)
  const { emails, total, offset, setOffset, failure: listFailure, retry: readAgain } =
    useEmailPage(`/api/mailboxes/${encodeURIComponent(mailboxId)}/emails`, { sort })
  // The mailbox's lookup and the mail's read fail apart, and each is asked again on its own: a
  // failed lookup (the heading, New email, Drafts) leaves the mail it did read on the page.
  const [lookupFailure, setLookupFailure] = useState(/** @type {unknown} */ (null))
  const [lookups, setLookups] = useState(0)

  useEffect(() => {
    if (mailbox !== undefined) return
    findMailbox(mailboxId).then((found) => (setMailbox(found), setLookupFailure(null)), setLookupFailure)
  }, [mailboxId, lookups])

  if (mailbox === null || isNotFound(listFailure)) return html`<${MailboxNotFound} mailboxId=${mailboxId} />`
  const lookUpAgain = () => {
    setLookupFailure(null)
    setLookups(lookups + 1)
  }
  return html`
    <h1>${mailbox ? mailbox.email_address : "Inbox"}</h1>
    ${mailbox && html`
      <div class="actions">
        <a class="button" href=${href("mailboxes", mailboxId, "compose")}>New email</a>
        <a class="button secondary" href=${href("mailboxes", mailboxId, "drafts")}>Drafts</a>
      </div>`}
    ${lookupFailure && html`<${LoadFailed} error=${lookupFailure} onRetry=${lookUpAgain} retryName="Read the mailbox's details again" />`}
    ${listFailure ? html`<${LoadFailed} error=${listFailure} onRetry=${readAgain} />` : emails === null ? html`<p class="muted">Loading…</p>` : html`
      <div class="toolbar">
        <label for="sort">Sort</label>
        <select id="sort" value=${sort} onChange=${(/** @type {any} */ e) => (setSort(e.currentTarget.value), setOffset(0))}>
          ${SORTS.map(([value, label]) => html`<option value=${value}>${label}</option>`)}
        </select>
        <label class="check"><input type="checkbox" checked=${grouped} onChange=${(/** @type {any} */ e) => setGrouped(e.currentTarget.checked)} />
          Group by conversation</label>
        <span class="muted small" aria-live="polite">${total} ${total === 1 ? "email" : "emails"}</span>
      </div>
      ${emails.length === 0
        ? html`<p class="muted">No mail yet. It appears here as soon as it arrives.</p>`
        : grouped ? html`<${ThreadList} emails=${emails} />` : html`<${EmailList} emails=${emails} />`}
      <${Pager} offset=${offset} pageSize=${PAGE} total=${total} noun="emails" onOffset=${setOffset} />`}
  `
}

/** The newest mail of every mailbox, in one list (GET /api/emails), a page at a time. */
export const AllInbox = () => {
  // Every mailbox's mail in one list: one request, however many mailboxes.
  const { emails, total, offset, setOffset, failure, retry } = useEmailPage("/api/emails")
  return html`
    <h1>Inbox</h1>
    <p class="muted">The newest mail across all your mailboxes.</p>
    ${failure ? html`<${LoadFailed} error=${failure} onRetry=${retry} />` : emails === null
      ? html`<p class="muted">Loading…</p>` : emails.length === 0
      ? html`<p class="muted">No mail yet. <a href=${href()}>Create a mailbox</a> and send mail to it.</p>`
      : html`<${EmailList} emails=${emails} /><${Pager} offset=${offset} pageSize=${PAGE} total=${total} noun="emails" onOffset=${setOffset} />`}
  `
}
