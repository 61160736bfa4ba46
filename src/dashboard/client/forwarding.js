/**
 * Forwarding, one mailbox's: the addresses its received mail is copied to, each pending until the
 * person there confirms with the link mailed to them (a mailbox of the account is on at once), or
 * suspended once its server refused a copy (resumed by adding it again), each removable, and a field to
 * add one; the server's refusals (the mailbox's own address, a full list, too many links mailed) show by
 * the field.
 */
import { html } from "htm/preact"
import { useState } from "preact/hooks"
import { call, fieldError } from "./api.js"
import { href } from "./router.js"
import { ErrorNote, LoadFailed, useReloading, when, WithMailbox } from "./ui.js"
import { addressShown } from "./idn.js"

/** How each state shows. */
const STATES = /** @type {Record<string, { tag: string, label: string }>} */ ({
  pending: { tag: "", label: "waiting for confirmation" },
  active: { tag: "succeeded", label: "forwarding" },
  suspended: { tag: "failed", label: "suspended" }
})

/** @param {{ mailbox: any }} props */
const Addresses = ({ mailbox }) => {
  const base = `/api/mailboxes/${encodeURIComponent(mailbox.mailbox_id)}/forwarding`
  const [addresses, setAddresses] = useState(/** @type {any[] | null} */ (null))
  const [address, setAddress] = useState("")
  const [added, setAdded] = useState(/** @type {any} */ (null))
  const { error, failure, retry, run } = useReloading((isCurrent) => call("GET", base).then((a) => isCurrent() && setAddresses(a.data)), [base])
  /** @param {Event} event */
  const add = (event) => {
    event.preventDefault()
    return run(async () => {
      const answer = await call("POST", base, { address })
      setAdded(answer.data)
      setAddress("")
    })
  }
  return html`
    <section class="card" aria-labelledby="forwarding-heading">
      <h2 id="forwarding-heading">Forward to</h2>
      <p class="muted small">
        Each email that arrives (not what is labelled spam or blocked) is copied, unchanged, to these addresses. An address
        starts forwarding once the person there opens the link mailed to them and agrees; the same link lets them stop it.
        A copy their server refuses suspends the address until you resume it.
      </p>
      <form class="inline-form entry-form" onSubmit=${add} aria-label="Forward to an address">
        <label class="visually-hidden" for="forward-address">Address to forward to</label>
        <input id="forward-address" type="email" value=${address} placeholder="ada@example.com" required
          aria-invalid=${fieldError(error, "address") ? "true" : undefined} aria-describedby="forward-address-note"
          onInput=${(/** @type {any} */ e) => setAddress(e.currentTarget.value)} />
        <button type="submit">Forward</button>
      </form>
      <p id="forward-address-note" class="note error" aria-live="polite">${fieldError(error, "address") ?? ""}</p>
      ${!fieldError(error, "address") && html`<${ErrorNote} error=${error} />`}
      ${added && !error && html`<p class="note" role="status">${added.status === "pending"
        ? `A link to confirm was mailed to ${added.address}; nothing is forwarded there until it is opened.`
        : `Mail is forwarded to ${added.address}.`}</p>`}
      ${failure ? html`<${LoadFailed} error=${failure} onRetry=${retry} />` : addresses === null ? html`<p class="muted small">Loading…</p>`
        : addresses.length === 0 ? html`<p class="muted small">Not forwarded anywhere.</p>` : html`
        <ul class="list" aria-label="Forwarding addresses">
          ${addresses.map((f) => html`
            <li key=${f.address} class="item wrap">
              <div class="grow">
                <code>${f.address}</code> <span class=${"tag " + STATES[f.status].tag}>${STATES[f.status].label}</span>${" "}<span class="muted small">${
  f.confirmed_at ? `since ${when(f.confirmed_at)}` : `asked ${when(f.created_at)}`
}</span>
                ${f.suspended_reason && html`<div class="muted small">Its server refused a copy: ${f.suspended_reason}</div>`}
              </div>
              <div class="actions">
                ${f.status !== "active" && html`
                  <button type="button" class="link" aria-label=${`${f.status === "pending" ? "Mail a new link to" : "Resume forwarding to"} ${f.address}`}
                    onClick=${() => run(async () => setAdded((await call("POST", base, { address: f.address })).data))}>${
  f.status === "pending" ? "Mail the link again" : "Resume"
}</button>`}
                <button type="button" class="link" aria-label=${`Stop forwarding to ${f.address}`}
                  onClick=${() => run(() => (setAdded(null), call("DELETE", `${base}/${encodeURIComponent(f.address)}`)))}>Remove</button>
              </div>
            </li>`)}
        </ul>`}
    </section>
  `
}

/** @param {{ mailboxId: string }} props */
export const MailboxForwarding = ({ mailboxId }) => html`
  <${WithMailbox} mailboxId=${mailboxId} render=${(/** @type {any} */ mailbox) => html`
    <p><a href=${href("mailboxes", mailboxId)}>← Back to the inbox</a></p>
    <h1>Forwarding of ${addressShown(mailbox.email_address)}</h1>
    <${Addresses} mailbox=${mailbox} />
  `} />
`
