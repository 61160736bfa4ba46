/** The dashboard's entry: who is signed in, which page the URL names, and the live mail stream. */
import { html } from "htm/preact"
import { render } from "preact"
import { useEffect, useLayoutEffect, useState } from "preact/hooks"
import { call, endSession, rememberedUser, rememberUser, whenSignedOut } from "./api.js"
import { AccountPage } from "./account.js"
import { AuthPage, ConfirmEmailPage, ForgotPasswordPage, ResetPasswordPage } from "./auth.js"
import { BillingPage } from "./billing.js"
import { ComposePage } from "./compose.js"
import { AllDrafts, MailboxDrafts } from "./drafts.js"
import { DomainsPage } from "./domains.js"
import { AllInbox, MailboxInbox } from "./inbox.js"
import { KeysPage } from "./keys.js"
import { connect, disconnect } from "./live.js"
import { MailboxesPage } from "./mailboxes.js"
import { ReaderPage } from "./reader.js"
import { SearchPage } from "./search.js"
import { MailboxSenders, SendersPage } from "./senders.js"
import { FiltersPage } from "./filters.js"
import { MailboxForwarding } from "./forwarding.js"
import { MailboxAutoReply } from "./auto-reply.js"
import { MailboxMeetings } from "./meetings.js"
import { ConversationPage } from "./threads.js"
import { WebhooksPage } from "./webhooks.js"
import { go, useRoute } from "./router.js"
import { count, Frame } from "./ui.js"

/** Where a reader sent to sign in was going (a deep link, or a session that ended mid-use): this tab's, once. */
const RETURN_TO = "mailroom.returnTo"
/** Signing out by hand: the page left is not one to come back to. */
let signingOut = false

const App = () => {
  const [user, setUser] = useState(rememberedUser)
  const route = useRoute()
  const [page, id, sub] = route

  /** The session is over: its requests still under way are dropped, and the sign-in page shows. */
  const signedOut = () => {
    endSession()
    rememberUser(null)
    setUser(null)
  }
  useEffect(() => {
    whenSignedOut(signedOut)
  }, [])
  useEffect(() => {
    if (user) connect()
    else disconnect()
  }, [user])
  // A page that needs a session sends the signed-out reader to sign in, and back. A mailed link (a new
  // password, a new email) opens its page either way.
  const signedOutPage = page === "signin" || page === "signup" || page === "forgot-password"
  const linkPage = page === "reset-password" || page === "confirm-email"
  useEffect(() => {
    if (!user && !signedOutPage && !linkPage) {
      if (page && !signingOut) sessionStorage.setItem(RETURN_TO, location.hash)
      signingOut = false
      go("signin")
    }
    if (user && signedOutPage) {
      const back = sessionStorage.getItem(RETURN_TO)
      sessionStorage.removeItem(RETURN_TO)
      if (back) location.hash = back
      else go()
    }
  }, [user, page])
  // Each page's content is where focus goes when the page shown changes, for screen readers and keyboards.
  // The page shown, not the URL: signing out shows the sign-in form at once and the URL follows a moment
  // later, and that later change must not pull focus from a field the reader is already typing in. A layout
  // effect, so focus has moved by the time the page is painted.
  const shown = !user ? (signedOutPage || linkPage ? page : "signin") : signedOutPage ? "" : route.join("/")
  useLayoutEffect(() => {
    document.getElementById("main")?.focus()
  }, [shown])

  // What the sign-in page says (the account was deleted, its password set), and the email it knows.
  const [notice, setNotice] = useState({ text: "", email: "" })

  const signOut = async () => {
    signingOut = true
    sessionStorage.removeItem(RETURN_TO)
    endSession()
    await call("POST", "/api/auth/logout").catch(() => undefined)
    signedOut()
  }

  /** @param {{ email: string, mailboxes: number, emails: number }} deleted */
  const accountDeleted = (deleted) => {
    signingOut = true
    setNotice({
      text: `The account ${deleted.email} is deleted, with ${count(deleted.mailboxes, "mailbox", "mailboxes")} and ${count(deleted.emails, "email", "emails")}.`,
      email: ""
    })
    signedOut()
  }

  /** @param {{ email: string }} reset */
  const passwordReset = (reset) => {
    setNotice({ text: "Your new password is set, and every session of the account is signed out: sign in with it.", email: reset.email })
    signedOut()
    go("signin")
  }

  /** @param {{ email: string, previousEmail: string }} changed */
  const emailChanged = (changed) => {
    // This browser's account, if it is the one that moved: the page shows its new address.
    if (user && user.email === changed.previousEmail) {
      const moved = { ...user, email: changed.email }
      rememberUser(moved)
      setUser(moved)
    }
  }

  const content = page === "reset-password"
    ? html`<${ResetPasswordPage} key=${id} token=${id ?? ""} onReset=${passwordReset} />`
    : page === "confirm-email"
    ? html`<${ConfirmEmailPage} key=${id} token=${id ?? ""} onConfirmed=${emailChanged} />`
    : !user && page === "forgot-password"
    ? html`<${ForgotPasswordPage} />`
    : !user
    ? html`<${AuthPage} key=${notice.email} mode=${page === "signup" ? "signup" : "signin"} notice=${notice.text} email=${notice.email}
        onSignedIn=${(/** @type {any} */ signedIn) => (setNotice({ text: "", email: "" }), setUser(signedIn))} />`
    : page === "account"
    ? html`<${AccountPage} user=${user} onDeleted=${accountDeleted} />`
    : page === "keys"
    ? html`<${KeysPage} />`
    : page === "inbox"
    ? html`<${AllInbox} />`
    : page === "search"
    ? html`<${SearchPage} />`
    : page === "webhooks"
    ? html`<${WebhooksPage} />`
    : page === "domains"
    ? html`<${DomainsPage} />`
    : page === "billing"
    ? html`<${BillingPage} />`
    : page === "drafts"
    ? html`<${AllDrafts} />`
    : page === "mailboxes" && id && sub === "compose"
    ? html`<${ComposePage} key=${id} mailboxId=${id} />`
    : page === "mailboxes" && id && sub === "drafts"
    ? html`<${MailboxDrafts} key=${id} mailboxId=${id} />`
    : page === "mailboxes" && id && sub === "senders"
    ? html`<${MailboxSenders} key=${id} mailboxId=${id} />`
    : page === "mailboxes" && id && sub === "forwarding"
    ? html`<${MailboxForwarding} key=${id} mailboxId=${id} />`
    : page === "mailboxes" && id && sub === "auto-reply"
    ? html`<${MailboxAutoReply} key=${id} mailboxId=${id} />`
    : page === "mailboxes" && id && sub === "meetings"
    ? html`<${MailboxMeetings} key=${id} mailboxId=${id} />`
    : page === "senders"
    ? html`<${SendersPage} />`
    : page === "filters"
    ? html`<${FiltersPage} />`
    : page === "mailboxes" && id
    ? html`<${MailboxInbox} key=${id} mailboxId=${id} />`
    : page === "threads" && id
    ? html`<${ConversationPage} key=${id} threadId=${id} />`
    : page === "emails" && id
    ? html`<${ReaderPage} key=${id} emailId=${id} />`
    : page === undefined || page === "mailboxes" || signedOutPage
    ? html`<${MailboxesPage} />`
    : html`
      <h1>Page not found</h1>
      <p>The dashboard has no page at <code>#/${route.join("/")}</code>. <a href=${"#/"}>Go to your mailboxes</a></p>`
  const section = page === "account" || page === "keys" || page === "search" || page === "webhooks" || page === "domains" || page === "billing" || page === "drafts" || page === "senders" || page === "filters"
    ? page
    : page === "mailboxes" && sub === "drafts"
    ? "drafts"
    : page === "mailboxes" && sub === "senders"
    ? "senders"
    : page === "inbox" || page === "emails" || page === "threads" || (page === "mailboxes" && id)
    ? "inbox"
    : "mailboxes"
  const signedOutTitles = { "reset-password": "New password", "confirm-email": "New email", "forgot-password": "Forgot password", signup: "Sign up" }
  document.title = `${linkPage || !user ? signedOutTitles[/** @type {keyof typeof signedOutTitles} */ (page)] ?? "Sign in" : section[0].toUpperCase() + section.slice(1)} · Mailroom`

  return html`<${Frame} user=${user} section=${section} onSignOut=${signOut}>${content}<//>`
}

render(html`<${App} />`, /** @type {HTMLElement} */ (document.getElementById("app")))
