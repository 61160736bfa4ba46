/** Small pieces every page uses: the page frame with its navigation, labelled fields, copy buttons, notices. */
import { html } from "htm/preact"
import { useEffect, useRef, useState } from "preact/hooks"
import { allMailboxes, ApiError, findMailbox } from "./api.js"
import { addressesShown, addressShown } from "./idn.js"
import { onStreamState, streamUp } from "./live.js"
import { href } from "./router.js"

/**
 * @param {{ user: { email: string } | null, section: string, onSignOut: () => void, children: any }} props
 */
export const Frame = ({ user, section, onSignOut, children }) => html`
  <a class="skip" href="#main">Skip to content</a>
  <header class="top">
    <a class="brand" href=${href()}>Mailroom</a>
    ${user && html`
      <nav aria-label="Main">
        <a href=${href("inbox")} aria-current=${section === "inbox" ? "page" : undefined}>Inbox</a>
        <a href=${href("drafts")} aria-current=${section === "drafts" ? "page" : undefined}>Drafts</a>
        <a href=${href()} aria-current=${section === "mailboxes" ? "page" : undefined}>Mailboxes</a>
        <a href=${href("search")} aria-current=${section === "search" ? "page" : undefined}>Search</a>
        <a href=${href("senders")} aria-current=${section === "senders" ? "page" : undefined}>Senders</a>
        <a href=${href("filters")} aria-current=${section === "filters" ? "page" : undefined}>Filters</a>
        <a href=${href("webhooks")} aria-current=${section === "webhooks" ? "page" : undefined}>Webhooks</a>
        <a href=${href("domains")} aria-current=${section === "domains" ? "page" : undefined}>Domains</a>
        <a href=${href("keys")} aria-current=${section === "keys" ? "page" : undefined}>API keys</a>
        <a href=${href("billing")} aria-current=${section === "billing" ? "page" : undefined}>Billing</a>
      </nav>
      <div class="who">
        <a href=${href("account")} aria-current=${section === "account" ? "page" : undefined} title="Your account">${addressShown(user.email)}</a>
        <button type="button" class="link" onClick=${onSignOut}>Sign out</button>
      </div>`}
  </header>
  <main id="main" tabindex="-1">${user && html`<${StreamNotice} />`}${children}</main>
`

/** A stream down this long is said to be: a brief break the browser mends by itself is not. */
const NOTICE_AFTER_MS = 3000

/** Says so while the page hears nothing new (its event stream down and being opened again). */
const StreamNotice = () => {
  const [shown, setShown] = useState(false)
  useEffect(() => {
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    let timer
    /** @param {boolean} up */
    const follow = (up) => {
      clearTimeout(timer)
      if (up) setShown(false)
      else timer = setTimeout(() => setShown(true), NOTICE_AFTER_MS)
    }
    follow(streamUp())
    const stop = onStreamState(follow)
    return () => (clearTimeout(timer), stop())
  }, [])
  return shown
    ? html`<p class="notice stream-notice" role="status">Not connected to the server: new mail and deliveries show once the connection is back (trying again).</p>`
    : null
}

/**
 * The moment a day of the reader's own (an `<input type="date">`'s value) starts, or with `later` the
 * one so many days after it: "since 1 December" is from the midnight that starts it where the reader
 * is, not in UTC, and "until 5 December" takes in all of the 5th (before the 6th starts).
 * @param {string} day @param {number} [later]
 */
const dayStart = (day, later = 0) => {
  const [year, month, date] = day.split("-").map(Number)
  return new Date(year ?? 0, (month ?? 1) - 1, (date ?? 1) + later).toISOString()
}

/**
 * The days mail arrived between, as a list or search asks for them: `received_after` from Since's
 * start, `received_before` after Until's end; none for a day not given.
 * @param {string} since @param {string} until
 */
export const arrivedBetween = (since, until) => ({
  ...(since === "" ? {} : { received_after: dayStart(since) }),
  ...(until === "" ? {} : { received_before: dayStart(until, 1) })
})

/**
 * What mail was narrowed to, said after "Nothing" or "Nothing found": " from ada@example.com since
 * 2026-12-01 until 2026-12-05", each part only when given.
 * @param {{ from: string, since: string, until: string }} narrowing
 */
export const narrowedTo = ({ from, since, until }) =>
  [from.trim() === "" ? "" : ` from ${from.trim()}`, since === "" ? "" : ` since ${since}`, until === "" ? "" : ` until ${until}`].join("")

/**
 * Since and Until: two days of the reader's own. A day typed past the other moves the other with it
 * (Since after Until makes Until that day too), so the span always holds a day.
 * @param {{ id: string, since: string, until: string, onChange: (span: { since: string, until: string }) => void }} props
 */
export const DaySpan = ({ id, since, until, onChange }) => html`
  <span class="day-span">
  <span class="labelled">
    <label for=${`${id}-since`}>Since</label>
    <input id=${`${id}-since`} type="date" value=${since} max=${until || undefined}
      onChange=${(/** @type {any} */ e) => {
  const day = e.currentTarget.value
  onChange({ since: day, until: until !== "" && day > until ? day : until })
}} />
  </span>
  <span class="labelled">
    <label for=${`${id}-until`}>Until</label>
    <input id=${`${id}-until`} type="date" value=${until} min=${since || undefined}
      onChange=${(/** @type {any} */ e) => {
  const day = e.currentTarget.value
  onChange({ since: day !== "" && day < since ? day : since, until: day })
}} />
  </span>
  </span>
`

/**
 * What is said under a field, announced with it: an `error` (red), what was checked and found good
 * (`ok`, green), else a `hint` (grey): a hint in the success colour read as "all good".
 * @param {{ id: string, hint?: any, ok?: string, error?: string }} props
 */
const FieldNote = ({ id, hint, ok, error }) =>
  (hint || ok || error) && html`<p id=${id + "-note"} class=${error ? "note error" : ok ? "note" : "note hint"} aria-live="polite">${error ?? ok ?? hint}</p>`

/** Input types whose text a person writes in any script: laid out by its own first strong character (`dir="auto"`). */
const WRITTEN = ["text", "search", "email", "url"]

/**
 * A labelled input; `hint`, `ok` and `error` are announced with it (FieldNote). Written text (a subject,
 * a name, a query) takes its direction from what is typed: Hebrew or Arabic runs right to left.
 * @param {{ id: string, label: string, value: string, onInput: (value: string) => void, type?: string,
 *   hint?: any, ok?: string, error?: string, autocomplete?: string, required?: boolean, minLength?: number, inputmode?: string,
 *   autofocus?: boolean }} props
 */
export const Field = ({ id, label, value, onInput, type = "text", hint, ok, error, autocomplete, required, minLength, inputmode, autofocus }) => html`
  <div class="field">
    <label for=${id}>${label}</label>
    <input id=${id} name=${id} type=${type} value=${value} required=${required} minLength=${minLength} dir=${WRITTEN.includes(type) ? "auto" : undefined}
      autocomplete=${autocomplete} inputmode=${inputmode} autofocus=${autofocus} aria-invalid=${error ? "true" : undefined}
      aria-describedby=${hint || ok || error ? id + "-note" : undefined}
      onInput=${(/** @type {any} */ event) => onInput(event.currentTarget.value)} />
    <${FieldNote} id=${id} hint=${hint} ok=${ok} error=${error} />
  </div>
`

/**
 * A labelled multi-line input, as Field.
 * @param {{ id: string, label: string, value: string, onInput: (value: string) => void, hint?: any, error?: string, rows?: number, autofocus?: boolean }} props
 */
export const TextArea = ({ id, label, value, onInput, hint, error, rows = 8, autofocus = false }) => {
  const ref = useRef(/** @type {HTMLTextAreaElement | null} */ (null))
  // Opened on a page already shown (a reply below an email), where the attribute alone does nothing.
  useEffect(() => void (autofocus && ref.current?.focus()), [])
  return html`
    <div class="field">
      <label for=${id}>${label}</label>
      <textarea ref=${ref} id=${id} name=${id} rows=${rows} value=${value} dir="auto" aria-invalid=${error ? "true" : undefined}
        aria-describedby=${hint || error ? id + "-note" : undefined}
        onInput=${(/** @type {any} */ event) => onInput(event.currentTarget.value)}></textarea>
      <${FieldNote} id=${id} hint=${hint} error=${error} />
    </div>
  `
}

/**
 * Put `text` on the clipboard. The Clipboard API exists only in a secure context (HTTPS or
 * localhost): a dashboard served over plain HTTP on another host copies through a selected text area.
 * @param {string} text
 */
const writeClipboard = async (text) => {
  if (navigator.clipboard) return navigator.clipboard.writeText(text)
  // Selecting the text moves the focus: it goes back to where it was (the button), the page unscrolled.
  const focused = /** @type {HTMLElement | null} */ (document.activeElement)
  const area = document.createElement("textarea")
  area.value = text
  area.setAttribute("readonly", "")
  area.className = "visually-hidden"
  document.body.append(area)
  area.focus({ preventScroll: true })
  area.select()
  const copied = document.execCommand("copy")
  area.remove()
  focused?.focus({ preventScroll: true })
  if (!copied) throw new Error("copy refused")
}

/**
 * `label` is what the button shows; `name`, when given, what it is called for a screen reader (where
 * several buttons would show the same label). What happened is shown on the button and said by a
 * status region, so a screen reader hears it too. It is told of the text it copied only: a button
 * that comes to copy another (the next new key, in the same place) says "Copy" again.
 * @param {{ text: string, label?: string, name?: string }} props
 */
export const CopyButton = ({ text, label = "Copy", name }) => {
  const [done, setDone] = useState(/** @type {{ text: string, outcome: "copied" | "failed" } | null} */ (null))
  const outcome = done?.text === text ? done.outcome : null
  const copy = async () => {
    const outcome = await writeClipboard(text).then(() => /** @type {const} */ ("copied"), () => /** @type {const} */ ("failed"))
    setDone({ text, outcome })
    setTimeout(() => setDone((current) => (current?.text === text ? null : current)), 2000)
  }
  return html`<button type="button" class="secondary" aria-label=${name} onClick=${copy}>${
    outcome === "copied" ? "Copied" : outcome === "failed" ? "Copy failed" : label
  }</button><span class="visually-hidden" role="status">${
    outcome === "copied" ? "Copied to the clipboard" : outcome === "failed" ? "Could not copy: select the text and copy it" : ""
  }</span>`
}

/**
 * `n` and the word for that many: "1 mailbox", "2 mailboxes".
 * @param {number} n @param {string} one @param {string} many
 */
export const count = (n, one, many) => `${n} ${n === 1 ? one : many}`

/**
 * A refusal, in the page's words. With `labels` (a request field's name to its label on the form), a
 * VALIDATION_ERROR about such fields only is told by those labels ("To, item 2: must be …") rather than
 * by the request's names ("to.1 must be …"); anything else as the server said it.
 * @param {{ error: unknown, labels?: Record<string, string> }} props
 */
export const ErrorNote = ({ error, labels }) =>
  error ? html`<p class="alert" role="alert">${refusalText(error, labels)}</p>` : null

/** @param {unknown} error @param {Record<string, string> | undefined} labels */
const refusalText = (error, labels) => {
  if (!(error instanceof Error)) return String(error)
  if (labels === undefined || !(error instanceof ApiError) || error.code !== "VALIDATION_ERROR") return error.message
  /** @type {Record<string, unknown>} */
  const details = error.details?.field_errors ?? error.details ?? {}
  const told = Object.entries(details).map(([key, message]) => {
    const [field, item] = key.split(".")
    const label = labels[field]
    if (label === undefined || typeof message !== "string") return undefined
    return item !== undefined && /^\d+$/.test(item) ? `${label}, item ${Number(item) + 1}: ${message}` : `${label}: ${message}`
  })
  return told.length > 0 && told.every(Boolean) ? told.join(". ") : error.message
}

/**
 * A client named as a person would: its browser (or program) and system, from its User-Agent.
 * @param {string | null} agent
 */
export const clientName = (agent) => {
  if (!agent) return "Unknown client"
  const browser = /Edg\//.test(agent) ? "Edge" : /Firefox\//.test(agent) ? "Firefox" : /Chrome\//.test(agent) ? "Chrome"
    : /Safari\//.test(agent) ? "Safari" : agent.split(/[\s/]/)[0]
  const system = /Android/.test(agent) ? "Android" : /iPhone|iPad/.test(agent) ? "iOS" : /Windows/.test(agent) ? "Windows"
    : /Mac OS X/.test(agent) ? "macOS" : /Linux/.test(agent) ? "Linux" : ""
  return system ? `${browser} on ${system}` : browser
}

/**
 * Who a list names for an email (the inbox's, search results): its sender, or for sent mail whom it went to (the first recipient,
 * and how many more), as mail programs show their Sent folder: the mailbox's own address on every
 * sent row would tell nothing. All of them on hover, as stored (an internationalized domain's A-label) where
 * the name shows them in Unicode (idn.js).
 * @param {any} email
 */
export const counterpart = (email) => {
  if (email.direction !== "outbound") return { name: email.from_name || addressShown(email.from), title: email.from }
  const to = [...email.to, ...email.cc]
  if (to.length === 0) return { name: "To Bcc recipients", title: "Sent to Bcc recipients only" }
  const all = to.join(", ")
  const shown = addressesShown(all)
  return { name: `To ${addressShown(to[0])}${to.length > 1 ? ` +${to.length - 1}` : ""}`, title: shown === all ? all : `${shown} (${all})` }
}

/** @param {string} iso */
export const when = (iso) => {
  const date = new Date(iso)
  const sameDay = date.toDateString() === new Date().toDateString()
  return sameDay ? date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) : date.toLocaleDateString()
}

/**
 * The last day of whole days that end on `end` (YYYY-MM-DD): iCalendar's end of whole days is the day
 * after the last (RFC 5545), as the API answers it.
 * @param {string} end
 */
export const lastDay = (end) => new Date(Date.parse(`${end}T00:00:00Z`) - 86_400_000).toISOString().slice(0, 10)

/** @param {number} bytes */
export const size = (bytes) => {
  const units = ["B", "KB", "MB", "GB", "TB"]
  let unit = 0
  while (bytes >= 1024 && unit < units.length - 1) (bytes /= 1024), unit++
  return unit === 0 ? `${bytes} B` : `${bytes.toFixed(1).replace(/\.0$/, "")} ${units[unit]}`
}

/**
 * A form's action: `run` does it while `busy` (for disabling the buttons), and its failure is
 * `error`, for ErrorNote (`clear` takes it away). With `once`, a second `run` while one is under way
 * is not started: a double click approves once, even the second click that comes before the
 * buttons are drawn disabled (not for a search, whose new query replaces the one running).
 * @param {{ once?: boolean }} [options]
 */
export const useAction = ({ once = false } = {}) => {
  const [error, setError] = useState(/** @type {unknown} */ (null))
  const [busy, setBusy] = useState(false)
  const running = useRef(false)
  /** @param {() => Promise<void>} action */
  const run = async (action) => {
    if (once && running.current) return
    running.current = true
    setBusy(true)
    setError(null)
    try {
      await action()
    } catch (failure) {
      setError(failure)
    } finally {
      running.current = false
      setBusy(false)
    }
  }
  return { busy, error, run, clear: () => setError(null) }
}

/**
 * Focus an element when it is shown (the answer to a question the reader just asked for, so the
 * keyboard stays where they are); a ref that never changes, so it runs once per element.
 * @param {HTMLElement | null} element
 */
const focusOnShow = (element) => element?.focus()

/**
 * A deletion asked twice: the button, then what it deletes and that it cannot be undone, with the
 * button that does it. Its refusal (a 409: deliveries pending, a draft answering it) shows below.
 * @param {{ what: string, warning: string, onConfirm: () => Promise<void> }} props
 */
export const ConfirmDelete = ({ what, warning, onConfirm }) => {
  const [asking, setAsking] = useState(false)
  const { busy, error, run } = useAction()
  if (!asking) return html`<button type="button" class="danger" onClick=${() => setAsking(true)}>Delete ${what}</button>`
  return html`
    <div class="confirm" role="group" aria-label=${`Delete ${what}`}>
      <p>${warning} This cannot be undone.</p>
      <${ErrorNote} error=${error} />
      <div class="actions">
        <button type="button" class="danger" disabled=${busy} onClick=${() => run(onConfirm)} ref=${focusOnShow}>Delete for good</button>
        <button type="button" class="secondary" disabled=${busy} onClick=${() => setAsking(false)}>Keep it</button>
      </div>
    </div>
  `
}

/**
 * What to do about a page that could not load, by why: a rate limit passes with the minute, a
 * server's trouble or a lost connection may pass at once.
 * @param {unknown} error
 */
const adviceFor = (error) => {
  if (!(error instanceof ApiError)) return "Mailroom could not be reached: check the connection, then try again."
  if (error.status === 429) {
    const seconds = Number(error.details?.retry_after)
    return `Too many requests this minute: try again ${seconds > 0 ? `in ${seconds} s` : "in a moment"}.`
  }
  if (error.status >= 500) return "The server could not answer: try again in a moment."
  // A refusal of what was asked (a search query too long, say): asking again the same way would not help.
  if (error.status === 400 || error.status === 422) return "Change what it says is wrong, then try again."
  return "Try again; if it fails again, reload the page."
}

/**
 * Content that could not load: why, what to do, and a button that asks again. Shown instead of that
 * content (and of its "Loading…"), never beside it. `retryName` names the button for a screen reader
 * where a page has two of them (the mailbox's own details failed beside its mail).
 * @param {{ error: unknown, onRetry: () => void, retryName?: string }} props
 */
export const LoadFailed = ({ error, onRetry, retryName }) => html`
  <div class="alert load-failed" role="alert">
    <p>${error instanceof Error ? error.message : String(error)}</p>
    <p class="small">${adviceFor(error)}</p>
    <button type="button" class="secondary" aria-label=${retryName} onClick=${onRetry}>Try again</button>
  </div>
`

/**
 * The account's mailboxes, for a form that chooses some (a filter's, a key's, a webhook's) and names
 * those chosen; `read` once they have been. A failed read is `failure`, for MailboxesUnread where the
 * choice would be: without it the form silently offered only "every mailbox".
 */
export const useMailboxChoices = () => {
  const [mailboxes, setMailboxes] = useState(/** @type {any[] | null} */ (null))
  const [failure, setFailure] = useState(/** @type {unknown} */ (null))
  const read = () => {
    allMailboxes().then((all) => (setMailboxes(all), setFailure(null)), setFailure)
  }
  useEffect(read, [])
  return { mailboxes: mailboxes ?? [], read: mailboxes !== null, failure, retry: read }
}

/** Said where a form's choice of mailboxes would be, when they could not be read. @param {{ failure: unknown, onRetry: () => void }} props */
export const MailboxesUnread = ({ failure, onRetry }) => failure ? html`
  <div class="alert load-failed" role="alert">
    <p>Your mailboxes could not be read, so none can be chosen here: ${failure instanceof Error ? failure.message : String(failure)}</p>
    <p class="small">${adviceFor(failure)}</p>
    <button type="button" class="secondary" aria-label="Read your mailboxes again" onClick=${onRetry}>Try again</button>
  </div>` : null

/** A mailbox page whose mailbox is not the account's (deleted, someone else's, or a wrong link). @param {{ mailboxId: string }} props */
export const MailboxNotFound = ({ mailboxId }) => html`
  <h1>Mailbox not found</h1>
  <p>None of your mailboxes has the id <code>${mailboxId}</code>: it may have been deleted, or the link is wrong.</p>
  <p><a href=${href()}>Go to your mailboxes</a></p>
`

/**
 * Newer and Older over a list read a page at a time, newest first.
 * @param {{ offset: number, pageSize: number, total: number, noun: string, onOffset: (offset: number) => void }} props
 */
export const Pager = ({ offset, pageSize, total, noun, onOffset }) => total > pageSize ? html`
  <nav class="pager" aria-label="Pages">
    <button type="button" class="secondary" disabled=${offset === 0} onClick=${() => onOffset(Math.max(0, offset - pageSize))}>Newer</button>
    <span class="muted small">${offset + 1}–${Math.min(offset + pageSize, total)} of ${total} ${noun}</span>
    <button type="button" class="secondary" disabled=${offset + pageSize >= total} onClick=${() => onOffset(offset + pageSize)}>Older</button>
  </nav>` : null

/**
 * A page's list and what it does to it: `fetchList` reads the list (on the first render, whenever
 * `deps` change, after each action and on `retry`); `run` does an action and then reads the list
 * again. A failed read is `failure` (for LoadFailed, instead of the list), a failed action `error`
 * (for ErrorNote, beside it). Reads may overlap (Older pressed twice, an action while a read is under
 * way): only the latest read's answer counts, so `fetchList` sets what it read only while
 * `isCurrent()` says it is still the latest.
 * @param {(isCurrent: () => boolean) => Promise<unknown>} fetchList
 * @param {unknown[]} [deps]
 */
export const useReloading = (fetchList, deps = []) => {
  const [failure, setFailure] = useState(/** @type {unknown} */ (null))
  const [error, setError] = useState(/** @type {unknown} */ (null))
  const latest = useRef(0)
  const load = async () => {
    const read = ++latest.current
    const isCurrent = () => read === latest.current
    try {
      await fetchList(isCurrent)
      if (isCurrent()) setFailure(null)
    } catch (failed) {
      if (isCurrent()) setFailure(failed)
    }
  }
  useEffect(() => {
    load()
    // A page left while its read is under way: that read's answer is nobody's.
    return () => void latest.current++
  }, deps)
  const retry = () => {
    setFailure(null)
    load()
  }
  /** @param {() => Promise<unknown>} action */
  const run = async (action) => {
    setError(null)
    try {
      await action()
    } catch (failed) {
      setError(failed)
      return
    }
    await load()
  }
  return { error, failure, retry, run }
}

/**
 * Checkboxes for choosing some of the account's mailboxes (none chosen means every one, as `legend`
 * says), scrolling when there are many; `error` is the server's refusal of the choice.
 * @param {{ legend: string, mailboxes: any[], chosen: string[], onChange: (chosen: string[]) => void, error?: string }} props
 */
export const MailboxChooser = ({ legend, mailboxes, chosen, onChange, error }) => html`
  <fieldset class="kinds mailboxes">
    <legend>${legend}</legend>
    ${mailboxes.map((m) => html`
      <label class="check"><input type="checkbox" checked=${chosen.includes(m.mailbox_id)}
        onChange=${(/** @type {any} */ e) => onChange(e.currentTarget.checked ? [...chosen, m.mailbox_id] : chosen.filter((id) => id !== m.mailbox_id))} />
        <span title=${addressShown(m.email_address) === m.email_address ? undefined : m.email_address}>${addressShown(m.email_address)}</span></label>`)}
    ${error && html`<p class="note error">${error}</p>`}
  </fieldset>`


/**
 * A page about one mailbox that reads it first: `render(mailbox)` once read; the account having no such
 * mailbox, not found; a failed read, what failed and a retry.
 * @param {{ mailboxId: string, render: (mailbox: any) => any }} props
 */
export const WithMailbox = ({ mailboxId, render }) => {
  // undefined until the mailbox is read; null: the account has no such mailbox.
  const [mailbox, setMailbox] = useState(/** @type {any} */ (undefined))
  const [failure, setFailure] = useState(/** @type {unknown} */ (null))
  const [attempt, setAttempt] = useState(0)
  useEffect(() => {
    findMailbox(mailboxId).then((found) => (setMailbox(found), setFailure(null)), setFailure)
  }, [mailboxId, attempt])
  if (mailbox === null) return html`<${MailboxNotFound} mailboxId=${mailboxId} />`
  if (failure) return html`<${LoadFailed} error=${failure} onRetry=${() => setAttempt((n) => n + 1)} />`
  if (mailbox === undefined) return html`<p class="muted">Loading…</p>`
  return render(mailbox)
}
