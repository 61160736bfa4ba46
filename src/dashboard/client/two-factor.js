/**
 * Two-factor sign-in on the account page. Off: "Turn on…" asks the password, then shows the new secret
 * as a QR code (drawn here, in the page) and as text, and takes a code from the app to turn it on; the
 * recovery codes are shown once, to copy or download. On: since when, how many recovery codes are left,
 * new ones (the password again), and turning it off (the password and a code).
 */
import { html } from "htm/preact"
import { useEffect, useState } from "preact/hooks"
import { renderSVG } from "uqr"
import { call, fieldError } from "./api.js"
import { CopyButton, ErrorNote, Field, LoadFailed, useAction, when } from "./ui.js"

/** @param {string} secret The secret in groups of four, as people read and type it. */
const grouped = (secret) => secret.replace(/(.{4})(?=.)/g, "$1 ")

/**
 * The codes, once: to copy, or to download as a text file.
 * @param {{ codes: string[], onDone: () => void }} props
 */
const RecoveryCodes = ({ codes, onDone }) => {
  const text = `Mailroom recovery codes (each signs in once without the authenticator app)\n\n${codes.join("\n")}\n`
  const download = `data:text/plain;charset=utf-8,${encodeURIComponent(text)}`
  return html`
    <div class="card secret" role="status">
      <p><strong>Your recovery codes.</strong> Each one signs in once if you lose your authenticator app. Keep them
        somewhere safe: they are shown only now.</p>
      <ul class="codes" aria-label="Recovery codes">${codes.map((code) => html`<li key=${code}><code>${code}</code></li>`)}</ul>
      <div class="actions">
        <${CopyButton} text=${codes.join("\n")} label="Copy codes" />
        <a class="button secondary" href=${download} download="mailroom-recovery-codes.txt">Download</a>
        <button type="button" onClick=${onDone}>I have saved them</button>
      </div>
    </div>
  `
}

/**
 * Set up: the secret made, shown as a QR code and as text; a code of it turns two-factor sign-in on.
 * @param {{ setup: { secret: string, otpauthUri: string }, onEnabled: (codes: string[]) => void, onCancel: () => void }} props
 */
const ScanAndConfirm = ({ setup, onEnabled, onCancel }) => {
  const [code, setCode] = useState("")
  const { busy, error, run } = useAction()
  const qr = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(renderSVG(setup.otpauthUri, { border: 2 }))}`
  /** @param {Event} event */
  const enable = (event) => {
    event.preventDefault()
    return run(async () => onEnabled((await call("POST", "/api/auth/two-factor/enable", { code })).data.recoveryCodes))
  }
  return html`
    <form class="two-factor-setup" onSubmit=${enable} aria-label="Turn on two-factor sign-in">
      <p>1. Scan this with your authenticator app (Google Authenticator, 1Password, Authy, …):</p>
      <img class="qr" src=${qr} width="180" height="180" alt="QR code of the authenticator app's secret" />
      <p class="muted small">Or type the secret into it:</p>
      <div class="copy-row"><code data-testid="totp-secret">${grouped(setup.secret)}</code><${CopyButton} text=${setup.secret} label="Copy secret" /></div>
      <p>2. Type the 6-digit code the app shows for Mailroom:</p>
      <${Field} id="enable-code" label="Code" value=${code} onInput=${setCode} autocomplete="one-time-code" inputmode="numeric" required
        error=${fieldError(error, "code")} />
      ${!fieldError(error, "code") && html`<${ErrorNote} error=${error} />`}
      <div class="actions">
        <button type="submit" disabled=${busy}>Turn on</button>
        <button type="button" class="secondary" disabled=${busy} onClick=${onCancel}>Cancel</button>
      </div>
    </form>
  `
}

/**
 * A form asking the password (and, to turn it off, a code) before `onSubmit` runs with them.
 * @param {{ label: string, note?: string, withCode?: boolean, danger?: boolean,
 *   onSubmit: (input: { password: string, code: string }) => Promise<void>, onCancel: () => void }} props
 */
const Confirm = ({ label, note, withCode = false, danger = false, onSubmit, onCancel }) => {
  const [password, setPassword] = useState("")
  const [code, setCode] = useState("")
  const { busy, error, run } = useAction()
  /** @param {Event} event */
  const submit = (event) => {
    event.preventDefault()
    return run(() => onSubmit({ password, code }))
  }
  const byField = fieldError(error, "password") ?? fieldError(error, "code")
  return html`
    <form class=${danger ? "confirm" : ""} onSubmit=${submit} aria-label=${label}>
      ${note && html`<p>${note}</p>`}
      <${Field} id="two-factor-password" label="Password" type="password" value=${password} onInput=${setPassword}
        autocomplete="current-password" required error=${fieldError(error, "password")} />
      ${withCode && html`<${Field} id="two-factor-code" label="Code from your authenticator app, or a recovery code" value=${code}
        onInput=${setCode} autocomplete="one-time-code" required error=${fieldError(error, "code")} />`}
      ${!byField && html`<${ErrorNote} error=${error} />`}
      <div class="actions">
        <button type="submit" class=${danger ? "danger" : ""} disabled=${busy}>${label}</button>
        <button type="button" class="secondary" disabled=${busy} onClick=${onCancel}>Cancel</button>
      </div>
    </form>
  `
}

export const TwoFactor = () => {
  const [status, setStatus] = useState(/** @type {{ enabled: boolean, enabledAt: string | null, recoveryCodesLeft: number } | null} */ (null))
  const [failure, setFailure] = useState(/** @type {unknown} */ (null))
  const [attempt, setAttempt] = useState(0)
  // What the card shows besides the status: a form, the secret being confirmed, or codes shown once.
  const [step, setStep] = useState(/** @type {"idle" | "password" | "scan" | "codes" | "new-codes" | "off"} */ ("idle"))
  const [setup, setSetup] = useState(/** @type {{ secret: string, otpauthUri: string } | null} */ (null))
  const [codes, setCodes] = useState(/** @type {string[]} */ ([]))
  useEffect(() => {
    call("GET", "/api/auth/two-factor").then((answer) => (setStatus(answer.data), setFailure(null)), setFailure)
  }, [attempt])
  const reload = () => setAttempt((n) => n + 1)
  const idle = () => (setStep("idle"), setSetup(null), reload())
  /**
   * The codes to save, and the status they make (on, with these codes): turning it on shows On beside them.
   * @param {string[]} shown
   */
  const show = (shown) => {
    setStatus((was) => ({ enabled: true, enabledAt: was?.enabled ? was.enabledAt : new Date().toISOString(), recoveryCodesLeft: shown.length }))
    setCodes(shown)
    setStep("codes")
  }

  if (failure) return html`<${LoadFailed} error=${failure} onRetry=${reload} />`
  return html`
    <section class="card account-form" aria-labelledby="two-factor-heading">
      <h2 id="two-factor-heading">Two-factor sign-in</h2>
      ${status === null ? html`<p class="muted">Loading…</p>` : status.enabled
        ? html`<p><span class="tag">On</span> since ${when(/** @type {string} */ (status.enabledAt))}: signing in asks for a code from your
            authenticator app after the password. ${status.recoveryCodesLeft} recovery ${status.recoveryCodesLeft === 1 ? "code" : "codes"} left.</p>`
        : html`<p class="muted small">Off: your password alone signs in. Turn it on to be asked, after the password, for a code
            from an authenticator app on your phone. API keys are not affected.</p>`}
      ${step === "codes" && html`<${RecoveryCodes} codes=${codes} onDone=${idle} />`}
      ${step === "scan" && setup && html`<${ScanAndConfirm} setup=${setup} onEnabled=${show} onCancel=${idle} />`}
      ${step === "password" && html`
        <${Confirm} label="Continue" onCancel=${idle} onSubmit=${async (/** @type {{ password: string }} */ { password }) => {
          setSetup((await call("POST", "/api/auth/two-factor/setup", { password })).data)
          setStep("scan")
        }} />`}
      ${step === "new-codes" && html`
        <${Confirm} label="Make new codes" note="Your earlier recovery codes stop working." onCancel=${idle} onSubmit=${async (/** @type {{ password: string }} */ { password }) =>
          show((await call("POST", "/api/auth/two-factor/recovery-codes", { password })).data.recoveryCodes)} />`}
      ${step === "off" && html`
        <${Confirm} label="Turn off" note="Your password alone will sign in." withCode=${true} danger=${true} onCancel=${idle}
          onSubmit=${async (/** @type {{ password: string, code: string }} */ input) => {
            await call("DELETE", "/api/auth/two-factor", input)
            idle()
          }} />`}
      ${status !== null && step === "idle" && html`
        <div class="actions">
          ${status.enabled
            ? html`
              <button type="button" class="secondary" onClick=${() => setStep("new-codes")}>New recovery codes…</button>
              <button type="button" class="danger" onClick=${() => setStep("off")}>Turn off…</button>`
            : html`<button type="button" onClick=${() => setStep("password")}>Turn on…</button>`}
        </div>`}
    </section>
  `
}
