/** Sign up and sign in: the session is the HttpOnly cookie login sets; the page only remembers who. */
import { html } from "htm/preact"
import { useState } from "preact/hooks"
import { call, fieldError, rememberUser } from "./api.js"
import { href } from "./router.js"
import { ErrorNote, Field, useAction } from "./ui.js"

/** @param {{ mode: "signin" | "signup", notice?: string, onSignedIn: (user: any) => void }} props */
export const AuthPage = ({ mode, notice, onSignedIn }) => {
  const [name, setName] = useState("")
  const [email, setEmail] = useState("")
  const [password, setPassword] = useState("")
  const { busy, error, run } = useAction()
  const signingUp = mode === "signup"

  /** @param {Event} event */
  const submit = (event) => {
    event.preventDefault()
    return run(async () => {
      if (signingUp) await call("POST", "/api/auth/register", { name, email, password })
      const { data } = await call("POST", "/api/auth/login", { email, password })
      rememberUser(data.user)
      onSignedIn(data.user)
    })
  }

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
        <${ErrorNote} error=${error} />
        <button type="submit" disabled=${busy}>${signingUp ? "Sign up" : "Sign in"}</button>
      </form>
      <p class="muted">
        ${signingUp
          ? html`Already have an account? <a href=${href("signin")}>Sign in</a>`
          : html`New here? <a href=${href("signup")}>Create an account</a>`}
      </p>
    </section>
  `
}
