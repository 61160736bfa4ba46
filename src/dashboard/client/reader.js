/** One email: who, when, labels, attachments, the raw download, its thread, and the body shown safely. */
import { html } from "htm/preact"
import { useEffect, useMemo, useState } from "preact/hooks"
import { call } from "./api.js"
import { mailDocument, SANDBOX } from "./mail-frame.js"
import { href } from "./router.js"
import { ErrorNote, size, when } from "./ui.js"

/** @param {{ emailId: string }} props */
export const ReaderPage = ({ emailId }) => {
  const [email, setEmail] = useState(/** @type {any} */ (null))
  const [thread, setThread] = useState(/** @type {any} */ (null))
  const [allowImages, setAllowImages] = useState(false)
  const [error, setError] = useState(/** @type {unknown} */ (null))
  const base = `/api/emails/${encodeURIComponent(emailId)}`

  useEffect(() => {
    setEmail(null)
    setThread(null)
    setAllowImages(false)
    ;(async () => {
      try {
        let { data } = await call("GET", base)
        if (data.labels.includes("unread")) data = (await call("PATCH", base, { remove_labels: ["unread"] })).data
        setEmail(data)
        const answer = await call("GET", `/api/threads/${encodeURIComponent(data.thread_id)}`)
        if (answer.data.message_count > 1) setThread(answer.data)
      } catch (failure) {
        setError(failure)
      }
    })()
  }, [emailId])

  const body = useMemo(() => (email?.html ? mailDocument(email.html, allowImages) : null), [email, allowImages])

  if (error) return html`<${ErrorNote} error=${error} />`
  if (!email) return html`<p class="muted">Loading…</p>`
  const to = email.to.join(", ")
  return html`
    <p><a href=${href("mailboxes", email.mailbox_id)}>← Back to the inbox</a></p>
    <article class="card reader">
      <h1>${email.subject || "(no subject)"}</h1>
      <dl class="meta">
        <dt>From</dt><dd>${email.from}</dd>
        <dt>To</dt><dd>${to}</dd>
        <dt>Received</dt><dd><time datetime=${email.received_at}>${new Date(email.received_at).toLocaleString()}</time></dd>
        <dt>Labels</dt><dd>${email.labels.map((/** @type {string} */ label) => html`<span class="tag">${label}</span> `)}</dd>
      </dl>
      <div class="actions">
        <a class="button secondary" href=${base + "/raw"} download>Download raw (.eml)</a>
      </div>
      ${email.attachments.length > 0 && html`
        <h2>Attachments</h2>
        <ul class="attachments">
          ${email.attachments.map((/** @type {any} */ a) => html`
            <li><a href=${`${base}/attachments/${encodeURIComponent(a.attachment_id)}`} download>${a.filename ?? a.attachment_id}</a>
              <span class="muted small"> ${a.content_type}, ${size(a.size)}</span></li>`)}
        </ul>`}
      ${body
        ? html`
          ${body.blockedImages > 0 && html`
            <p class="notice" role="status">Remote images are blocked: loading them tells the sender you read this.
              <button type="button" class="secondary" onClick=${() => setAllowImages(true)}>Show images</button></p>`}
          <iframe class="mail-body" title="Email content" sandbox=${SANDBOX} referrerpolicy="no-referrer" srcdoc=${body.srcdoc}></iframe>`
        : html`<pre class="mail-text">${email.text}</pre>`}
    </article>
    ${thread && html`
      <section class="card">
        <h2>Thread (${thread.message_count})</h2>
        <ol class="list">
          ${thread.emails.map((/** @type {any} */ e) => html`
            <li class="item"><a href=${href("emails", e.email_id)} aria-current=${e.email_id === emailId ? "page" : undefined}>
              ${e.from} · ${e.subject}</a> <span class="muted small">${when(e.received_at)}</span></li>`)}
        </ol>
      </section>`}
  `
}
