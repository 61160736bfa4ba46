/**
 * Pages without a reload: one EventSource on /api/events (the session's event stream) for the whole
 * page; pages subscribe to hear that mail arrived, or was deleted (by an agent, say), or that sent
 * mail reached (or failed to reach) a recipient: the Drafts page hears by it that a draft went out.
 * EventSource reconnects by itself after a network error, resuming after the last event id it saw;
 * after an answer that is not a stream (a 429, a 503 from a server stopping) it stops for good. This
 * module then opens a new one, waiting longer each time, and once it is up tells every listener to
 * read afresh (`stream.reopened`): what happened in between is not replayed.
 *
 * Drafts have no event of their own (an agent's edit is no event kind a webhook or the stream
 * carries): while a page listens for them (`onDrafts`), the newest change among the drafts awaiting
 * approval is read instead, one small request every DRAFTS_POLL_MS while the stream is wanted and the
 * tab is shown (and at once when listening starts, the stream is opened, or the tab shown again).
 * A draft edited becomes the newest; one written, sent or deleted changes how many there are.
 */
import { call, query } from "./api.js"

/** @type {EventSource | null} */
let source = null
/** Whether the page is signed in and wants the stream (until `disconnect`). */
let wanted = false
/** @type {ReturnType<typeof setTimeout> | undefined} */
let reopening
const FIRST_WAIT_MS = 1000
const LONGEST_WAIT_MS = 60_000
let wait = FIRST_WAIT_MS
/** Whether the stream is up (or not yet known to be down). */
let up = true
/** @type {Set<(event: any) => void>} */
const mailListeners = new Set()
/** @type {Set<(event: any) => void>} */
const deliveryListeners = new Set()
/** @type {Set<(up: boolean) => void>} */
const stateListeners = new Set()
/** @type {Set<(event: any) => void>} */
const draftListeners = new Set()
/** Fifteen seconds: 4 small reads a minute, well inside a person's 100 (and 2,000 an hour). */
const DRAFTS_POLL_MS = 15_000
/** @type {ReturnType<typeof setTimeout> | undefined} */
let draftsTimer
/** The drafts awaiting approval as last read: how many, and the newest change (undefined: not read yet). */
/** @type {string | undefined} */
let draftsSeen
/** Bumped whenever polling starts afresh or stops: an answer to an older round is nobody's. */
let draftsRound = 0

const MAIL = ["email.received", "email.deleted"]
/** Each recipient's delivery of sent mail, as the mta reports it: any of them says the email left. */
const DELIVERY = ["email.sent", "email.delivery_delayed", "email.bounced", "email.failed"]

/** @param {boolean} value */
const setUp = (value) => {
  if (up === value) return
  up = value
  for (const listener of stateListeners) listener(value)
}

/** @param {Set<(event: any) => void>} listeners */
const tellTo = (listeners) => (/** @type {Event} */ message) => {
  const event = JSON.parse(/** @type {MessageEvent} */ (message).data)
  for (const listener of listeners) listener(event)
}

/** @param {boolean} reopened whether an earlier stream stopped for good: the pages missed what happened since */
const open = (reopened) => {
  const stream = new EventSource(`/api/events?types=${[...MAIL, ...DELIVERY].join(",")}`)
  source = stream
  for (const kind of MAIL) stream.addEventListener(kind, tellTo(mailListeners))
  for (const kind of DELIVERY) stream.addEventListener(kind, tellTo(deliveryListeners))
  stream.addEventListener("open", () => {
    wait = FIRST_WAIT_MS
    setUp(true)
    if (!reopened) return
    reopened = false
    const event = { event: "stream.reopened", data: {} }
    for (const listener of [...mailListeners, ...deliveryListeners]) listener(event)
  })
  stream.addEventListener("error", () => {
    setUp(false)
    if (stream.readyState !== EventSource.CLOSED || source !== stream) return
    source = null
    reopening = setTimeout(() => {
      reopening = undefined
      if (wanted && source === null) open(true)
    }, wait)
    wait = Math.min(wait * 2, LONGEST_WAIT_MS)
  })
}

/**
 * Read the drafts' newest change now, tell the listeners when it is not what was read before, and
 * read again in DRAFTS_POLL_MS; `stop` only stops.
 * @param {boolean} [stop]
 */
const pollDrafts = async (stop = false) => {
  const round = ++draftsRound
  clearTimeout(draftsTimer)
  draftsTimer = undefined
  if (stop || !wanted || draftListeners.size === 0) return
  if (!document.hidden) {
    try {
      const answer = await call("GET", "/api/drafts" + query({ status: "draft", sort: "updated_at:desc", limit: 1 }))
      if (round !== draftsRound) return
      const newest = answer.data[0]
      const seen = `${answer.meta.total} ${newest?.draft_id ?? ""} ${newest?.updated_at ?? ""}`
      const changed = draftsSeen !== undefined && seen !== draftsSeen
      draftsSeen = seen
      if (changed) for (const listener of draftListeners) listener({ event: "drafts.changed", data: {} })
    } catch {
      // A read refused (a 429) or unanswered is no change: the next round asks again.
      if (round !== draftsRound) return
    }
  }
  draftsTimer = setTimeout(() => pollDrafts(), DRAFTS_POLL_MS)
}

document.addEventListener("visibilitychange", () => {
  if (!document.hidden && draftListeners.size > 0 && wanted) pollDrafts()
})

export const connect = () => {
  wanted = true
  if (draftListeners.size > 0) pollDrafts()
  if (source || reopening !== undefined) return
  open(false)
}

export const disconnect = () => {
  wanted = false
  clearTimeout(reopening)
  reopening = undefined
  source?.close()
  source = null
  wait = FIRST_WAIT_MS
  setUp(true)
  pollDrafts(true)
}

/** Hear whether the stream is up: false while it is down and being opened again. @param {(up: boolean) => void} listener @returns {() => void} the unsubscribe */
export const onStreamState = (listener) => {
  stateListeners.add(listener)
  return () => stateListeners.delete(listener)
}

/** Whether the stream is up now (or not yet known to be down). */
export const streamUp = () => up

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
 * Hear that the drafts awaiting approval changed (an agent edited, wrote, sent or deleted one), within
 * DRAFTS_POLL_MS. @param {(event: any) => void} listener @returns {() => void} the unsubscribe
 */
export const onDrafts = (listener) => {
  draftListeners.add(listener)
  if (draftListeners.size === 1) pollDrafts()
  return () => {
    draftListeners.delete(listener)
    if (draftListeners.size > 0) return
    // Read afresh by the next page that listens, which reads the drafts itself.
    draftsSeen = undefined
    pollDrafts(true)
  }
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
