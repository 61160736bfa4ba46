/**
 * Mailboxes: create with live feedback from check-email, rename (same check, the mailbox's own
 * address counted free), name (the display name its sent mail shows in From), delete after typing
 * the full address (SPEC: confirm_email_address).
 */
import { html } from "htm/preact"
import { useEffect, useState } from "preact/hooks"
import { allMailboxes, call, fieldError, query } from "./api.js"
import { addressShown, domainShown } from "./idn.js"
import { href } from "./router.js"
import { ErrorNote, Field, LoadFailed, when } from "./ui.js"

/** The longest display name the server takes (services/mailboxes/rules.ts). */
const MAX_DISPLAY_NAME = 100

/** The domains every account may use, as the server wrote them into the page. */
export const sharedDomains = () =>
  (document.querySelector('meta[name="mailroom-shared-domains"]')?.getAttribute("content") ?? "").split(",").filter(Boolean)

/**
 * check-email's verdict on what is typed, asked 250 ms after the typing stops.
 * @param {string} localPart @param {string} domain @param {string} [excludeMailboxId]
 * @returns {{ valid: boolean, message: string } | null}
 */
const useAddressCheck = (localPart, domain, excludeMailboxId) => {
  const [verdict, setVerdict] = useState(/** @type {{ valid: boolean, message: string } | null} */ (null))
  useEffect(() => {
    setVerdict(null)
    if (!localPart || !domain) return
    let live = true
    const timer = setTimeout(async () => {
      try {
        const path = "/api/mailboxes/check-email" + query({ local_part: localPart, domain, exclude_mailbox_id: excludeMailboxId })
        const answer = await call("GET", path)
        const result = answer.data ?? answer
        if (live) setVerdict(result.valid ? { valid: true, message: `${addressShown(result.email_address)} is available` } : { valid: false, message: result.message })
      } catch (failure) {
        if (live) setVerdict({ valid: false, message: failure instanceof Error ? failure.message : String(failure) })
      }
    }, 250)
    return () => {
      live = false
      clearTimeout(timer)
    }
  }, [localPart, domain, excludeMailboxId])
  return verdict
}

/**
 * @param {{ id: string, localPart: string, setLocalPart: (v: string) => void, domain: string, setDomain: (v: string) => void,
 *   verdict: { valid: boolean, message: string } | null, label: string, domains: string[] }} props
 */
const AddressFields = ({ id, localPart, setLocalPart, domain, setDomain, verdict, label, domains }) => html`
  <div class="address">
    <${Field} id=${id + "-local"} label=${label} value=${localPart} onInput=${setLocalPart} required
      ok=${verdict?.valid ? "✓ " + verdict.message : undefined} error=${verdict && !verdict.valid ? verdict.message : undefined} />
    <div class="field">
      <label for=${id + "-domain"}>Domain</label>
      <select id=${id + "-domain"} value=${domain} onChange=${(/** @type {any} */ e) => setDomain(e.currentTarget.value)}>
        ${domains.map((name) => html`<option value=${name}>@${domainShown(name)}</option>`)}
      </select>
    </div>
  </div>
`

/**
 * The display name: what the mailbox's sent mail shows beside its address in From.
 * @param {{ id: string, value: string, onInput: (v: string) => void, error: unknown }} props
 */
const NameField = ({ id, value, onInput, error }) => html`
  <${Field} id=${id} label="Name shown to recipients (optional)" value=${value} onInput=${onInput} autocomplete="off"
    hint=${[...value].length > MAX_DISPLAY_NAME ? undefined : "Sent mail reads From: Name <address>; leave empty for the address alone"}
    error=${[...value].length > MAX_DISPLAY_NAME ? `At most ${MAX_DISPLAY_NAME} characters` : fieldError(error, "display_name")} />
`

/** @param {{ onChanged: () => void, domains: string[] }} props */
const CreateMailbox = ({ onChanged, domains }) => {
  const [localPart, setLocalPart] = useState("")
  const [name, setName] = useState("")
  const [domain, setDomain] = useState(sharedDomains()[0] ?? "")
  const [error, setError] = useState(/** @type {unknown} */ (null))
  const verdict = useAddressCheck(localPart, domain)

  /** @param {Event} event */
  const create = async (event) => {
    event.preventDefault()
    setError(null)
    try {
      await call("POST", "/api/mailboxes", { local_part: localPart, domain, display_name: name })
      setLocalPart("")
      setName("")
      onChanged()
    } catch (failure) {
      setError(failure)
    }
  }
  return html`
    <form class="card" onSubmit=${create} aria-label="New mailbox">
      <${AddressFields} id="new" label="New mailbox address" ...${{ localPart, setLocalPart, domain, setDomain, verdict, domains }} />
      <${NameField} id="new-name" value=${name} onInput=${setName} error=${error} />
      <${ErrorNote} error=${error} />
      <button type="submit" disabled=${verdict?.valid !== true || [...name].length > MAX_DISPLAY_NAME}>Create mailbox</button>
    </form>
  `
}

/** @param {{ mailbox: any, onChanged: () => void, domains: string[] }} props */
const MailboxItem = ({ mailbox, onChanged, domains }) => {
  const [mode, setMode] = useState(/** @type {"view" | "rename" | "name" | "delete"} */ ("view"))
  const [name, setName] = useState(mailbox.display_name ?? "")
  const [localPart, setLocalPart] = useState(mailbox.email_address.split("@")[0])
  const [domain, setDomain] = useState(mailbox.domain)
  const [confirmation, setConfirmation] = useState("")
  const [error, setError] = useState(/** @type {unknown} */ (null))
  // The address it has now is no rename: nothing to ask the server, nothing to save.
  const unchanged = `${localPart}@${domain}`.toLowerCase() === mailbox.email_address.toLowerCase()
  const checked = useAddressCheck(mode === "rename" && !unchanged ? localPart : "", domain, mailbox.mailbox_id)
  const verdict = mode === "rename" && unchanged ? { valid: false, message: "This is the mailbox's address now: type the new one." } : checked
  const path = `/api/mailboxes/${encodeURIComponent(mailbox.mailbox_id)}`
  // Shown with an internationalized domain in Unicode (idn.js); deleting takes either spelling, and tells the server the stored one.
  const shown = addressShown(mailbox.email_address)
  const confirmed = confirmation === mailbox.email_address || confirmation === shown

  /** @param {() => Promise<unknown>} action */
  const run = async (action) => {
    setError(null)
    try {
      await action()
      setMode("view")
      onChanged()
    } catch (failure) {
      setError(failure)
    }
  }

  return html`
    <li class="item wrap">
      <div class="grow">
        <a href=${href("mailboxes", mailbox.mailbox_id)} title=${shown === mailbox.email_address ? undefined : mailbox.email_address}><strong>${shown}</strong></a>
        ${mailbox.display_name && html` <span class="muted">(<span dir="auto">${mailbox.display_name}</span>)</span>`}
        <div class="muted small">Created ${when(mailbox.created_at)}</div>
      </div>
      ${mode === "view" && html`
        <div class="actions">
          <button type="button" class="secondary" onClick=${() => setMode("rename")} aria-label=${"Rename " + shown}>Rename</button>
          <button type="button" class="secondary" onClick=${() => (setName(mailbox.display_name ?? ""), setMode("name"))}
            aria-label=${"Set the name of " + shown}>Name</button>
          <button type="button" class="danger" onClick=${() => setMode("delete")} aria-label=${"Delete " + shown}>Delete</button>
        </div>`}
      ${mode === "rename" && html`
        <form class="full" onSubmit=${(/** @type {Event} */ e) => (e.preventDefault(), run(() => call("PATCH", path, { local_part: localPart, domain })))}>
          <${AddressFields} id=${"rename-" + mailbox.mailbox_id} label="New address" ...${{ localPart, setLocalPart, domain, setDomain, verdict, domains }} />
          <${ErrorNote} error=${error} />
          <div class="actions">
            <button type="submit" disabled=${verdict?.valid !== true}>Save address</button>
            <button type="button" class="secondary" onClick=${() => setMode("view")}>Cancel</button>
          </div>
        </form>`}
      ${mode === "name" && html`
        <form class="full" onSubmit=${(/** @type {Event} */ e) => (e.preventDefault(), run(() => call("PATCH", path, { display_name: name })))}>
          <${NameField} id=${"name-" + mailbox.mailbox_id} value=${name} onInput=${setName} error=${error} />
          <${ErrorNote} error=${error} />
          <div class="actions">
            <button type="submit" disabled=${[...name].length > MAX_DISPLAY_NAME}>Save name</button>
            <button type="button" class="secondary" onClick=${() => setMode("view")}>Cancel</button>
          </div>
        </form>`}
      ${mode === "delete" && html`
        <form class="full" onSubmit=${(/** @type {Event} */ e) => (e.preventDefault(), run(() => call("DELETE", path, { confirm_email_address: confirmed ? mailbox.email_address : confirmation })))}>
          <p>Deleting hides the mailbox and all its mail. Type <strong>${shown}</strong> to confirm.</p>
          <${Field} id=${"confirm-" + mailbox.mailbox_id} label="Mailbox address" value=${confirmation} onInput=${setConfirmation} autocomplete="off" />
          <${ErrorNote} error=${error} />
          <div class="actions">
            <button type="submit" class="danger" disabled=${!confirmed}>Delete mailbox</button>
            <button type="button" class="secondary" onClick=${() => setMode("view")}>Cancel</button>
          </div>
        </form>`}
    </li>
  `
}

export const MailboxesPage = () => {
  const [mailboxes, setMailboxes] = useState(/** @type {any[] | null} */ (null))
  const [failure, setFailure] = useState(/** @type {unknown} */ (null))
  // The shared domains, then the account's verified own domains (once the list answers).
  const [domains, setDomains] = useState(sharedDomains)
  const [domainsFailure, setDomainsFailure] = useState(/** @type {unknown} */ (null))
  const load = () => allMailboxes().then((all) => (setMailboxes(all), setFailure(null)), setFailure)
  const loadDomains = () =>
    call("GET", "/api/domains").then(
      (answer) => (setDomains([...sharedDomains(), ...answer.data.filter((/** @type {any} */ d) => d.verified).map((/** @type {any} */ d) => d.domain_name)]), setDomainsFailure(null)),
      setDomainsFailure
    )
  useEffect(() => {
    load()
    loadDomains()
  }, [])
  return html`
    <h1>Mailboxes</h1>
    <${CreateMailbox} onChanged=${load} domains=${domains} />
    ${domainsFailure && html`<${LoadFailed} error=${domainsFailure} onRetry=${() => (setDomainsFailure(null), loadDomains())} />`}
    ${failure ? html`<${LoadFailed} error=${failure} onRetry=${() => (setFailure(null), load())} />` : mailboxes === null ? html`<p class="muted">Loading…</p>` : mailboxes.length === 0
      ? html`<p class="muted">No mailboxes yet: create one above, then give its address to your agent.</p>`
      : html`<ul class="list" aria-label="Mailboxes">${mailboxes.map((mailbox) => html`<${MailboxItem} key=${mailbox.mailbox_id} mailbox=${mailbox} onChanged=${load} domains=${domains} />`)}</ul>`}
  `
}
