/**
 * Writing mail from a mailbox: a new message (send now, or keep it as a draft for later approval)
 * and a reply (or reply to all) from the reader. Each form sends with an Idempotency-Key of its own,
 * so a double click or a retried request sends once.
 */
import { html } from "htm/preact"
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks"
import { call, fieldError, findMailbox } from "./api.js"
import { addressesShown, addressShown } from "./idn.js"
import { go } from "./router.js"
import { ErrorNote, Field, LoadFailed, MailboxNotFound, TextArea, useAction } from "./ui.js"

/**
 * A recipient as the API gives it (an address, or `{ name, address }`), as a person reads it.
 * @param {string | { name?: string, address: string }} recipient
 */
export const formatRecipient = (recipient) => {
  if (typeof recipient === "string") return recipient
  if (!recipient.name) return recipient.address
  // A name with a comma or another special is quoted ("Doe, Jane"): one person, not two, read back the same.
  const name = /[()<>[\]:;@\\,"]/.test(recipient.name) ? `"${recipient.name.replace(/(["\\])/g, "\\$1")}"` : recipient.name
  return `${name} <${recipient.address}>`
}

/** @param {ReadonlyArray<any> | undefined | null} recipients */
export const formatRecipients = (recipients) => (recipients ?? []).map(formatRecipient).join(", ")

/**
 * `text` cut at its commas, but not at one inside a quoted name ("Doe, Jane") or inside `<…>`.
 * @param {string} text
 */
const splitRecipients = (text) => {
  /** @type {Array<string>} */
  const parts = []
  let current = ""
  let quoted = false
  let angled = false
  for (let i = 0; i < text.length; i++) {
    const c = text[i]
    if (quoted && c === "\\" && i + 1 < text.length) {
      current += c + text[++i]
      continue
    }
    if (c === '"' && !angled) quoted = !quoted
    else if (c === "<" && !quoted) angled = true
    else if (c === ">" && !quoted) angled = false
    if (c === "," && !quoted && !angled) {
      parts.push(current)
      current = ""
    } else {
      current += c
    }
  }
  return [...parts, current]
}

/**
 * What a person typed into a To or Cc field: comma-separated `address` or `Name <address>` (a name
 * with a comma in quotes). The server checks each address; this only splits.
 * @param {string} text
 * @returns {Array<string | { name: string, address: string }>}
 */
export const parseRecipients = (text) =>
  splitRecipients(text).map((part) => part.trim()).filter(Boolean).map((part) => {
    const named = /^(.*?)\s*<([^<>]+)>$/.exec(part)
    if (!named) return part
    const quotedName = /^"(.*)"$/.exec(named[1].trim())
    const name = quotedName ? quotedName[1].replace(/\\(.)/g, "$1") : named[1].trim()
    return name ? { name, address: named[2].trim() } : named[2].trim()
  })

/**
 * A recipient field's message from a refused request, wherever the server put it (`to`, `to.1`, …):
 * one about an item names that recipient, as `text` (the field as typed) lists them.
 * @param {unknown} error @param {string} field @param {string} text
 */
export const recipientError = (error, field, text) => {
  const direct = fieldError(error, field)
  if (direct) return direct
  const details = /** @type {any} */ (error)?.details ?? {}
  const errors = details.field_errors ?? details
  const key = Object.keys(errors).find((k) => k.startsWith(field + "."))
  if (key === undefined) return undefined
  const recipient = parseRecipients(text)[Number(key.split(".")[1])]
  const named = typeof recipient === "string" ? recipient : recipient?.address
  return named === undefined ? errors[key] : `“${named}” ${errors[key]}`
}

/** The labels a refusal of a message's fields is told by (ErrorNote). */
export const MESSAGE_LABELS = { to: "To", cc: "Cc", bcc: "Bcc", subject: "Subject", text: "Message" }

const newKey = () => crypto.randomUUID()

/** @param {{ mailboxId: string, address?: string, name?: string | null }} props */
export const ComposeForm = ({ mailboxId, address, name }) => {
  const [to, setTo] = useState("")
  const [cc, setCc] = useState("")
  const [bcc, setBcc] = useState("")
  const [subject, setSubject] = useState("")
  const [text, setText] = useState("")
  const { busy, error, run } = useAction()
  // A refused send leaves the keyboard at what to fix: the first field refused, else Send again (the
  // button pressed was off while sending, and the focus fell off it to the page), as the refusal is painted.
  const form = useRef(/** @type {HTMLFormElement | null} */ (null))
  useLayoutEffect(() => {
    if (!error || !form.current) return
    const target = form.current.querySelector('[aria-invalid="true"]') ?? form.current.querySelector('button[type="submit"]')
    if (target instanceof HTMLElement) target.focus()
  }, [error])
  // One key per message written: the same message sent twice is sent once.
  const [key, setKey] = useState(newKey)
  const base = `/api/mailboxes/${encodeURIComponent(mailboxId)}`
  const body = () => ({
    to: parseRecipients(to),
    cc: cc ? parseRecipients(cc) : undefined,
    bcc: bcc ? parseRecipients(bcc) : undefined,
    subject,
    text
  })
  const send = () =>
    run(async () => {
      const { data } = await call("POST", base + "/send", body(), { "idempotency-key": key })
      setKey(newKey())
      go("emails", data.email_id)
    })
  const saveDraft = () =>
    run(async () => {
      await call("POST", base + "/drafts", body())
      go("mailboxes", mailboxId, "drafts")
    })

  return html`
    <form class="card" aria-label="New email" ref=${form} onSubmit=${(/** @type {Event} */ e) => (e.preventDefault(), send())}>
      ${address && html`<p class="muted small">From ${name ? html`<strong dir="auto">${name}</strong> ${`<${addressShown(address)}>`}` : html`<strong>${addressShown(address)}</strong>`}</p>`}
      <${Field} id="compose-to" label="To" value=${to} onInput=${setTo} required
        hint="Addresses separated by commas; Name <address> works too" error=${recipientError(error, "to", to)} />
      <${Field} id="compose-cc" label="Cc" value=${cc} onInput=${setCc} error=${recipientError(error, "cc", cc)} />
      <${Field} id="compose-bcc" label="Bcc" value=${bcc} onInput=${setBcc} error=${recipientError(error, "bcc", bcc)}
        hint="Sent a copy; the other recipients do not see these addresses" />
      <${Field} id="compose-subject" label="Subject" value=${subject} onInput=${setSubject} error=${fieldError(error, "subject")} />
      <${TextArea} id="compose-text" label="Message" value=${text} onInput=${setText} error=${fieldError(error, "text")} />
      <${ErrorNote} error=${error} labels=${MESSAGE_LABELS} />
      <div class="actions">
        <button type="submit" disabled=${busy}>Send</button>
        <button type="button" class="secondary" disabled=${busy} onClick=${saveDraft}>Save as draft</button>
      </div>
    </form>
  `
}

/** @param {{ mailboxId: string }} props */
export const ComposePage = ({ mailboxId }) => {
  // undefined until the mailbox is read; null: the account has no such mailbox.
  const [mailbox, setMailbox] = useState(/** @type {any} */ (undefined))
  const [failure, setFailure] = useState(/** @type {unknown} */ (null))
  const [attempt, setAttempt] = useState(0)
  useEffect(() => {
    findMailbox(mailboxId).then(setMailbox, setFailure)
  }, [mailboxId, attempt])
  if (mailbox === null) return html`<${MailboxNotFound} mailboxId=${mailboxId} />`
  // The form works without the address (the server knows it): a failed lookup only costs the From line.
  return html`
    <h1>New email</h1>
    ${failure && html`<${LoadFailed} error=${failure} onRetry=${() => (setFailure(null), setAttempt(attempt + 1))} />`}
    <${ComposeForm} mailboxId=${mailboxId} address=${mailbox?.email_address} name=${mailbox?.display_name} />
  `
}

/**
 * An address as mail is routed to mailboxes: lower case, a subaddress (`agent+news@…`) its mailbox's.
 * @param {string} address
 */
const routingForm = (address) => {
  const lower = address.toLowerCase()
  const at = lower.lastIndexOf("@")
  const plus = lower.indexOf("+")
  return plus < 0 || plus > at ? lower : lower.slice(0, plus) + lower.slice(at)
}

/**
 * Whom an answer to `email` goes to, by the server's rule (services/outbound/replies.ts): its
 * Reply-To, else its From (for sent mail, its To); for a reply to all, everyone else on it in Cc. Each
 * address once, the mailbox's own (its address, the one the email was delivered to) left out.
 * @param {any} email
 * @param {boolean} all
 * @param {string | null} mailboxAddress
 */
const answerRecipients = (email, all, mailboxAddress) => {
  const own = new Set(
    [mailboxAddress, email.direction === "inbound" ? email.delivered_to : null].filter((a) => typeof a === "string").map(routingForm)
  )
  const seen = new Set()
  /** @param {ReadonlyArray<string>} addresses */
  const others = (addresses) =>
    addresses.filter((address) => {
      const key = address.toLowerCase()
      if (seen.has(key) || own.has(routingForm(key))) return false
      seen.add(key)
      return true
    })
  const to = others(email.direction === "outbound" ? email.to : email.reply_to.length > 0 ? email.reply_to : [email.from])
  const cc = all ? others([...email.to, ...email.cc]) : []
  return { to, cc }
}

/**
 * The subject of an answer, as the server makes it: one "Re:", none added to a subject that has one.
 * @param {string} subject
 */
const answerSubject = (subject) => (/^\s*re\s*:/i.test(subject) ? subject : `Re: ${subject}`.trim())

/**
 * Replying from the reader: to the sender (or everyone), sent now or kept as a draft.
 * @param {{ email: any, all: boolean, onClose: () => void }} props
 */
export const ReplyForm = ({ email, all, onClose }) => {
  const [text, setText] = useState("")
  const [mailboxAddress, setMailboxAddress] = useState(/** @type {string | null} */ (null))
  // Only a refinement of the list shown (the address the email reached is left out without it): a failed look-up is no error to show.
  useEffect(() => void findMailbox(email.mailbox_id).then((mailbox) => setMailboxAddress(mailbox?.email_address ?? null), () => {}), [email.mailbox_id])
  const { to, cc } = answerRecipients(email, all, mailboxAddress)
  const { busy, error, run } = useAction()
  const [key] = useState(newKey)
  const path = `/api/emails/${encodeURIComponent(email.email_id)}/${all ? "reply-all" : "reply"}`
  const send = () => run(async () => go("emails", (await call("POST", path, { text }, { "idempotency-key": key })).data.email_id))
  const saveDraft = () =>
    run(async () => {
      await call("POST", `/api/mailboxes/${encodeURIComponent(email.mailbox_id)}/drafts`, { in_reply_to: email.email_id, reply_all: all, text })
      go("mailboxes", email.mailbox_id, "drafts")
    })
  return html`
    <form class="card" aria-label=${all ? "Reply to all" : "Reply"} onSubmit=${(/** @type {Event} */ e) => (e.preventDefault(), send())}>
      <dl class="meta" aria-label="Reply recipients">
        <dt>To</dt><dd dir="auto">${addressesShown(to.join(", ")) || "(nobody)"}</dd>
        ${cc.length > 0 && html`<dt>Cc</dt><dd dir="auto">${addressesShown(cc.join(", "))}</dd>`}
        <dt>Subject</dt><dd dir="auto">${answerSubject(email.subject)}</dd>
      </dl>
      <${TextArea} id="reply-text" label="Your reply" value=${text} onInput=${setText} error=${fieldError(error, "text")} autofocus />
      <${ErrorNote} error=${error} labels=${{ text: "Your reply" }} />
      <div class="actions">
        <button type="submit" disabled=${busy}>Send reply</button>
        <button type="button" class="secondary" disabled=${busy} onClick=${saveDraft}>Save as draft</button>
        <button type="button" class="secondary" onClick=${onClose}>Cancel</button>
      </div>
    </form>
  `
}
