/** Sign up and sign in: the session is the HttpOnly cookie login sets; the page only remembers who. */
import { html } from "htm/preact"
import { useState } from "preact/hooks"
import { ApiError, call, fieldError, rememberUser } from "./api.js"
import { href } from "./router.js"
import { ErrorNote, Field, useAction } from "./ui.js"

/**
 * An account with two-factor sign-in on is asked, once its password is right, for its authenticator
 * app's code (or a recovery code): the form grows that field and sends all three again.
 * @param {{ mode: "signin" | "signup", notice?: string, email?: string, onSignedIn: (user: any) => void }} props
 */
export const AuthPage = ({ mode, notice, email: knownEmail = "", onSignedIn }) => {
  const [name, setName] = useState("")
  const [email, setEmail] = useState(knownEmail)
  const [password, setPassword] = useState("")
  const [code, setCode] = useState("")
  const [asksCode, setAsksCode] = useState(false)
  const { busy, error, run } = useAction()
  const signingUp = mode === "signup"

  /** @param {Event} event */
  const submit = (event) => {
    event.preventDefault()
    return run(async () => {
      if (signingUp) await call("POST", "/api/auth/register", { name, email, password })
      try {
        const { data } = await call("POST", "/api/auth/login", { email, password, ...(asksCode ? { code } : {}) })
        rememberUser(data.user)
        onSignedIn(data.user)
      } catch (failure) {
        // The password was right; the account asks for its second factor too.
        if (failure instanceof ApiError && failure.details?.code === "is required") return setAsksCode(true)
        throw failure
      }
    })
  }
  const codeError = fieldError(error, "code")

  return html`
    <section class="card narrow">
      <h1>${signingUp ? "Create your account" : "Sign in"}</h1>
      ${notice && html`<p class="note" role="status">${notice}</p>`}
      <form onSubmit=${submit}>
        ${signingUp && html`<${Field} id="name" label="Name" value=${name} onInput=${setName} autocomplete="name" required
          error=${fieldError(error, "name")} />`}
        <${Field} id="email" label="Email" type="email" value=${email} onInput=${setEmail} autocomplete="email" required
          error=${fieldError(error, "email")} />
        <${Field} id="password" label="Password" type="password" value=${password} onInput=${setPassword} required
          minLength=${signingUp ? 8 : undefined} autocomplete=${signingUp ? "new-password" : "current-password"}
          hint=${signingUp ? "At least 8 characters" : undefined} error=${fieldError(error, "password")} />
        ${asksCode && html`<${Field} id="code" label="Code from your authenticator app" value=${code} onInput=${setCode} required
          autocomplete="one-time-code" inputmode="numeric" autofocus=${true}
          hint="The 6 digits it shows for Mailroom now; without the app, one of your recovery codes" error=${codeError && "That code does not work: it is not the app's current one, or it was used"} />`}
        <${ErrorNote} error=${codeError ? null : error} />
        <button type="submit" disabled=${busy}>${signingUp ? "Sign up" : asksCode ? "Verify and sign in" : "Sign in"}</button>
      </form>
      <p class="muted">
        ${signingUp
          ? html`Already have an account? <a href=${href("signin")}>Sign in</a>`
          : html`<a href=${href("forgot-password")}>Forgot your password?</a> · New here? <a href=${href("signup")}>Create an account</a>`}
      </p>
    </section>
  `
}

/** "Forgot your password?": a link to choose a new one, mailed to the account's email. */
export const ForgotPasswordPage = () => {
  const [email, setEmail] = useState("")
  const [asked, setAsked] = useState("")
  const { busy, error, run } = useAction()

  /** @param {Event} event */
  const submit = (event) => {
    event.preventDefault()
    return run(async () => {
      await call("POST", "/api/auth/password-reset", { email })
      setAsked(email)
    })
  }

  return html`
    <section class="card narrow">
      <h1>Forgot your password?</h1>
      ${asked
        ? html`<p class="note" role="status">If an account uses ${asked}, a link to choose a new password is on its way. It works
            once, for 60 minutes. Nothing after a few minutes? Look in the spam folder, or ask again.</p>`
        : html`<p class="muted">Enter your account's email: we mail it a link to choose a new password.</p>`}
      <form onSubmit=${submit}>
        <${Field} id="email" label="Email" type="email" value=${email} onInput=${setEmail} autocomplete="email" required
          error=${fieldError(error, "email")} />
        <${ErrorNote} error=${fieldError(error, "email") ? null : error} />
        <button type="submit" disabled=${busy}>${asked ? "Send another link" : "Send the link"}</button>
      </form>
      <p class="muted">Remembered it? <a href=${href("signin")}>Sign in</a></p>
    </section>
  `
}

/**
 * The page a mailed link opens (`#/reset-password/<token>`): the new password, twice. Setting it signs
 * every session out, this browser's too.
 * @param {{ token: string, onReset: (reset: { email: string, sessionsEnded: number }) => void }} props
 */
export const ResetPasswordPage = ({ token, onReset }) => {
  const [password, setPassword] = useState("")
  const [again, setAgain] = useState("")
  const [mismatch, setMismatch] = useState(false)
  const { busy, error, run } = useAction()

  /** @param {Event} event */
  const submit = (event) => {
    event.preventDefault()
    if (password !== again) return setMismatch(true)
    setMismatch(false)
    return run(async () => onReset((await call("POST", "/api/auth/password-reset/confirm", { token, password })).data))
  }
  const badLink = fieldError(error, "token")

  return html`
    <section class="card narrow">
      <h1>Choose a new password</h1>
      ${badLink
        ? html`<p class="alert" role="alert">This link does not work any more: it was used, it is over 60 minutes old, or
            it was copied only in part. <a href=${href("forgot-password")}>Ask for a new one</a>.</p>`
        : html`<p class="muted">Every place the account is signed in is signed out; API keys keep working.</p>`}
      <form onSubmit=${submit}>
        <${Field} id="new-password" label="New password" type="password" value=${password} onInput=${setPassword} minLength=${8}
          autocomplete="new-password" required hint="At least 8 characters" error=${fieldError(error, "password")} />
        <${Field} id="new-password-again" label="New password, again" type="password" value=${again} onInput=${setAgain}
          autocomplete="new-password" required error=${mismatch ? "does not match the new password" : undefined} />
        ${!badLink && !fieldError(error, "password") && html`<${ErrorNote} error=${error} />`}
        <button type="submit" disabled=${busy}>Set the password</button>
      </form>
    </section>
  `
}

/**
 * The page a mailed link to confirm a new email opens (`#/confirm-email/<token>`), signed in or not: one
 * press moves the account to the new address (`onConfirmed`, with it and the one before).
 * @param {{ token: string, onConfirmed: (changed: { email: string, previousEmail: string }) => void }} props
 */
export const ConfirmEmailPage = ({ token, onConfirmed }) => {
  const [changed, setChanged] = useState(/** @type {{ email: string, previousEmail: string } | null} */ (null))
  const { busy, error, run } = useAction()
  const confirm = () =>
    run(async () => {
      const answer = (await call("POST", "/api/auth/email/confirm", { token })).data
      setChanged(answer)
      onConfirmed(answer)
    })
  const badLink = fieldError(error, "token")
  return html`
    <section class="card narrow">
      <h1>Confirm your new email</h1>
      ${changed
        ? html`<p class="note" role="status">The account signs in with ${changed.email} from now on; ${changed.previousEmail} was told.</p>
            <p><a href=${href("signin")}>Continue</a></p>`
        : badLink
        ? html`<p class="alert" role="alert">This link does not work any more: it was used, it is over 24 hours old, or it was
            copied only in part. Ask for a new one on the account page.</p>`
        : html`
          <p class="muted">The account's email changes to the address this link was mailed to.</p>
          <button type="button" disabled=${busy} onClick=${confirm}>Confirm the new email</button>
          <${ErrorNote} error=${error} />`}
    </section>
  `
}
