/**
 * Conversations: a mailbox's, listed by the API (`GET /mailboxes/{id}/threads`, the most recently
 * active first), and one read here whole (`GET /threads/{id}`, oldest first), each message's text one
 * under the other, with a reply to the newest. Opening a conversation marks it read, every email of it;
 * it can be deleted whole.
 */
import { html } from "htm/preact"
import { useEffect, useState } from "preact/hooks"
import { call } from "./api.js"
import { addressesShown, addressShown } from "./idn.js"
import { ReplyForm } from "./compose.js"
import { backToList, go, href } from "./router.js"
import { ConfirmDelete, ErrorNote, when } from "./ui.js"

/** At most this many messages' bodies are fetched at once; older ones are shown as their preview. */
const BODIES = 20

/** One conversation of a list (the API's thread summary), a link to read it whole. @param {{ item: any }} props */
export const ThreadLink = ({ item: t }) => html`
  <a class="mail-link" href=${href("threads", t.thread_id)}>
    <span class="from" title=${t.senders.join(", ")}>${t.unread_count > 0 && html`<span class="dot" aria-label=${`${t.unread_count} unread`}></span>`}<span dir="auto">${addressesShown(t.senders.join(", "))}</span></span>
    <span class="subject"><span class="clip" dir="auto" title=${t.subject || undefined}>${t.subject || "(no subject)"}</span>${t.message_count > 1 && html` <span class="tag" aria-label=${`${t.message_count} messages`}>${t.message_count}</span>`}${t.has_attachments && html` <span class="tag" aria-label="Has attachments">attachment</span>`}</span>
    <span class="snippet muted" dir="auto" title=${t.latest.snippet || undefined}>${t.latest.snippet}</span>
    <time class="muted small" datetime=${t.last_received_at}>${when(t.last_received_at)}</time>
  </a>
`

/** @param {{ threadId: string }} props */
export const ConversationPage = ({ threadId }) => {
  const [thread, setThread] = useState(/** @type {any} */ (null))
  const [bodies, setBodies] = useState(/** @type {Record<string, any>} */ ({}))
  const [replying, setReplying] = useState(false)
  const [error, setError] = useState(/** @type {unknown} */ (null))

  useEffect(() => {
    ;(async () => {
      try {
        const base = `/api/threads/${encodeURIComponent(threadId)}`
        let { data } = await call("GET", base)
        // Read here, the conversation is read: as the email's page does for one email.
        if (data.emails.some((/** @type {any} */ e) => e.labels.includes("unread"))) data = (await call("PATCH", base, { remove_labels: ["unread"] })).data
        setThread(data)
        const recent = data.emails.slice(-BODIES)
        const full = await Promise.all(recent.map((/** @type {any} */ e) => call("GET", `/api/emails/${encodeURIComponent(e.email_id)}`)))
        setBodies(Object.fromEntries(full.map((answer) => [answer.data.email_id, answer.data])))
      } catch (failure) {
        setError(failure)
      }
    })()
  }, [threadId])

  if (error) return html`<${ErrorNote} error=${error} />`
  if (!thread) return html`<p class="muted">Loading…</p>`
  const newest = thread.emails[thread.emails.length - 1]
  const newestFull = newest && bodies[newest.email_id]
  const back = backToList(thread.mailbox_id)
  return html`
    <p><a href=${back.href}>${back.label}</a></p>
    <h1 dir="auto">${thread.subject || "(no subject)"}</h1>
    <p class="muted">${thread.message_count} ${thread.message_count === 1 ? "message" : "messages"}, oldest first</p>
    <ol class="conversation" aria-label="Messages">
      ${thread.emails.map((/** @type {any} */ e) => {
        const full = bodies[e.email_id]
        return html`
          <li key=${e.email_id} class=${"card message " + e.direction}>
            <div class="toolbar">
              <strong dir="auto" title=${e.from}>${e.from_name || addressShown(e.from)}</strong>
              <span class="tag">${e.direction === "outbound" ? "sent" : "received"}</span>
              <time class="muted small" datetime=${e.received_at}>${new Date(e.received_at).toLocaleString()}</time>
              <a class="small" href=${href("emails", e.email_id)} aria-label=${`Open the message from ${e.from}, ${new Date(e.received_at).toLocaleString()}`}>Open</a>
            </div>
            <div class="muted small">To ${addressesShown(e.to.join(", "))}${e.cc.length > 0 ? ` · Cc ${addressesShown(e.cc.join(", "))}` : ""}</div>
            <pre class="mail-text" dir="auto">${full ? full.extracted?.reply_text || full.text : e.snippet}</pre>
          </li>`
      })}
    </ol>
    ${newestFull && (replying
      ? html`<${ReplyForm} email=${newestFull} all=${false} onClose=${() => setReplying(false)} />`
      : html`<div class="actions"><button type="button" onClick=${() => setReplying(true)}>Reply</button></div>`)}
    <div class="actions">
      <${ConfirmDelete} what="conversation" warning=${thread.message_count === 1 ? "Its one message goes for good." : `All ${thread.message_count} messages of this conversation go for good.`}
        onConfirm=${async () => (await call("DELETE", `/api/threads/${encodeURIComponent(threadId)}`), go("mailboxes", thread.mailbox_id))} />
    </div>
  `
}
