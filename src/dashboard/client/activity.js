/**
 * The account's recent security activity, newest first, a page at a time: what happened, from which
 * client and address, and when. Refused sign-ins stand out.
 */
import { html } from "htm/preact"
import { useEffect, useState } from "preact/hooks"
import { call } from "./api.js"
import { clientName, ErrorNote, LoadFailed, useAction } from "./ui.js"

const PAGE = 10

/** @param {string} iso When, to the minute: the day matters as much as the time here. */
const at = (iso) => new Date(iso).toLocaleString([], { dateStyle: "medium", timeStyle: "short" })

/**
 * What an entry says, in words.
 * @param {{ kind: string, detail: Record<string, any> }} entry
 */
const describe = ({ kind, detail }) => {
  switch (kind) {
    case "login":
      return detail.secondFactor === "recovery_code"
        ? `Signed in with a recovery code (${detail.recoveryCodesLeft} left)`
        : detail.secondFactor === "app" ? "Signed in with the authenticator app" : "Signed in"
    case "login_failed":
      return detail.reason === "code" ? "Sign-in refused: a wrong code" : "Sign-in refused: a wrong password"
    case "password_changed":
      return "Password changed"
    case "password_reset":
      return "Password chosen from a mailed link"
    case "password_set":
      return "Password set by an operator"
    case "email_changed":
      return `Email changed from ${detail.previousEmail} to ${detail.email}`
    case "two_factor_enabled":
      return "Two-factor sign-in turned on"
    case "two_factor_disabled":
      return detail.by === "operator" ? "Two-factor sign-in turned off by an operator" : "Two-factor sign-in turned off"
    case "recovery_codes_regenerated":
      return "New recovery codes made"
    case "sessions_signed_out":
      return detail.ended === 1 ? "A session signed out" : `${detail.ended} sessions signed out`
    case "api_key_created":
      return `API key "${detail.name}" created`
    case "api_key_revoked":
      return `API key "${detail.name}" revoked`
    default:
      return kind
  }
}

/**
 * Read when opened: the account page is visited often, and each read counts against the account's
 * requests a minute, as every dashboard request does.
 */
export const Activity = () => {
  const [open, setOpen] = useState(false)
  return html`
    <section class="card" aria-labelledby="activity-heading">
      <h2 id="activity-heading">Recent activity</h2>
      <p class="muted small">Sign-ins and changes to this account's sign-in and keys over the last 90 days. Something you did not
        do? Change your password and sign the other sessions out.</p>
      ${open ? html`<${ActivityList} />` : html`<button type="button" class="secondary" onClick=${() => setOpen(true)}>Show activity</button>`}
    </section>
  `
}

const ActivityList = () => {
  const [entries, setEntries] = useState(/** @type {any[] | null} */ (null))
  const [hasMore, setHasMore] = useState(false)
  const [failure, setFailure] = useState(/** @type {unknown} */ (null))
  const [attempt, setAttempt] = useState(0)
  const { busy, error, run } = useAction()
  /** @param {number} offset */
  const page = (offset) => call("GET", `/api/auth/activity?limit=${PAGE}&offset=${offset}`)
  useEffect(() => {
    page(0).then((answer) => (setEntries(answer.data), setHasMore(answer.meta.hasMore), setFailure(null)), setFailure)
  }, [attempt])
  const more = () =>
    run(async () => {
      const answer = await page(entries?.length ?? 0)
      setEntries([...(entries ?? []), ...answer.data])
      setHasMore(answer.meta.hasMore)
    })
  if (failure) return html`<${LoadFailed} error=${failure} onRetry=${() => setAttempt((n) => n + 1)} />`
  if (entries === null) return html`<p class="muted">Loading…</p>`
  return html`
    <ul class="list" aria-label="Activity">
      ${entries.map((entry) => html`
        <li key=${entry.activityId} class="item wrap">
          <div class="grow">
            <strong>${describe(entry)}</strong>
            ${entry.kind === "login_failed" && html` <span class="tag failed">refused</span>`}
            <div class="muted small">${entry.clientAddress === null ? "from the command line"
              : `${clientName(entry.userAgent)} · ${entry.clientAddress}`} · <time datetime=${entry.at}>${at(entry.at)}</time></div>
          </div>
        </li>`)}
    </ul>
    ${hasMore && html`<button type="button" class="secondary" disabled=${busy} onClick=${more}>Show more</button>`}
    <${ErrorNote} error=${error} />
  `
}
