/**
 * Custom domains: add one (its DNS records shown with copy buttons), verify it (what was found, or
 * what to publish), choose where mail to its addresses that no mailbox has goes (its catch-all), migrate
 * its mailboxes to another domain (a dry run first: every address before and after, renames marked;
 * then the move), delete it. Whether the plan allows another comes from the list's meta.
 */
import { html } from "htm/preact"
import { useEffect, useState } from "preact/hooks"
import { allMailboxes, ApiError, call } from "./api.js"
import { sharedDomains } from "./mailboxes.js"
import { CopyButton, ErrorNote, Field, LoadFailed, useReloading, when } from "./ui.js"

/** @param {{ migration: any }} props */
const Mappings = ({ migration }) => html`
  <table class="deliveries" aria-label=${migration.dry_run ? "Migration preview" : "Migrated mailboxes"}>
    <thead><tr><th scope="col">Mailbox</th><th scope="col">${migration.dry_run ? "Would become" : "Now"}</th><th scope="col"></th></tr></thead>
    <tbody>
      ${migration.migrations.map((/** @type {any} */ m) => html`
        <tr key=${m.mailbox_id}><td>${m.from_email}</td><td><strong>${m.to_email}</strong></td>
          <td>${m.renamed && html`<span class="tag" title="The address was taken on the target domain: a suffix was added">renamed</span>`}</td></tr>`)}
    </tbody>
  </table>
`

/**
 * Moving every mailbox of `domain` to another domain: preview (dry run), then apply what was previewed.
 * @param {{ domain: any, others: string[], run: (action: () => Promise<unknown>) => Promise<void>, onClose: () => void }} props
 */
const Migrate = ({ domain, others, run, onClose }) => {
  const [target, setTarget] = useState(others[0] ?? "")
  const [result, setResult] = useState(/** @type {any} */ (null))
  const [error, setError] = useState(/** @type {unknown} */ (null))
  const path = `/api/domains/${encodeURIComponent(domain.domain_id)}/migrate-mailboxes`
  /** @param {boolean} dryRun */
  const migrate = (dryRun) =>
    run(async () => {
      setError(null)
      try {
        setResult((await call("POST", path, { target_domain: target, dry_run: dryRun })).data)
      } catch (failure) {
        setResult(null)
        setError(failure)
      }
    })
  const previewed = result?.dry_run === true
  return html`
    <form class="full card migration" aria-label=${"Migrate mailboxes of " + domain.domain_name}
      onSubmit=${(/** @type {Event} */ e) => (e.preventDefault(), migrate(true))}>
      <div class="field">
        <label for=${"target-" + domain.domain_id}>Move every mailbox of ${domain.domain_name} to</label>
        <select id=${"target-" + domain.domain_id} value=${target}
          onChange=${(/** @type {any} */ e) => (setTarget(e.currentTarget.value), setResult(null))}>
          ${others.map((name) => html`<option value=${name}>@${name}</option>`)}
        </select>
      </div>
      <p class="muted small">Mailboxes keep their ids and mail; an address already taken on the target gets a short suffix.</p>
      <div class="actions">
        <button type="submit" class="secondary">Preview</button>
        ${previewed && result.migrated_count > 0 && html`
          <button type="button" onClick=${() => migrate(false)}>
            Migrate ${result.migrated_count} ${result.migrated_count === 1 ? "mailbox" : "mailboxes"}</button>`}
        <button type="button" class="link" onClick=${onClose}>Close</button>
      </div>
      <${ErrorNote} error=${error} />
      ${result && html`
        <p role="status">${result.dry_run
          ? result.migrated_count === 0
            ? "No mailbox uses this domain: nothing to migrate."
            : `Dry run: ${result.migrated_count} ${result.migrated_count === 1 ? "mailbox" : "mailboxes"} would move, ${result.renamed_count} renamed. Nothing has changed yet.`
          : `Migrated ${result.migrated_count} ${result.migrated_count === 1 ? "mailbox" : "mailboxes"} to ${target}, ${result.renamed_count} renamed.`}</p>
        ${result.migrated_count > 0 && html`<${Mappings} migration=${result} />`}`}
    </form>
  `
}

/** @param {{ domain: any }} props */
const Records = ({ domain }) => html`
  <div class="table-scroll">
  <table class="deliveries dns-records" aria-label=${"DNS records of " + domain.domain_name}>
    <thead><tr><th scope="col">Type</th><th scope="col">Name</th><th scope="col">Value</th><th scope="col"></th></tr></thead>
    <tbody>
      ${domain.dns_records.map((/** @type {any} */ r) => html`
        <tr><td>${r.type}</td><td><code>${r.name}</code></td>
          <td><code>${r.priority !== undefined ? r.priority + " " : ""}${r.value}</code></td>
          <td><${CopyButton} text=${r.value} name=${`Copy ${r.type} ${r.name} ${r.value.split(" ")[0].slice(0, 40)}`} /></td></tr>`)}
    </tbody>
  </table>
  </div>
`

/**
 * Where mail to a verified domain's addresses that no mailbox has goes: refused, or one of the account's mailboxes.
 * @param {{ domain: any, mailboxes: any[], run: (action: () => Promise<unknown>) => Promise<void> }} props
 */
const CatchAll = ({ domain, mailboxes, run }) => html`
  <div class="field catch-all">
    <label for=${"catch-all-" + domain.domain_id}>Mail to other addresses of ${domain.domain_name}</label>
    <select id=${"catch-all-" + domain.domain_id} value=${domain.catch_all_mailbox_id ?? ""}
      onChange=${(/** @type {any} */ e) => run(() =>
        call("PATCH", `/api/domains/${encodeURIComponent(domain.domain_id)}`, { catch_all_mailbox_id: e.currentTarget.value || null }))}>
      <option value="">is refused</option>
      ${mailboxes.map((m) => html`<option value=${m.mailbox_id}>goes to ${m.email_address}</option>`)}
    </select>
  </div>
`

/** A message as a sentence of a paragraph: ended with a full stop when it has none. @param {string} text */
const sentence = (text) => (/[.!?]$/.test(text) ? text : `${text}.`)

/** @param {boolean} ok @param {string} what */
const check = (ok, what) => html`<span class=${ok ? "tag succeeded" : "tag"}>${ok ? "✓" : "✗"} ${what}</span> `

export const DomainsPage = () => {
  const [domains, setDomains] = useState(/** @type {any[] | null} */ (null))
  const [meta, setMeta] = useState(/** @type {any} */ (null))
  const [name, setName] = useState("")
  const [created, setCreated] = useState(/** @type {any} */ (null))
  const [verdicts, setVerdicts] = useState(/** @type {Record<string, any>} */ ({}))
  const [migrating, setMigrating] = useState(/** @type {string | null} */ (null))
  const { error, failure, retry, run } = useReloading((isCurrent) =>
    call("GET", "/api/domains").then((a) => isCurrent() && (setDomains(a.data), setMeta(a.meta))))
  // The mailboxes a verified domain's catch-all may choose, read once there is such a domain; without them
  // the choice is not offered (the page works on).
  const [mailboxes, setMailboxes] = useState(/** @type {any[] | null} */ (null))
  const anyVerified = domains?.some((d) => d.verified) === true
  useEffect(() => {
    if (anyVerified && mailboxes === null) allMailboxes().then(setMailboxes, () => setMailboxes(null))
  }, [anyVerified])

  /** @param {any} domain */
  const verify = (domain) =>
    run(async () => {
      try {
        await call("POST", `/api/domains/${encodeURIComponent(domain.domain_id)}/verify`)
        setVerdicts({ ...verdicts, [domain.domain_id]: { ok: true } })
      } catch (refusal) {
        // Said beside the domain: no TXT record yet, or another account verified the name first (CONFLICT).
        if (!(refusal instanceof ApiError) || !["VERIFICATION_FAILED", "CONFLICT"].includes(refusal.code)) throw refusal
        setVerdicts({ ...verdicts, [domain.domain_id]: { ok: false, message: refusal.message, details: refusal.details } })
      }
    })

  const canAdd = meta?.can_add_domain === true
  return html`
    <h1>Custom domains</h1>
    <p class="muted">Receive mail at your own domain: publish the records shown, then verify.</p>
    <form class="card row-form" aria-label="New domain"
      onSubmit=${(/** @type {Event} */ e) => (e.preventDefault(), run(async () => (setCreated((await call("POST", "/api/domains", { domain: name })).data), setName(""))))}>
      <${Field} id="domain-name" label="Domain" value=${name} onInput=${setName} required
        hint=${meta && !canAdd ? `Your ${meta.plan} plan allows ${meta.domain_limit} custom domain${meta.domain_limit === 1 ? "" : "s"}: upgrade to add one.` : undefined} />
      <button type="submit" disabled=${!canAdd}>Add domain</button>
    </form>
    <${ErrorNote} error=${error} />
    ${created && html`
      <div class="card secret" role="status">
        <p>Added <strong>${created.domain_name}</strong>: publish its DNS records (below) at its DNS host, then press Verify.</p>
        <button type="button" class="link" onClick=${() => setCreated(null)}>Done</button>
      </div>`}
    ${failure ? html`<${LoadFailed} error=${failure} onRetry=${retry} />` : domains === null ? html`<p class="muted">Loading…</p>` : domains.length === 0 ? html`<p class="muted">No custom domains.</p>` : html`
      <ul class="list">
        ${domains.map((d) => {
          const verdict = verdicts[d.domain_id]
          return html`
            <li key=${d.domain_id} class="item wrap">
              <div class="grow">
                <strong>${d.domain_name}</strong> <span class="muted small">added ${when(d.created_at)} · ${d.mailbox_count} mailboxes</span>
                <div>${check(d.verified, "ownership (TXT)")}${check(d.mx_configured, "MX")}${check(d.spf_configured, "SPF")}${check(d.dkim_configured, "DKIM")}${check(d.dmarc_configured, "DMARC")}</div>
                ${d.verified && !d.receives_mail && html`<p class="note error">Not receiving: the free plan does not include custom domains, so mail to this domain is refused for now (senders retry) until you upgrade.</p>`}
              </div>
              <div class="actions">
                <button type="button" class="secondary" onClick=${() => verify(d)}>Verify</button>
                <button type="button" class="secondary" aria-expanded=${migrating === d.domain_id} aria-label=${"Migrate mailboxes of " + d.domain_name}
                  onClick=${() => setMigrating(migrating === d.domain_id ? null : d.domain_id)}>Migrate mailboxes</button>
                <button type="button" class="danger" aria-label=${"Delete " + d.domain_name}
                  onClick=${() => confirm(`Delete ${d.domain_name}?`) && run(() => call("DELETE", `/api/domains/${encodeURIComponent(d.domain_id)}`))}>Delete</button>
              </div>
              <div class="full">
                ${verdict && (verdict.ok
                  ? html`<p class="note" role="status">Verified.</p>`
                  : html`<p class="note error" role="status">${sentence(verdict.message)}${verdict.details?.instructions ? " " + verdict.details.instructions : ""}</p>`)}
                <details class="small" open=${!(d.verified && d.mx_configured && d.spf_configured && d.dkim_configured && d.dmarc_configured)}>
                  <summary>DNS records</summary>
                  <${Records} domain=${d} />
                </details>
                ${d.verified && mailboxes && html`<${CatchAll} domain=${d} mailboxes=${mailboxes} run=${run} />`}
              </div>
              ${migrating === d.domain_id && html`
                <${Migrate} domain=${d} run=${run} onClose=${() => setMigrating(null)}
                  others=${[...sharedDomains(), ...domains.map((o) => o.domain_name)].filter((name) => name !== d.domain_name)} />`}
            </li>`
        })}
      </ul>`}
  `
}
