/**
 * Billing: the plan and its period, usage against the plan's limits as bars, checkout to upgrade, the
 * portal. A limit reached says what the server refuses now and until when; one nearly reached (80%) warns.
 */
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

/** The share of a limit used from which the page warns. */
const NEAR = 0.8

/** A moment as the page says it: date and time, in the browser's zone. @param {string} iso */
const moment = (iso) => new Date(iso).toLocaleString([], { dateStyle: "medium", timeStyle: "short" })

/**
 * @typedef {{ id: string, label: string, used: number, limit: number, format?: (n: number) => string,
 *   refused: string, told: string, until?: string, because?: string, shadowed?: boolean, before?: string }} Limit
 */

/**
 * The limits the server holds the account to, each with what it refuses once the limit is reached (as
 * the server does it: services/mail/inbound.ts and refusals.ts for received mail, outbound/send.ts and
 * submission.ts for sends, search/search.ts for searches) and when it starts counting again. The
 * period's limit of received mail (or sends) is judged before the day's, as the server judges them: the
 * day's says nothing while the period's is reached (`shadowed`), its refusal being the period's. Storage
 * is judged against what a message would add where its size is known (`before`): a send's or a draft's
 * copy (outbound/send.ts, drafts.ts), received mail whose sender declares its size at MAIL FROM
 * (inbound.ts `admit`); other received mail is refused only once storage is full.
 * @param {any} usage
 * @returns {Array<Limit>}
 */
const limitsOf = (usage) => {
  // Delivery reports on mail the account sent are taken whatever its counts (inbound.ts bounceRecipient).
  const inbound = "Mail sent to any of your mailboxes (delivery reports on mail you sent aside) is refused"
  const receivedPeriodReached = usage.emailsLimit >= 0 && usage.emailsUsed >= usage.emailsLimit
  const sentPeriodReached = usage.emailsSentLimit >= 0 && usage.emailsSent >= usage.emailsSentLimit
  const untilPeriodEnd = `until this billing period ends, ${moment(usage.periodEnd)}`
  const untilDayEnd = `until the day ends at midnight UTC, ${moment(usage.dayEnd)}`
  return [
    {
      id: "received-period",
      label: "Emails received",
      used: usage.emailsUsed,
      limit: usage.emailsLimit,
      refused: inbound,
      told: "Sending servers are answered 552 5.2.2, a permanent refusal: they do not try again, and return the mail to its sender as undelivered.",
      until: untilPeriodEnd
    },
    {
      id: "received-day",
      label: "Emails received today",
      used: usage.emailsToday,
      limit: usage.emailsDailyLimit,
      shadowed: receivedPeriodReached,
      refused: inbound,
      told: "Sending servers are answered 452 4.2.2, to try again later: most keep the mail and try again, so it can arrive after then.",
      until: untilDayEnd
    },
    {
      id: "sent-period",
      label: "Emails sent",
      used: usage.emailsSent,
      limit: usage.emailsSentLimit,
      refused: "Sending from your mailboxes is refused",
      told: "The API answers 403 SEND_QUOTA, SMTP submission 550 5.4.5.",
      until: untilPeriodEnd
    },
    {
      id: "sent-day",
      label: "Emails sent today",
      used: usage.emailsSentToday,
      limit: usage.emailsSentDailyLimit,
      shadowed: sentPeriodReached,
      refused: "Sending from your mailboxes is refused",
      told: "The API answers 403 SEND_QUOTA, SMTP submission 550 5.4.5.",
      until: untilDayEnd
    },
    {
      id: "searches",
      label: "Searches",
      used: usage.searchesUsed,
      limit: usage.searchesLimit,
      refused: "Searches are refused",
      told: "The API answers 403 SEARCH_QUOTA.",
      until: untilPeriodEnd
    },
    {
      id: "storage",
      label: "Storage",
      used: usage.storageUsed,
      limit: usage.storageLimit,
      format: size,
      refused: `${inbound}, and so are sends and new drafts (their copies are stored too)`,
      told: "Sending servers are answered 452 4.2.2 (mailbox full) and keep trying for a while; the API answers 403 STORAGE_QUOTA, SMTP submission 552 5.2.2.",
      because: "until deleted mail, drafts or mailboxes make room",
      before: "Before then, a send or a draft whose stored copy would not fit in what is left is refused already (403 STORAGE_QUOTA; " +
        "SMTP submission 552 5.2.2), and so is received mail whose sending server announces a size that would not fit (452 4.2.2)."
    }
  ]
}

/**
 * A limit's bar, and what it means now: reached, what is refused and until when; nearly reached, a warning.
 * @param {{ item: Limit, upgrade?: { plan: string, go: () => void } }} props
 */
const Meter = ({ item, upgrade }) => {
  const { label, used, limit, format = (n) => n.toLocaleString() } = item
  const reached = !item.shadowed && limit >= 0 && used >= limit
  const near = !item.shadowed && !reached && limit > 0 && used >= NEAR * limit
  const until = item.until ?? item.because
  const offer = upgrade && html` Upgrading lifts it at once: <button type="button" class="link" onClick=${upgrade.go}>Upgrade to ${title(upgrade.plan)} now</button>`
  return html`
    <div class="meter">
      <div class="meter-label"><span>${label}</span>
        <span class="muted small">${format(used)} of ${limit < 0 ? "unlimited" : format(limit)}</span></div>
      ${limit >= 0 && html`<progress max=${limit} value=${Math.min(used, limit)} aria-label=${label}>${used}</progress>`}
      ${reached && html`
        <p class="alert" role="alert" data-limit=${item.id}><strong>Limit reached: ${label.toLowerCase()}, ${format(used)} of ${format(limit)}.</strong>
          ${" "}${item.refused} ${until}. ${item.told}${offer}</p>`}
      ${near && html`
        <p class="notice" data-limit=${item.id}><span>Nearly at the limit: ${label.toLowerCase()}, ${format(used)} of ${format(limit)} (${Math.floor((used / limit) * 100)}%).
          At ${format(limit)}, ${item.refused.charAt(0).toLowerCase()}${item.refused.slice(1)} ${until}.${item.before && ` ${item.before}`}${offer}</span></p>`}
    </div>
  `
}

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
  /** @param {string} plan */
  const checkout = (plan) => leaveFor("/api/billing/checkout", { plan, successUrl: back, cancelUrl: back })
  // The next plan up raises every limit (free to pro starts a new period too): offered beside a limit reached or near.
  const next = subscription ? upgradesFrom(subscription.plan)[0] : undefined
  const upgrade = next && { plan: next, go: () => checkout(next) }

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
            <button type="button" onClick=${() => checkout(plan)}>Upgrade to ${title(plan)}</button>`)}
          ${subscription.plan !== "free" && html`
            <button type="button" class="secondary" onClick=${() => leaveFor("/api/billing/portal", { returnUrl: back })}>Manage in the billing portal</button>`}
        </div>
      </section>`}
    ${usage && html`
      <section class="card">
        <h2>Usage this period</h2>
        ${limitsOf(usage).map((item) => html`<${Meter} key=${item.id} item=${item} upgrade=${upgrade} />`)}
      </section>`}
  `
}
