/** Billing: the plan and its period, usage against the plan's limits as bars, checkout to upgrade, the portal. */
import { html } from "htm/preact"
import { useEffect, useState } from "preact/hooks"
import { call } from "./api.js"
import { href } from "./router.js"
import { ErrorNote, size } from "./ui.js"

/** The plans from the least to the most: only those above the current one are offered as upgrades. */
const PLANS = /** @type {const} */ (["free", "pro", "enterprise"])
/** @param {string} plan */
const upgradesFrom = (plan) => {
  const rank = PLANS.indexOf(/** @type {any} */ (plan))
  return rank < 0 ? [] : PLANS.slice(rank + 1)
}
/** @param {string} plan */
const title = (plan) => plan[0].toUpperCase() + plan.slice(1)

/** @param {{ label: string, used: number, limit: number, format?: (n: number) => string }} props */
const Meter = ({ label, used, limit, format = (n) => n.toLocaleString() }) => html`
  <div class="meter">
    <div class="meter-label"><span>${label}</span>
      <span class="muted small">${format(used)} of ${limit < 0 ? "unlimited" : format(limit)}</span></div>
    ${limit >= 0 && html`<progress max=${limit} value=${Math.min(used, limit)} aria-label=${label}>${used}</progress>`}
  </div>
`

export const BillingPage = () => {
  const [subscription, setSubscription] = useState(/** @type {any} */ (null))
  const [usage, setUsage] = useState(/** @type {any} */ (null))
  const [error, setError] = useState(/** @type {unknown} */ (null))
  useEffect(() => {
    call("GET", "/api/billing/subscription").then((a) => setSubscription(a.data), setError)
    call("GET", "/api/billing/usage").then((a) => setUsage(a.data), setError)
  }, [])

  const back = location.origin + "/" + href("billing")
  /** @param {string} path @param {unknown} body */
  const leaveFor = async (path, body) => {
    setError(null)
    try {
      location.href = (await call("POST", path, body)).data.url
    } catch (failure) {
      setError(failure)
    }
  }

  return html`
    <h1>Billing</h1>
    <${ErrorNote} error=${error} />
    ${subscription && html`
      <section class="card">
        <h2>Plan: ${title(subscription.plan)}</h2>
        <p class="muted">${subscription.status}; this period ends ${new Date(subscription.currentPeriodEnd).toLocaleDateString()}
          ${subscription.cancelAtPeriodEnd ? " (cancels then)" : ""}</p>
        <div class="actions">
          ${upgradesFrom(subscription.plan).map((plan) => html`
            <button type="button" onClick=${() => leaveFor("/api/billing/checkout", { plan, successUrl: back, cancelUrl: back })}>Upgrade to ${title(plan)}</button>`)}
          ${subscription.plan !== "free" && html`
            <button type="button" class="secondary" onClick=${() => leaveFor("/api/billing/portal", { returnUrl: back })}>Manage in the billing portal</button>`}
        </div>
      </section>`}
    ${usage && html`
      <section class="card">
        <h2>Usage this period</h2>
        <${Meter} label="Emails received" used=${usage.emailsUsed} limit=${usage.emailsLimit} />
        <${Meter} label="Emails sent" used=${usage.emailsSent} limit=${usage.emailsSentLimit} />
        <${Meter} label="Searches" used=${usage.searchesUsed} limit=${usage.searchesLimit} />
        <${Meter} label="Storage" used=${usage.storageUsed} limit=${usage.storageLimit} format=${size} />
      </section>`}
  `
}
