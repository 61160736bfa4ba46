/**
 * Custom domains: add one (its DNS records shown with copy buttons), verify it (what was found, or
 * what to publish), delete it. Whether the plan allows another comes from the list's meta.
 */
import { html } from "htm/preact"
import { useState } from "preact/hooks"
import { ApiError, call } from "./api.js"
import { CopyButton, ErrorNote, Field, useReloading, when } from "./ui.js"

/** @param {{ records: any[] }} props */
const Records = ({ records }) => html`
  <table class="deliveries" aria-label="DNS records to publish">
    <thead><tr><th scope="col">Type</th><th scope="col">Name</th><th scope="col">Value</th><th scope="col"></th></tr></thead>
    <tbody>
      ${records.map((r) => html`
        <tr><td>${r.type}</td><td><code>${r.name}</code></td>
          <td><code>${r.priority !== undefined ? r.priority + " " : ""}${r.value}</code></td>
          <td><${CopyButton} text=${r.value} label=${`Copy ${r.type} ${r.name}`} /></td></tr>`)}
    </tbody>
  </table>
`

/** @param {boolean} ok @param {string} what */
const check = (ok, what) => html`<span class=${ok ? "tag succeeded" : "tag"}>${ok ? "✓" : "✗"} ${what}</span> `

export const DomainsPage = () => {
  const [domains, setDomains] = useState(/** @type {any[] | null} */ (null))
  const [meta, setMeta] = useState(/** @type {any} */ (null))
  const [name, setName] = useState("")
  const [created, setCreated] = useState(/** @type {any} */ (null))
  const [verdicts, setVerdicts] = useState(/** @type {Record<string, any>} */ ({}))
  const { error, run } = useReloading(() => call("GET", "/api/domains").then((a) => (setDomains(a.data), setMeta(a.meta))))

  /** @param {any} domain */
  const verify = (domain) =>
    run(async () => {
      try {
        await call("POST", `/api/domains/${encodeURIComponent(domain.domain_id)}/verify`)
        setVerdicts({ ...verdicts, [domain.domain_id]: { ok: true } })
      } catch (failure) {
        if (!(failure instanceof ApiError) || failure.code !== "VERIFICATION_FAILED") throw failure
        setVerdicts({ ...verdicts, [domain.domain_id]: { ok: false, message: failure.message, details: failure.details } })
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
        <p>Publish these records at <strong>${created.domain_name}</strong>'s DNS host, then press Verify.</p>
        <div class="full"><${Records} records=${created.dns_records} /></div>
        <button type="button" class="link" onClick=${() => setCreated(null)}>Done</button>
      </div>`}
    ${domains === null ? html`<p class="muted">Loading…</p>` : domains.length === 0 ? html`<p class="muted">No custom domains.</p>` : html`
      <ul class="list">
        ${domains.map((d) => {
          const verdict = verdicts[d.domain_id]
          return html`
            <li key=${d.domain_id} class="item wrap">
              <div class="grow">
                <strong>${d.domain_name}</strong> <span class="muted small">added ${when(d.created_at)} · ${d.mailbox_count} mailboxes</span>
                <div>${check(d.verified, "ownership (TXT)")}${check(d.mx_configured, "MX")}${check(d.spf_configured, "SPF")}${check(d.dkim_configured, "DKIM")}</div>
                <div class="small">TXT <code>${d.verification_token}</code> <${CopyButton} text=${d.verification_token} label="Copy TXT" /></div>
                ${verdict && (verdict.ok
                  ? html`<p class="note" role="status">Verified.</p>`
                  : html`<p class="note error" role="status">${verdict.message}${verdict.details?.instructions ? " " + verdict.details.instructions : ""}</p>`)}
              </div>
              <div class="actions">
                <button type="button" class="secondary" onClick=${() => verify(d)}>Verify</button>
                <button type="button" class="danger" aria-label=${"Delete " + d.domain_name}
                  onClick=${() => confirm(`Delete ${d.domain_name}?`) && run(() => call("DELETE", `/api/domains/${encodeURIComponent(d.domain_id)}`))}>Delete</button>
              </div>
            </li>`
        })}
      </ul>`}
  `
}
