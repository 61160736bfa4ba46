/**
 * Webhooks: create (for every mailbox or some; the signing secret shown once), enable or disable,
 * delete, send a test event, and each delivery with its attempts (a finished one sent again).
 */
import { html } from "htm/preact"
import { useEffect, useState } from "preact/hooks"
import { call, fieldError, fieldErrorWithin, query } from "./api.js"
import { CopyButton, ErrorNote, Field, LoadFailed, MailboxChooser, MailboxesUnread, useAction, useMailboxChoices, useReloading, when } from "./ui.js"
import { addressShown } from "./idn.js"

/** The kinds of event a webhook may take, as the server wrote them into the page (services/webhooks/schemas.ts). */
const kinds = () => (document.querySelector('meta[name="mailroom-event-kinds"]')?.getAttribute("content") ?? "").split(",").filter(Boolean)

/** @param {any} answer an attempt's outcome: status_code, duration_ms, error */
const outcomeOf = (answer) => answer.status_code === null ? `${answer.error} after ${answer.duration_ms} ms` : `answered ${answer.status_code} in ${answer.duration_ms} ms`

/**
 * An example event of one of the webhook's kinds posted to it now, and what the endpoint answered.
 * @param {{ webhook: any }} props
 */
const TestEvent = ({ webhook }) => {
  const [kind, setKind] = useState(webhook.events[0])
  const [result, setResult] = useState(/** @type {any} */ (null))
  const { busy, error, run } = useAction()
  const send = () => run(async () => setResult((await call("POST", `/api/webhooks/${encodeURIComponent(webhook.webhook_id)}/test${query({ event: kind })}`)).data))
  return html`
    <div class="full inline-form">
      ${webhook.events.length > 1 && html`
        <select aria-label=${"Test event kind for webhook " + webhook.url} value=${kind} onChange=${(/** @type {any} */ e) => setKind(e.currentTarget.value)}>
          ${webhook.events.map((/** @type {string} */ k) => html`<option value=${k}>${k}</option>`)}
        </select>`}
      <button type="button" class="secondary" disabled=${busy} aria-label=${"Send a test event to webhook " + webhook.url} onClick=${send}>Send test event</button>
      <span role="status" class=${result && !result.succeeded ? "note error" : "note"}>${result &&
        `Test ${result.event}: ${result.succeeded ? "" : "failed, "}${outcomeOf(result)}`}</span>
      <${ErrorNote} error=${error} />
    </div>
  `
}

/** @param {{ webhook: any }} props */
const Deliveries = ({ webhook }) => {
  const [deliveries, setDeliveries] = useState(/** @type {any[] | null} */ (null))
  const [error, setError] = useState(/** @type {unknown} */ (null))
  const { busy, error: resendError, run } = useAction()
  const base = `/api/webhooks/${encodeURIComponent(webhook.webhook_id)}/deliveries`
  const load = () => call("GET", `${base}?limit=20`).then((a) => setDeliveries(a.data), setError)
  useEffect(() => {
    load()
  }, [webhook.webhook_id])
  /** One more attempt of a finished delivery; its row becomes the answer. @param {string} id */
  const resend = (id) =>
    run(async () => {
      const resent = (await call("POST", `${base}/${encodeURIComponent(id)}/resend`)).data
      setDeliveries((shown) => (shown ?? []).map((d) => (d.delivery_id === id ? resent : d)))
    })
  return html`
    <div class="full">
      <div class="toolbar"><h3 class="small">Deliveries</h3><button type="button" class="link" onClick=${load}>Refresh</button></div>
      <${ErrorNote} error=${error ?? resendError} />
      ${deliveries === null ? html`<p class="muted small">Loading…</p>` : deliveries.length === 0
        ? html`<p class="muted small">No deliveries yet.</p>`
        : html`
          <table class="deliveries">
            <thead><tr><th scope="col">Event</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Created</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
            <tbody>
              ${deliveries.map((d) => html`
                <tr key=${d.delivery_id}>
                  <td><code>${d.event}</code></td>
                  <td><span class=${"tag " + d.status}>${d.status}</span></td>
                  <td>${d.attempts.map((/** @type {any} */ a) => html`<div class="small">#${a.attempt}: ${a.status_code ?? "no answer"}, ${a.duration_ms} ms${a.error ? " · " + a.error : ""}</div>`)}</td>
                  <td class="small">${when(d.created_at)}</td>
                  <td>${d.status !== "pending" && webhook.active && html`
                    <button type="button" class="link" disabled=${busy} aria-label=${`Send the ${d.event} delivery of ${when(d.created_at)} again`}
                      onClick=${() => resend(d.delivery_id)}>Send again</button>`}</td>
                </tr>`)}
            </tbody>
          </table>`}
    </div>
  `
}

export const WebhooksPage = () => {
  const [webhooks, setWebhooks] = useState(/** @type {any[] | null} */ (null))
  const [url, setUrl] = useState("")
  const [events, setEvents] = useState(["email.received"])
  // The account's mailboxes (for choosing some), and those chosen: none is every mailbox.
  const choices = useMailboxChoices()
  const { mailboxes } = choices
  const [chosen, setChosen] = useState(/** @type {string[]} */ ([]))
  // Labels the mail must carry (comma-separated; empty: any mail).
  const [labels, setLabels] = useState("")
  /** @param {string} id */
  const addressOf = (id) => {
    const found = mailboxes.find((m) => m.mailbox_id === id)
    return found ? addressShown(found.email_address) : id
  }
  const [created, setCreated] = useState(/** @type {any} */ (null))
  const [open, setOpen] = useState(/** @type {string | null} */ (null))
  const { error, failure, retry, run } = useReloading((isCurrent) =>
    call("GET", "/api/webhooks?limit=100").then((a) => isCurrent() && setWebhooks(a.data)))

  /** @param {Event} event */
  const create = (event) => {
    event.preventDefault()
    return run(async () => {
      const only = labels.split(",").map((label) => label.trim()).filter((label) => label !== "")
      setCreated((await call("POST", "/api/webhooks", { url, events, mailbox_ids: chosen.length > 0 ? chosen : null, labels: only.length > 0 ? only : null })).data)
      setUrl("")
      setChosen([])
      setLabels("")
    })
  }

  /** @param {string} kind @param {boolean} on */
  const toggleKind = (kind, on) => setEvents(on ? [...events, kind] : events.filter((k) => k !== kind))

  return html`
    <h1>Webhooks</h1>
    <form class="card" onSubmit=${create} aria-label="New webhook">
      <${Field} id="webhook-url" label="Endpoint URL" type="url" value=${url} onInput=${setUrl} required
        hint="HTTPS; each delivery is signed with the endpoint's secret" error=${fieldError(error, "url")} />
      <fieldset class="kinds">
        <legend>Events</legend>
        ${kinds().map((kind) => html`
          <label class="check"><input type="checkbox" checked=${events.includes(kind)}
            onChange=${(/** @type {any} */ e) => toggleKind(kind, e.currentTarget.checked)} /> <code>${kind}</code></label>`)}
      </fieldset>
      ${mailboxes.length > 1 && html`
        <${MailboxChooser} legend="Mailboxes (none checked: every mailbox)" mailboxes=${mailboxes} chosen=${chosen} onChange=${setChosen}
          error=${fieldError(error, "mailbox_ids")} />`}
      <${MailboxesUnread} failure=${choices.failure} onRetry=${choices.retry} />
      <${Field} id="webhook-labels" label="Only mail labelled (optional)" value=${labels} onInput=${setLabels}
        hint="Comma-separated: events about an email carrying one of these labels (a filter's billing, say); empty: all mail"
        error=${fieldErrorWithin(error, "labels")} />
      <button type="submit" disabled=${events.length === 0}>Create webhook</button>
    </form>
    <${ErrorNote} error=${error} />
    ${created && html`
      <div class="card secret" role="status">
        <p>Signing secret for <code>${created.url}</code>: copy it now. It is shown only once.</p>
        <div class="copy-row"><code data-testid="new-secret">${created.secret}</code><${CopyButton} text=${created.secret} label="Copy secret" /></div>
        <button type="button" class="link" onClick=${() => setCreated(null)}>Done</button>
      </div>`}
    ${failure ? html`<${LoadFailed} error=${failure} onRetry=${retry} />` : webhooks === null ? html`<p class="muted">Loading…</p>` : webhooks.length === 0 ? html`<p class="muted">No webhooks yet.</p>` : html`
      <ul class="list">
        ${webhooks.map((w) => html`
          <li key=${w.webhook_id} class="item wrap">
            <div class="grow">
              <strong><code>${w.url}</code></strong> <span class="tag">${w.active ? "enabled" : "disabled"}</span>${w.held_by_plan && html` <span class="tag">held by plan</span>`}
              <div class="muted small">${w.events.join(", ")} · ${w.mailbox_ids === null ? "every mailbox" : "only " + w.mailbox_ids.map(addressOf).join(", ")}${
  w.labels === null ? "" : " · mail labelled " + w.labels.join(" or ")
} · secret ${w.secret_masked}</div>
              ${w.held_by_plan && html`<p class="note error">Not delivering: the account has more active webhooks than its plan allows, and only the oldest are sent events. This one delivers again once you upgrade, or delete or disable an older one.</p>`}
            </div>
            <div class="actions">
              <button type="button" class="secondary" aria-expanded=${open === w.webhook_id} aria-label=${"Deliveries of webhook " + w.url}
                onClick=${() => setOpen(open === w.webhook_id ? null : w.webhook_id)}>Deliveries</button>
              <button type="button" class="secondary" aria-label=${(w.active ? "Disable" : "Enable") + " webhook " + w.url}
                onClick=${() => run(() => call("PATCH", `/api/webhooks/${encodeURIComponent(w.webhook_id)}`, { active: !w.active }))}>
                ${w.active ? "Disable" : "Enable"}</button>
              <button type="button" class="danger" aria-label=${"Delete webhook " + w.url}
                onClick=${() => confirm(`Delete the webhook to ${w.url}?`) && run(() => call("DELETE", `/api/webhooks/${encodeURIComponent(w.webhook_id)}`))}>Delete</button>
            </div>
            <${TestEvent} webhook=${w} />
            ${open === w.webhook_id && html`<${Deliveries} webhook=${w} />`}
          </li>`)}
      </ul>`}
  `
}
