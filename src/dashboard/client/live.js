/**
 * Pages without a reload: one EventSource on /api/events (the session's event stream) for the whole
 * page; pages subscribe to hear that mail arrived, or was deleted (by an agent, say), or that sent
 * mail reached (or failed to reach) a recipient: the Drafts page hears by it that a draft went out.
 * EventSource reconnects by itself, resuming after the last event id it saw.
 */
/** @type {EventSource | null} */
let source = null
/** @type {Set<(event: any) => void>} */
const mailListeners = new Set()
/** @type {Set<(event: any) => void>} */
const deliveryListeners = new Set()

const MAIL = ["email.received", "email.deleted"]
/** Each recipient's delivery of sent mail, as the mta reports it: any of them says the email left. */
const DELIVERY = ["email.sent", "email.delivery_delayed", "email.bounced", "email.failed"]

/** @param {Set<(event: any) => void>} listeners */
const tellTo = (listeners) => (/** @type {Event} */ message) => {
  const event = JSON.parse(/** @type {MessageEvent} */ (message).data)
  for (const listener of listeners) listener(event)
}

export const connect = () => {
  if (source) return
  source = new EventSource(`/api/events?types=${[...MAIL, ...DELIVERY].join(",")}`)
  for (const kind of MAIL) source.addEventListener(kind, tellTo(mailListeners))
  for (const kind of DELIVERY) source.addEventListener(kind, tellTo(deliveryListeners))
}

export const disconnect = () => {
  source?.close()
  source = null
}

/** Hear of mail arriving or deleted (`event.event` says which). @param {(event: any) => void} listener @returns {() => void} the unsubscribe */
export const onMail = (listener) => {
  mailListeners.add(listener)
  return () => mailListeners.delete(listener)
}

/** Hear of sent mail's delivery to a recipient (`event.data.email_id` names the email). @param {(event: any) => void} listener @returns {() => void} the unsubscribe */
export const onDelivery = (listener) => {
  deliveryListeners.add(listener)
  return () => deliveryListeners.delete(listener)
}

/**
 * `read` run at most once at a time however many events ask for it: an event while it runs asks for
 * one more run after it. A burst of events (a stream that reconnects replays what it missed) costs two
 * reads, not one each, which on the free plan's 20 requests a minute ran the page into 429s.
 * @param {() => Promise<unknown>} read
 * @returns {() => void}
 */
export const coalesced = (read) => {
  let running = false
  let again = false
  const run = () => {
    if (running) {
      again = true
      return
    }
    running = true
    read().finally(() => {
      running = false
      if (again) {
        again = false
        run()
      }
    })
  }
  return run
}
