/**
 * The account: who is signed in, where (each login session, one or all of the others signed out),
 * the password changed (the current one asked for, the new one typed twice; every other session is
 * signed out, this one goes on), two-factor sign-in (two-factor.js), the email changed (confirmed from
 * the new address), the account's recent activity (activity.js), and the account deleted (what goes
 * said first, the password asked).
 */
import { html } from "htm/preact"
import { useEffect, useState } from "preact/hooks"
import { call, fieldError } from "./api.js"
import { TwoFactor } from "./two-factor.js"
import { Activity } from "./activity.js"
import { clientName, ErrorNote, Field, LoadFailed, useAction, when } from "./ui.js"

/** Where the account is signed in, this session first among equals; any other signed out with a press. */
const Sessions = () => {
  const [sessions, setSessions] = useState(/** @type {any[] | null} */ (null))
  const [failure, setFailure] = useState(/** @type {unknown} */ (null))
  const [attempt, setAttempt] = useState(0)
  const { busy, error, run } = useAction()
  useEffect(() => {
    call("GET", "/api/auth/sessions").then((answer) => (setSessions(answer.data), setFailure(null)), setFailure)
  }, [attempt])
  const reload = () => setAttempt((n) => n + 1)
  /** @param {string} method @param {string} path */
  const end = (method, path) => run(async () => (await call(method, path), reload()))
  const others = (sessions ?? []).filter((s) => !s.current)
  if (failure) return html`<${LoadFailed} error=${failure} onRetry=${reload} />`
  return html`
    <section class="card" aria-labelledby="sessions-heading">
      <h2 id="sessions-heading">Where you are signed in</h2>
      ${sessions === null ? html`<p class="muted">Loading…</p>` : html`
        <ul class="list" aria-label="Sessions">
          ${sessions.map((s) => html`
            <li key=${s.sessionId} class="item wrap">
              <div class="grow">
                <strong title=${s.userAgent ?? ""}>${clientName(s.userAgent)}</strong>
                ${s.current && html` <span class="tag">this session</span>`}
                <div class="muted small">${s.clientAddress ?? "address unknown"} · signed in ${when(s.createdAt)} · last active ${when(s.lastActiveAt)}</div>
              </div>
              ${!s.current && html`
                <button type="button" class="secondary" disabled=${busy} aria-label=${`Sign out ${clientName(s.userAgent)}, signed in ${when(s.createdAt)}`}
                  onClick=${() => end("DELETE", `/api/auth/sessions/${encodeURIComponent(s.sessionId)}`)}>Sign out</button>`}
            </li>`)}
        </ul>
        ${others.length > 0 && html`
          <button type="button" class="secondary" disabled=${busy} onClick=${() => end("POST", "/api/auth/sessions/end-others")}>
            Sign out everywhere else</button>`}`}
      <${ErrorNote} error=${error} />
    </section>
  `
}

/**
 * Changing the email the account signs in with: the new address and the password; the address gets a
 * link, and the email changes only when it is opened (the confirm page, auth.js).
 * @param {{ email: string }} props
 */
const ChangeEmail = ({ email }) => {
  const [newEmail, setNewEmail] = useState("")
  const [password, setPassword] = useState("")
  const [mailed, setMailed] = useState("")
  const { busy, error, run } = useAction()
  /** @param {Event} event */
  const submit = (event) => {
    event.preventDefault()
    return run(async () => {
      const answer = (await call("POST", "/api/auth/email", { newEmail, password })).data
      setMailed(answer.newEmail)
      setPassword("")
    })
  }
  const byField = fieldError(error, "newEmail") ?? fieldError(error, "password")
  return html`
    <form class="card account-form" onSubmit=${submit} aria-label="Change email">
      <h2>Change email</h2>
      <p class="muted small">You sign in with ${email}. The new address gets a link; the email changes when it is
        opened, and ${email} is told.</p>
      <${Field} id="new-email" label="New email" type="email" value=${newEmail} onInput=${setNewEmail} autocomplete="email" required
        error=${fieldError(error, "newEmail")} />
      <${Field} id="email-password" label="Password" type="password" value=${password} onInput=${setPassword}
        autocomplete="current-password" required error=${fieldError(error, "password")} />
      <button type="submit" disabled=${busy}>Send the link</button>
      ${mailed && html`<p class="note" role="status">A link to confirm is on its way to ${mailed}. It works once, for 24 hours.</p>`}
      ${!byField && html`<${ErrorNote} error=${error} />`}
    </form>
  `
}

/**
 * Deleting the account: what goes and what stays said before anything is asked, then the password and
 * the button that does it. The page then signs the reader out (`onDeleted`, with what was deleted).
 * @param {{ onDeleted: (deleted: { email: string, mailboxes: number, emails: number }) => void }} props
 */
const DeleteAccount = ({ onDeleted }) => {
  const [asking, setAsking] = useState(false)
  const [password, setPassword] = useState("")
  const { busy, error, run } = useAction()
  /** @param {Event} event */
  const remove = (event) => {
    event.preventDefault()
    return run(async () => onDeleted((await call("DELETE", "/api/auth/account", { password })).data))
  }
  return html`
    <section class="card account-form" aria-labelledby="delete-account-heading">
      <h2 id="delete-account-heading">Delete account</h2>
      <p class="muted small">Deletes every mailbox, email, draft, key, domain, webhook and list of this account, at once and
        for good. A paid plan ends now and is not refunded. The mailboxes' addresses cannot be taken by anyone else for
        30 days; your email can sign up again.</p>
      ${!asking
        ? html`<button type="button" class="danger" onClick=${() => setAsking(true)}>Delete account…</button>`
        : html`
          <form class="confirm" onSubmit=${remove} aria-label="Delete account">
            <p>This cannot be undone. Type your password to delete the account.</p>
            <${Field} id="delete-password" label="Password" type="password" value=${password} onInput=${setPassword}
              autocomplete="current-password" required error=${fieldError(error, "password")} />
            ${!fieldError(error, "password") && html`<${ErrorNote} error=${error} />`}
            <div class="actions">
              <button type="submit" class="danger" disabled=${busy}>Delete my account for good</button>
              <button type="button" class="secondary" disabled=${busy} onClick=${() => (setAsking(false), setPassword(""))}>Keep it</button>
            </div>
          </form>`}
    </section>
  `
}

/**
 * @param {{ user: { email: string, name?: string },
 *   onDeleted: (deleted: { email: string, mailboxes: number, emails: number }) => void }} props
 */
export const AccountPage = ({ user, onDeleted }) => {
  const [current, setCurrent] = useState("")
  const [next, setNext] = useState("")
  const [again, setAgain] = useState("")
  const [mismatch, setMismatch] = useState(false)
  const [done, setDone] = useState("")
  // Password changes made here: each signs the other sessions out, so the list is read again.
  const [changes, setChanges] = useState(0)
  const { busy, error, run, clear } = useAction()

  /** @param {Event} event */
  const change = (event) => {
    event.preventDefault()
    setDone("")
    // The server's earlier refusal was of what was sent then: the page's own check replaces it.
    if (next !== again) return (clear(), setMismatch(true))
    setMismatch(false)
    return run(async () => {
      const answer = (await call("POST", "/api/auth/password", { currentPassword: current, newPassword: next })).data
      const others = answer.otherSessionsEnded
      setDone(`Password changed. ${others === 0 ? "No other session was signed in." : `${others} other ${others === 1 ? "session was" : "sessions were"} signed out.`}`)
      setChanges((n) => n + 1)
      setCurrent("")
      setNext("")
      setAgain("")
    })
  }
  // The server's refusal by its field; any other (a 429, an outage) below the form.
  const byField = fieldError(error, "currentPassword") ?? fieldError(error, "newPassword")
  return html`
    <h1>Account</h1>
    <dl class="meta card">
      ${user.name && html`<dt>Name</dt><dd>${user.name}</dd>`}
      <dt>Email</dt><dd>${user.email}</dd>
    </dl>
    <${Sessions} key=${changes} />
    <form class="card account-form" onSubmit=${change} aria-label="Change password">
      <h2>Change password</h2>
      <${Field} id="current-password" label="Current password" type="password" value=${current} onInput=${setCurrent}
        autocomplete="current-password" required error=${fieldError(error, "currentPassword")} />
      <${Field} id="new-password" label="New password" type="password" value=${next} onInput=${setNext} minLength=${8}
        autocomplete="new-password" required hint="At least 8 characters" error=${fieldError(error, "newPassword")} />
      <${Field} id="new-password-again" label="New password, again" type="password" value=${again} onInput=${setAgain}
        autocomplete="new-password" required error=${mismatch ? "does not match the new password" : undefined} />
      <p class="muted small">Every other place you are signed in is signed out; API keys keep working.</p>
      <button type="submit" disabled=${busy}>Change password</button>
      ${done && html`<p class="note" role="status">${done}</p>`}
      ${!byField && html`<${ErrorNote} error=${error} />`}
    </form>
    <${TwoFactor} />
    <${ChangeEmail} email=${user.email} />
    <${Activity} />
    <${DeleteAccount} onDeleted=${onDeleted} />
  `
}
