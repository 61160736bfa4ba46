/**
 * Senders: who may write to the account's mailboxes (the allow and block lists, the account's or one
 * mailbox's: an address, a domain or `*.domain`), and who the account no longer writes to (addresses
 * that bounced, unsubscribed or complained, or that the account suppressed), each entry removable.
 */
import { html } from "htm/preact"
import { useState } from "preact/hooks"
import { call, fieldError } from "./api.js"
import { href } from "./router.js"
import { ErrorNote, LoadFailed, useReloading, when, WithMailbox } from "./ui.js"
import { addressShown } from "./idn.js"

/** The largest page the lists answer; a list holds at most 1,000 entries. */
const PAGE = 100

const LISTS = /** @type {const} */ ([
  ["block", "Block list", "Mail from these senders is refused (by MAIL FROM) or kept out of sight, labelled blocked (by From)."],
  ["allow", "Allow list", "When it has entries, only these senders' mail is accepted."]
])

/**
 * One allow or block list: its entries, newest first, each removable, and a field to add one; the
 * server's refusal (a malformed entry, a full list) shows by the field.
 * @param {{ base: string, list: "allow" | "block", title: string, about: string }} props
 */
const SenderList = ({ base, list, title, about }) => {
  const [entries, setEntries] = useState(/** @type {any[] | null} */ (null))
  const [total, setTotal] = useState(0)
  const [entry, setEntry] = useState("")
  const { error, failure, retry, run } = useReloading((isCurrent) =>
    call("GET", `${base}/${list}?limit=${PAGE}`).then((a) => isCurrent() && (setEntries(a.data), setTotal(a.meta.total))), [base])
  const id = `${list}-entry`
  /** @param {Event} event */
  const add = (event) => {
    event.preventDefault()
    return run(async () => {
      await call("POST", `${base}/${list}`, { entry })
      setEntry("")
    })
  }
  return html`
    <section class="card" aria-labelledby=${list + "-heading"}>
      <h2 id=${list + "-heading"}>${title}</h2>
      <p class="muted small">${about}</p>
      <form class="inline-form entry-form" onSubmit=${add} aria-label=${"Add to the " + title.toLowerCase()}>
        <label class="visually-hidden" for=${id}>${"Address or domain to add to the " + title.toLowerCase()}</label>
        <input id=${id} value=${entry} placeholder="ada@example.com, example.com or *.example.com" required
          aria-invalid=${fieldError(error, "entry") ? "true" : undefined} aria-describedby=${id + "-note"}
          onInput=${(/** @type {any} */ e) => setEntry(e.currentTarget.value)} />
        <button type="submit">Add</button>
      </form>
      <p id=${id + "-note"} class="note error" aria-live="polite">${fieldError(error, "entry") ?? ""}</p>
      ${!fieldError(error, "entry") && html`<${ErrorNote} error=${error} />`}
      ${failure ? html`<${LoadFailed} error=${failure} onRetry=${retry} />` : entries === null ? html`<p class="muted small">Loading…</p>`
        : entries.length === 0 ? html`<p class="muted small">Empty.</p>` : html`
        <ul class="list" aria-label=${title}>
          ${entries.map((e) => html`
            <li key=${e.entry} class="item">
              <div class="grow"><code>${e.entry}</code> <span class="muted small">${e.type} · added ${when(e.created_at)}</span></div>
              <button type="button" class="link" aria-label=${`Remove ${e.entry} from the ${title.toLowerCase()}`}
                onClick=${() => run(() => call("DELETE", `${base}/${list}/${encodeURIComponent(e.entry)}`))}>Remove</button>
            </li>`)}
        </ul>
        ${total > entries.length && html`<p class="muted small">The ${PAGE} newest of ${total}.</p>`}`}
    </section>
  `
}

/** How the list says why an address is on it. */
const REASONS = /** @type {Record<string, string>} */ ({
  bounced: "bounced",
  unsubscribed: "unsubscribed",
  complained: "reported as spam",
  manual: "added by you"
})

/**
 * Addresses the account no longer sends to: a hard bounce, an unsubscribe or a spam report put each
 * there, or the account did (the field); removing one lets mail go to it again.
 */
const Suppressions = () => {
  const [suppressed, setSuppressed] = useState(/** @type {any[] | null} */ (null))
  const [address, setAddress] = useState("")
  const { error, failure, retry, run } = useReloading((isCurrent) =>
    call("GET", `/api/suppressions?limit=${PAGE}`).then((a) => isCurrent() && setSuppressed(a.data)))
  /** @param {Event} event */
  const add = (event) => {
    event.preventDefault()
    return run(async () => {
      await call("POST", "/api/suppressions", { address })
      setAddress("")
    })
  }
  return html`
    <section class="card" aria-labelledby="suppressed-heading">
      <h2 id="suppressed-heading">Suppressed recipients</h2>
      <p class="muted small">Sending to these addresses is refused until they are removed. A hard bounce, an unsubscribe or a spam report puts an address here; add one when a person asks not to be written to.</p>
      <form class="inline-form entry-form" onSubmit=${add} aria-label="Suppress an address">
        <label class="visually-hidden" for="suppress-address">Address to stop sending to</label>
        <input id="suppress-address" type="email" value=${address} placeholder="ada@example.com" required
          aria-invalid=${fieldError(error, "address") ? "true" : undefined} aria-describedby="suppress-address-note"
          onInput=${(/** @type {any} */ e) => setAddress(e.currentTarget.value)} />
        <button type="submit">Suppress</button>
      </form>
      <p id="suppress-address-note" class="note error" aria-live="polite">${fieldError(error, "address") ?? ""}</p>
      ${!fieldError(error, "address") && html`<${ErrorNote} error=${error} />`}
      ${failure ? html`<${LoadFailed} error=${failure} onRetry=${retry} />` : suppressed === null ? html`<p class="muted small">Loading…</p>`
        : suppressed.length === 0 ? html`<p class="muted small">None.</p>` : html`
        <ul class="list" aria-label="Suppressed recipients">
          ${suppressed.map((s) => html`
            <li key=${s.address} class="item wrap">
              <div class="grow">
                <code>${s.address}</code> <span class="muted small">${REASONS[s.reason] ?? s.reason} · since ${when(s.created_at)}</span>
                ${s.last_response && html`<div class="muted small">${s.last_response}</div>`}
              </div>
              <button type="button" class="link" aria-label=${`Send to ${s.address} again`}
                onClick=${() => run(() => call("DELETE", `/api/suppressions/${encodeURIComponent(s.address)}`))}>Remove</button>
            </li>`)}
        </ul>`}
    </section>
  `
}

/** The account's lists and suppressions. */
export const SendersPage = () => html`
  <h1>Senders</h1>
  <p class="muted">For every mailbox of the account; each mailbox has lists of its own too (Senders, on its inbox).</p>
  ${LISTS.map(([list, title, about]) => html`<${SenderList} key=${list} base="/api/lists" list=${list} title=${title} about=${about} />`)}
  <${Suppressions} />
`

/** One mailbox's own lists (each must allow a sender as well as the account's). @param {{ mailboxId: string }} props */
export const MailboxSenders = ({ mailboxId }) => html`
  <${WithMailbox} mailboxId=${mailboxId} render=${(/** @type {any} */ mailbox) => {
    const base = `/api/mailboxes/${encodeURIComponent(mailboxId)}/lists`
    return html`
      <p><a href=${href("mailboxes", mailboxId)}>← Back to the inbox</a></p>
      <h1>Senders of ${addressShown(mailbox.email_address)}</h1>
      <p class="muted">On top of <a href=${href("senders")}>the account's lists</a>: a block on either refuses, and each allow list with entries must name the sender.</p>
      ${LISTS.map(([list, title, about]) => html`<${SenderList} key=${list} base=${base} list=${list} title=${title} about=${about} />`)}
    `
  }} />
`
