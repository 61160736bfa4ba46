/**
 * Talking to the API from the dashboard: the session cookie rides along (same origin), and the
 * browser adds the Origin header the server checks on cookie-authenticated writes. Every answer is
 * SPEC's envelope; a refusal becomes an ApiError carrying its code, message and details.
 */

export class ApiError extends Error {
  /** @param {number} status @param {string} code @param {string} message @param {any} details */
  constructor(status, code, message, details) {
    super(message)
    this.status = status
    this.code = code
    this.details = details
  }
}

/** Someone to tell when the session is gone (main.js sends the reader to sign in). */
let onSignedOut = () => {}
/** @param {() => void} handler */
export const whenSignedOut = (handler) => {
  onSignedOut = handler
}

/**
 * The requests of the session signed in now. Signing out (or the account going) aborts those still
 * under way: answered after the session ended, they would be refused 401 and read as a session lost.
 */
let session = new AbortController()
export const endSession = () => {
  session.abort()
  session = new AbortController()
}

/**
 * @param {string} method
 * @param {string} path
 * @param {unknown} [body]
 * @param {Record<string, string>} [headers] more request headers (e.g. Idempotency-Key)
 * @returns {Promise<any>} the whole envelope
 */
export const call = async (method, path, body, headers = {}) => {
  /** @type {RequestInit} */
  const init = { method, credentials: "same-origin", headers: { accept: "application/json", ...headers } }
  if (body !== undefined) {
    init.body = JSON.stringify(body)
    init.headers = { ...init.headers, "content-type": "application/json" }
  }
  const signal = session.signal
  const response = await fetch(path, { ...init, signal }).catch((/** @type {unknown} */ failure) => {
    // Aborted by signing out: as it was. Otherwise the network (the browser's own words, "Failed to fetch", say nothing).
    if (signal.aborted) throw failure
    throw new Error("Mailroom could not be reached: check the connection, then try again.")
  })
  const envelope = await response.json().catch(() => null)
  // Signed out while the answer was being read: it is nobody's, as a request aborted before its answer is.
  if (signal.aborted) throw signal.reason
  if (response.ok && envelope !== null && envelope.success !== false) return envelope
  const error = envelope?.error ?? {}
  if (response.status === 401 && !path.startsWith("/api/auth/")) onSignedOut()
  throw new ApiError(response.status, error.code ?? "HTTP_" + response.status, error.message ?? response.statusText, error.details)
}

/** @param {Record<string, string | number | undefined>} params */
export const query = (params) => {
  const search = new URLSearchParams()
  for (const [key, value] of Object.entries(params)) if (value !== undefined && value !== "") search.set(key, String(value))
  const text = search.toString()
  return text ? "?" + text : ""
}

/** Who is signed in, remembered across reloads (the cookie itself is HttpOnly, out of the page's reach). */
const USER_KEY = "mailroom.user"

/** @returns {{ userId: string, email: string, name: string } | null} */
export const rememberedUser = () => {
  try {
    return JSON.parse(localStorage.getItem(USER_KEY) ?? "null")
  } catch {
    return null
  }
}

/** @param {{ userId: string, email: string, name: string } | null} user */
export const rememberUser = (user) => {
  if (user) localStorage.setItem(USER_KEY, JSON.stringify(user))
  else localStorage.removeItem(USER_KEY)
}

/** A field error's message from a VALIDATION_ERROR (`details.field_errors` on /api, `details` otherwise). */
/** @param {unknown} error @param {string} field */
export const fieldError = (error, field) => {
  if (!(error instanceof ApiError)) return undefined
  const details = error.details ?? {}
  return details.field_errors?.[field] ?? (typeof details[field] === "string" ? details[field] : undefined)
}

/**
 * A field error's message for `field` or for a part of it (`labels.1`, `conditions.from.0`: a list's
 * item, named with its place in the list counted from 1).
 * @param {unknown} error @param {string} field
 */
export const fieldErrorWithin = (error, field) => {
  if (!(error instanceof ApiError)) return undefined
  const details = error.details?.field_errors ?? error.details ?? {}
  const key = Object.keys(details).find((k) => k === field || k.startsWith(field + "."))
  if (key === undefined || typeof details[key] !== "string") return undefined
  const item = /\.(\d+)$/.exec(key)
  return item ? `${details[key]} (item ${Number(item[1]) + 1})` : details[key]
}

/** The mailbox list's largest page: the list is read 100 at a time, one request per 100 mailboxes. */
const MAILBOX_PAGE = 100

/**
 * The account's mailboxes, newest first, a page of at most 100 at a time. Paging stops at the last
 * page (`meta.hasMore`), or at an empty one should the list shrink meanwhile.
 * @returns {AsyncGenerator<any[]>}
 */
async function* mailboxPages() {
  for (let offset = 0; ; offset += MAILBOX_PAGE) {
    const answer = await call("GET", "/api/mailboxes" + query({ limit: MAILBOX_PAGE, offset }))
    if (answer.mailboxes.length === 0) return
    yield answer.mailboxes
    const more = answer.meta?.hasMore ?? offset + answer.mailboxes.length < (answer.meta?.total ?? 0)
    if (!more) return
  }
}

/**
 * Every mailbox of the account (enterprise accounts have no limit), newest first. A mailbox made
 * while paging shifts the pages by one: it is counted once all the same.
 * @returns {Promise<any[]>}
 */
export const allMailboxes = async () => {
  /** @type {Map<string, any>} */
  const mailboxes = new Map()
  for await (const page of mailboxPages()) for (const mailbox of page) if (!mailboxes.has(mailbox.mailbox_id)) mailboxes.set(mailbox.mailbox_id, mailbox)
  return [...mailboxes.values()]
}

/**
 * One mailbox of the account by its id; null when the account has none by that id (or it was deleted).
 * @param {string} mailboxId
 * @returns {Promise<any | null>}
 */
export const findMailbox = (mailboxId) =>
  call("GET", `/api/mailboxes/${encodeURIComponent(mailboxId)}`).then(
    (answer) => answer.mailbox,
    (error) => {
      if (isNotFound(error)) return null
      throw error
    }
  )

/** A refusal that says what was asked for is not there (or not the caller's). @param {unknown} error */
export const isNotFound = (error) => error instanceof ApiError && error.status === 404
