/**
 * API keys: create (the key shown once, with a copy button), optionally expiring after a number of
 * days (SPEC: rotate keys by setting an expiry) and limited to some mailboxes (an agent's own), list
 * with when each expires and what it reaches, revoke.
 */
import { html } from "htm/preact"
import { useEffect, useState } from "preact/hooks"
import { allMailboxes, call, fieldError } from "./api.js"
import { CopyButton, ErrorNote, Field, when } from "./ui.js"

/** The expiries offered: SPEC allows 1-365 days. */
const EXPIRIES = /** @type {const} */ ([["", "Never"], ["30", "In 30 days"], ["90", "In 90 days"], ["180", "In 180 days"], ["365", "In a year"]])

export const KeysPage = () => {
  const [keys, setKeys] = useState(/** @type {any[] | null} */ (null))
  const [name, setName] = useState("")
  // Days until the new key expires; "" never.
  const [days, setDays] = useState("")
  // The account's mailboxes (for limiting a key to some), and those chosen: none is the whole account.
  const [mailboxes, setMailboxes] = useState(/** @type {any[]} */ ([]))
  const [chosen, setChosen] = useState(/** @type {string[]} */ ([]))
  /** @param {string} id */
  const addressOf = (id) => mailboxes.find((m) => m.mailbox_id === id)?.email_address ?? "a deleted mailbox"
  const [created, setCreated] = useState(/** @type {any} */ (null))
  const [error, setError] = useState(/** @type {unknown} */ (null))

  const load = () => call("GET", "/api/api-keys?limit=100").then((answer) => setKeys(answer.data), setError)
  useEffect(() => {
    load()
    allMailboxes().then(setMailboxes, () => setMailboxes([]))
  }, [])

  /** @param {Event} event */
  const create = async (event) => {
    event.preventDefault()
    setError(null)
    try {
      const answer = await call("POST", "/api/api-keys", {
        name,
        ...(days === "" ? {} : { expirationDays: Number(days) }),
        ...(chosen.length === 0 ? {} : { mailboxIds: chosen })
      })
      setCreated(answer.data)
      setName("")
      setDays("")
      setChosen([])
      await load()
    } catch (failure) {
      setError(failure)
    }
  }

  /** @param {any} key */
  const revoke = async (key) => {
    if (!confirm(`Revoke the key "${key.name}"? Agents using it stop working at once.`)) return
    try {
      await call("DELETE", `/api/api-keys/${encodeURIComponent(key.keyId)}`)
      await load()
    } catch (failure) {
      setError(failure)
    }
  }

  return html`
    <h1>API keys</h1>
    <p class="muted">Agents use a key as <code>X-API-Key</code> on <code>/v1</code>. A key acts with your full rights, or only on the
      mailboxes you limit it to: give each agent a key for its own mailbox.</p>
    <form class="card" onSubmit=${create} aria-label="New key">
      <div class="row-form">
        <${Field} id="key-name" label="New key name" value=${name} onInput=${setName} required error=${fieldError(error, "name")} />
        <div class="field">
          <label for="key-expiry">Expires</label>
          <select id="key-expiry" value=${days} onChange=${(/** @type {any} */ e) => setDays(e.currentTarget.value)}>
            ${EXPIRIES.map(([value, label]) => html`<option value=${value}>${label}</option>`)}
          </select>
        </div>
        <button type="submit">Create key</button>
      </div>
      ${mailboxes.length > 0 && html`
        <fieldset class="kinds mailboxes">
          <legend>Limit to mailboxes (none checked: the whole account)</legend>
          ${mailboxes.map((m) => html`
            <label class="check"><input type="checkbox" checked=${chosen.includes(m.mailbox_id)}
              onChange=${(/** @type {any} */ e) => setChosen(e.currentTarget.checked ? [...chosen, m.mailbox_id] : chosen.filter((id) => id !== m.mailbox_id))} />
              ${m.email_address}</label>`)}
          ${fieldError(error, "mailboxIds") && html`<p class="note error">${fieldError(error, "mailboxIds")}</p>`}
        </fieldset>`}
    </form>
    <${ErrorNote} error=${error} />
    ${created && html`
      <div class="card secret" role="status">
        <p><strong>${created.name}</strong>: copy this key now. It is shown only once.</p>
        <div class="copy-row"><code data-testid="new-key">${created.apiKey}</code><${CopyButton} text=${created.apiKey} label="Copy key" /></div>
        <button type="button" class="link" onClick=${() => setCreated(null)}>Done</button>
      </div>`}
    ${keys === null ? html`<p class="muted">Loading…</p>` : keys.length === 0 ? html`<p class="muted">No keys yet.</p>` : html`
      <ul class="list">
        ${keys.map((key) => html`
          <li key=${key.keyId} class="item">
            <div class="grow">
              <strong>${key.name}</strong> <code>${key.keyPrefix}…</code>
              <div class="muted small">${key.mailboxIds === null ? "Every mailbox" : "Only " + key.mailboxIds.map(addressOf).join(", ")} · Created ${when(key.createdAt)} · ${key.lastUsed ? "last used " + when(key.lastUsed) : "never used"}${
            key.expirationTs ? ` · ${Date.parse(key.expirationTs) <= Date.now() ? "expired" : "expires"} ${new Date(key.expirationTs).toLocaleDateString()}` : ""
          }</div>
            </div>
            <button type="button" class="danger" onClick=${() => revoke(key)} aria-label=${"Revoke " + key.name}>Revoke</button>
          </li>`)}
      </ul>`}
  `
}
