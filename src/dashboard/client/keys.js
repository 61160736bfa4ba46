/**
 * API keys: create (the key shown once, with a copy button), optionally expiring after a number of
 * days (SPEC: rotate keys by setting an expiry), limited to some mailboxes (an agent's own) and to
 * reading, list with when each expires and what it reaches, rename or change its mailboxes and
 * permission, revoke. Where the operator offers SMTP submission and IMAP, how mail programs send and
 * read mail with a key.
 */
import { html } from "htm/preact"
import { useEffect, useState } from "preact/hooks"
import { call, fieldError } from "./api.js"
import { CopyButton, ErrorNote, Field, LoadFailed, MailboxChooser, MailboxesUnread, useMailboxChoices, when } from "./ui.js"
import { addressShown } from "./idn.js"

/** The expiries offered: SPEC allows 1-365 days. */
const EXPIRIES = /** @type {const} */ ([["", "Never"], ["30", "In 30 days"], ["90", "In 90 days"], ["180", "In 180 days"], ["365", "In a year"]])

/**
 * A key's name and mailboxes, changed in place; the new limit applies to the key's next request.
 * @param {{ apiKey: any, mailboxes: any[], onDone: (saved: boolean) => void }} props
 */
const KeyEditor = ({ apiKey, mailboxes, onDone }) => {
  const [name, setName] = useState(apiKey.name)
  const [chosen, setChosen] = useState(/** @type {string[]} */ (apiKey.mailboxIds ?? []))
  const [readOnly, setReadOnly] = useState(apiKey.permission === "read_only")
  const [error, setError] = useState(/** @type {unknown} */ (null))
  const id = `key-${apiKey.keyId}`

  /** @param {Event} event */
  const save = async (event) => {
    event.preventDefault()
    setError(null)
    try {
      await call("PATCH", `/api/api-keys/${encodeURIComponent(apiKey.keyId)}`, {
        name,
        mailboxIds: chosen.length === 0 ? null : chosen,
        permission: readOnly ? "read_only" : "full_access"
      })
      onDone(true)
    } catch (failure) {
      setError(failure)
    }
  }

  return html`
    <form class="full" onSubmit=${save} aria-label=${"Change key " + apiKey.name}>
      <${Field} id=${id + "-name"} label="Name" value=${name} onInput=${setName} required error=${fieldError(error, "name")} />
      <${MailboxChooser} legend="Limit to mailboxes (none checked: the whole account)" mailboxes=${mailboxes} chosen=${chosen}
        onChange=${setChosen} error=${fieldError(error, "mailboxIds")} />
      <${ReadOnlyChoice} id=${id + "-read-only"} checked=${readOnly} onChange=${setReadOnly} />
      <${ErrorNote} error=${error} />
      <div class="actions">
        <button type="submit">Save</button>
        <button type="button" class="secondary" onClick=${() => onDone(false)}>Cancel</button>
      </div>
    </form>`
}

/**
 * Whether the key only reads: an agent that summarises or searches mail needs no more.
 * @param {{ id: string, checked: boolean, onChange: (checked: boolean) => void }} props
 */
const ReadOnlyChoice = ({ id, checked, onChange }) => html`
  <label class="check" for=${id}><input id=${id} type="checkbox" checked=${checked}
    onChange=${(/** @type {any} */ e) => onChange(e.currentTarget.checked)} /> Read only: reads and searches mail, changes nothing (no sending, labels or deletions)</label>`

/**
 * A mail server the page names (serve.ts `mailroom-submission`, `mailroom-imap`), if the operator offers it.
 * @param {string} name
 * @returns {{ host: string, port: string, security: string } | null}
 */
const mailServer = (name) => {
  const content = document.querySelector(`meta[name="${name}"]`)?.getAttribute("content")
  if (!content) return null
  const [security = "", port = "", ...host] = content.split(":").reverse()
  return { host: host.reverse().join(":"), port, security }
}

/** How each way of securing the port is said in mail programs' settings. */
const SECURITY = /** @type {Record<string, string>} */ ({
  starttls: "STARTTLS (required)",
  tls: "SSL/TLS",
  plain: "None: from this machine only"
})

/**
 * What a mail program or an SMTP library is given to send with a key.
 * @param {{ server: { host: string, port: string, security: string } }} props
 */
const SmtpSettings = ({ server }) => html`
  <section class="card" aria-labelledby="smtp-heading">
    <h2 id="smtp-heading">Sending over SMTP</h2>
    <p class="muted small">Mail programs and SMTP libraries send from your mailboxes with a key that may send as the password.</p>
    <dl class="meta">
      <dt>Server</dt><dd><code>${server.host}</code></dd>
      <dt>Port</dt><dd><code>${server.port}</code></dd>
      <dt>Security</dt><dd>${SECURITY[server.security] ?? server.security}</dd>
      <dt>User name</dt><dd>Any</dd>
      <dt>Password</dt><dd>An API key</dd>
      <dt>From</dt><dd>A mailbox the key may use</dd>
    </dl>
  </section>`

/**
 * What a mail program or an IMAP library is given to read a mailbox with a key.
 * @param {{ server: { host: string, port: string, security: string } }} props
 */
const ImapSettings = ({ server }) => html`
  <section class="card" aria-labelledby="imap-heading">
    <h2 id="imap-heading">Reading over IMAP</h2>
    <p class="muted small">Mail programs and IMAP libraries open a mailbox with a key that reaches it as the password; a read-only key changes nothing.</p>
    <dl class="meta">
      <dt>Server</dt><dd><code>${server.host}</code></dd>
      <dt>Port</dt><dd><code>${server.port}</code></dd>
      <dt>Security</dt><dd>${SECURITY[server.security] ?? server.security}</dd>
      <dt>User name</dt><dd>The mailbox's address</dd>
      <dt>Password</dt><dd>An API key</dd>
    </dl>
  </section>`

export const KeysPage = () => {
  const smtp = mailServer("mailroom-submission")
  const imap = mailServer("mailroom-imap")
  const [keys, setKeys] = useState(/** @type {any[] | null} */ (null))
  const [name, setName] = useState("")
  // Days until the new key expires; "" never.
  const [days, setDays] = useState("")
  // The account's mailboxes (for limiting a key to some), and those chosen: none is the whole account.
  const choices = useMailboxChoices()
  const { mailboxes } = choices
  const [chosen, setChosen] = useState(/** @type {string[]} */ ([]))
  const [readOnly, setReadOnly] = useState(false)
  /** A key's mailbox by its address; by its id until the mailboxes are read (or when they could not be). @param {string} id */
  const addressOf = (id) => {
    const found = mailboxes.find((m) => m.mailbox_id === id)
    return found ? addressShown(found.email_address) : choices.read ? "a deleted mailbox" : id
  }
  const [created, setCreated] = useState(/** @type {any} */ (null))
  const [error, setError] = useState(/** @type {unknown} */ (null))
  // The key being changed, if any.
  const [editing, setEditing] = useState(/** @type {string | null} */ (null))

  // A failed read (a 429 on the free plan, say) is said with when to try again; the list last read
  // stays, and "No keys yet." is said only of a list read empty.
  const [listFailure, setListFailure] = useState(/** @type {unknown} */ (null))
  const load = () =>
    call("GET", "/api/api-keys?limit=100").then(
      (answer) => (setKeys(answer.data), setListFailure(null)),
      setListFailure
    )
  useEffect(() => {
    load()
  }, [])

  /** @param {Event} event */
  const create = async (event) => {
    event.preventDefault()
    setError(null)
    try {
      const answer = await call("POST", "/api/api-keys", {
        name,
        ...(days === "" ? {} : { expirationDays: Number(days) }),
        ...(chosen.length === 0 ? {} : { mailboxIds: chosen }),
        ...(readOnly ? { permission: "read_only" } : {})
      })
      setCreated(answer.data)
      setName("")
      setDays("")
      setChosen([])
      setReadOnly(false)
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
      mailboxes you limit it to, or only reads: give each agent a key for its own mailbox, and no more than it needs.</p>
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
        <${MailboxChooser} legend="Limit to mailboxes (none checked: the whole account)" mailboxes=${mailboxes} chosen=${chosen}
          onChange=${setChosen} error=${fieldError(error, "mailboxIds")} />`}
      <${MailboxesUnread} failure=${choices.failure} onRetry=${choices.retry} />
      <${ReadOnlyChoice} id="key-read-only" checked=${readOnly} onChange=${setReadOnly} />
    </form>
    <${ErrorNote} error=${error} />
    ${created && html`
      <div class="card secret" role="status">
        <p><strong>${created.name}</strong>: copy this key now. It is shown only once.</p>
        <div class="copy-row"><code data-testid="new-key">${created.apiKey}</code><${CopyButton} text=${created.apiKey} label="Copy key" /></div>
        <button type="button" class="link" onClick=${() => setCreated(null)}>Done</button>
      </div>`}
    ${smtp && html`<${SmtpSettings} server=${smtp} />`}
    ${imap && html`<${ImapSettings} server=${imap} />`}
    ${listFailure && html`<${LoadFailed} error=${listFailure} onRetry=${() => (setListFailure(null), load())} retryName="Read the keys again" />`}
    ${keys === null ? (listFailure ? null : html`<p class="muted">Loading…</p>`) : keys.length === 0 ? (listFailure ? null : html`<p class="muted">No keys yet.</p>`) : html`
      <ul class="list">
        ${keys.map((key) => html`
          <li key=${key.keyId} class="item wrap">
            <div class="grow">
              <strong>${key.name}</strong> <code>${key.keyPrefix}…</code>${key.permission === "read_only" && html` <span class="tag">read only</span>`}
              <div class="muted small">${key.mailboxIds === null ? "Every mailbox" : "Only " + key.mailboxIds.map(addressOf).join(", ")} · Created ${when(key.createdAt)} · ${key.lastUsed ? "last used " + when(key.lastUsed) : "never used"}${
            key.expirationTs ? ` · ${Date.parse(key.expirationTs) <= Date.now() ? "expired" : "expires"} ${new Date(key.expirationTs).toLocaleDateString()}` : ""
          }</div>
            </div>
            <div class="actions">
              <button type="button" class="secondary" aria-expanded=${editing === key.keyId} onClick=${() => setEditing(editing === key.keyId ? null : key.keyId)}
                aria-label=${"Change " + key.name}>Change</button>
              <button type="button" class="danger" onClick=${() => revoke(key)} aria-label=${"Revoke " + key.name}>Revoke</button>
            </div>
            ${editing === key.keyId && html`
              <${KeyEditor} apiKey=${key} mailboxes=${mailboxes} onDone=${(/** @type {boolean} */ saved) => {
            setEditing(null)
            if (saved) load()
          }} />`}
          </li>`)}
      </ul>`}
  `
}
