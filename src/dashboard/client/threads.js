/**
 * Conversations. The API has threads by id (`GET /threads/{id}`, oldest first) but no list of
 * them: the inbox groups the page of mail it shows by thread, and a conversation is read here, each
 * message's text one under the other, with a reply to the newest.
 */
import { html } from "htm/preact"
import { useEffect, useState } from "preact/hooks"
import { call } from "./api.js"
import { ReplyForm } from "./compose.js"
import { href } from "./router.js"
import { ErrorNote, when } from "./ui.js"

/** At most this many messages' bodies are fetched at once; older ones are shown as their preview. */
const BODIES = 20

/**
 * The page's emails by conversation, the most recent conversation first.
 * @param {any[]} emails newest first
 */
export const byThread = (emails) => {
  /** @type {Map<string, any[]>} */
  const threads = new Map()
  for (const email of emails) threads.set(email.thread_id, [...(threads.get(email.thread_id) ?? []), email])
  return [...threads.entries()].map(([threadId, messages]) => ({
    threadId,
    newest: messages[0],
    count: messages.length,
    unread: messages.some((m) => m.labels.includes("unread")),
    people: [...new Set(messages.map((m) => m.from))]
  }))
}

/** @param {{ emails: any[] }} props */
export const ThreadList = ({ emails }) => html`
  <ul class="list mail" aria-label="Conversations">
    ${byThread(emails).map((t) => html`
      <li key=${t.threadId} class=${t.unread ? "item unread" : "item"}>
        <a class="mail-link" href=${href("threads", t.threadId)}>
          <span class="from">${t.unread && html`<span class="dot" aria-label="Unread"></span>`}${t.people.join(", ")}</span>
          <span class="subject">${t.newest.subject || "(no subject)"}${t.count > 1 && html` <span class="tag" aria-label=${`${t.count} messages`}>${t.count}</span>`}</span>
          <span class="snippet muted">${t.newest.snippet}</span>
          <time class="muted small" datetime=${t.newest.received_at}>${when(t.newest.received_at)}</time>
        </a>
      </li>`)}
  </ul>
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
        const { data } = await call("GET", `/api/threads/${encodeURIComponent(threadId)}`)
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
  return html`
    <p><a href=${href("mailboxes", thread.mailbox_id)}>← Back to the inbox</a></p>
    <h1>${thread.subject || "(no subject)"}</h1>
    <p class="muted">${thread.message_count} ${thread.message_count === 1 ? "message" : "messages"}, oldest first</p>
    <ol class="conversation" aria-label="Messages">
      ${thread.emails.map((/** @type {any} */ e) => {
        const full = bodies[e.email_id]
        return html`
          <li key=${e.email_id} class=${"card message " + e.direction}>
            <div class="toolbar">
              <strong>${e.from}</strong>
              <span class="tag">${e.direction === "outbound" ? "sent" : "received"}</span>
              <time class="muted small" datetime=${e.received_at}>${new Date(e.received_at).toLocaleString()}</time>
              <a class="small" href=${href("emails", e.email_id)} aria-label=${`Open the message from ${e.from}, ${new Date(e.received_at).toLocaleString()}`}>Open</a>
            </div>
            <div class="muted small">To ${e.to.join(", ")}${e.cc.length > 0 ? ` · Cc ${e.cc.join(", ")}` : ""}</div>
            <pre class="mail-text">${full ? full.extracted?.reply_text || full.text : e.snippet}</pre>
          </li>`
      })}
    </ol>
    ${newestFull && (replying
      ? html`<${ReplyForm} email=${newestFull} all=${false} onClose=${() => setReplying(false)} />`
      : html`<div class="actions"><button type="button" onClick=${() => setReplying(true)}>Reply</button></div>`)}
  `
}
