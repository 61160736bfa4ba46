/**
 * The account: who is signed in, and the password changed (the current one asked for, the new one
 * typed twice). Changing it signs out every other session of the account; this one goes on.
 */
import { html } from "htm/preact"
import { useState } from "preact/hooks"
import { call, fieldError } from "./api.js"
import { ErrorNote, Field, useAction } from "./ui.js"

/** @param {{ user: { email: string, name?: string } }} props */
export const AccountPage = ({ user }) => {
  const [current, setCurrent] = useState("")
  const [next, setNext] = useState("")
  const [again, setAgain] = useState("")
  const [mismatch, setMismatch] = useState(false)
  const [done, setDone] = useState("")
  const { busy, error, run } = useAction()

  /** @param {Event} event */
  const change = (event) => {
    event.preventDefault()
    setDone("")
    if (next !== again) return setMismatch(true)
    setMismatch(false)
    return run(async () => {
      const answer = (await call("POST", "/api/auth/password", { currentPassword: current, newPassword: next })).data
      const others = answer.otherSessionsEnded
      setDone(`Password changed. ${others === 0 ? "No other session was signed in." : `${others} other ${others === 1 ? "session was" : "sessions were"} signed out.`}`)
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
  `
}
