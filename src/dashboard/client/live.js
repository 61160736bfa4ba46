/**
 * Mail lists without a reload: one EventSource on /api/events (the session's event stream) for the
 * whole page; pages subscribe to hear that mail arrived, or was deleted (by an agent, say).
 * EventSource reconnects by itself, resuming after the last event id it saw.
 */
/** @type {EventSource | null} */
let source = null
/** @type {Set<(event: any) => void>} */
const listeners = new Set()

export const connect = () => {
  if (source) return
  source = new EventSource("/api/events?types=email.received,email.deleted")
  /** @param {Event} message */
  const tell = (message) => {
    const event = JSON.parse(/** @type {MessageEvent} */ (message).data)
    for (const listener of listeners) listener(event)
  }
  source.addEventListener("email.received", tell)
  source.addEventListener("email.deleted", tell)
}

export const disconnect = () => {
  source?.close()
  source = null
}

/** Hear of mail arriving or deleted (`event.event` says which). @param {(event: any) => void} listener @returns {() => void} the unsubscribe */
export const onMail = (listener) => {
  listeners.add(listener)
  return () => listeners.delete(listener)
}
