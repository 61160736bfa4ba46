/** Pages are addressed by the URL's fragment (`#/mailboxes/mbx_1`): the server serves one page at `/`. */
import { useEffect, useState } from "preact/hooks"

/** @returns {string[]} the path's segments, e.g. ["mailboxes", "mbx_1"] */
const current = () => location.hash.replace(/^#\/?/, "").split("?")[0].split("/").filter(Boolean).map(decodeURIComponent)

export const useRoute = () => {
  const [route, setRoute] = useState(current)
  useEffect(() => {
    const changed = () => setRoute(current())
    addEventListener("hashchange", changed)
    return () => removeEventListener("hashchange", changed)
  }, [])
  return route
}

/** @param {...string} segments */
export const href = (...segments) => "#/" + segments.map(encodeURIComponent).join("/")

/** @param {...string} segments */
export const go = (...segments) => {
  location.hash = href(...segments)
}

/**
 * The current page's settings as its URL keeps them (`#/search?q=invoice`): a page reads them when it
 * opens, so that Back (or a link shared) shows it as it was left.
 */
export const pageParams = () => new URLSearchParams(location.hash.split("?")[1] ?? "")

/** The address of the list (a mailbox's, All mail, a search) last shown, as it was left: settings, page and all. */
let listLeft = ""

/**
 * Where an email's or a conversation's "Back" link goes: to the list it was opened from as it was
 * left (the browser's Back goes there too), when that list is its mailbox's, All mail or a search;
 * otherwise to its mailbox's inbox.
 * @param {string} mailboxId
 * @returns {{ href: string, label: string }}
 */
export const backToList = (mailboxId) => {
  const path = listLeft.split("?")[0]
  if (path === href("search")) return { href: listLeft, label: "← Back to the search" }
  if (path === href("inbox") || path === href("mailboxes", mailboxId)) return { href: listLeft, label: "← Back to the inbox" }
  return { href: href("mailboxes", mailboxId), label: "← Back to the inbox" }
}

/**
 * Keep `params` (those set and not empty) in the current page's URL, in place of the history entry
 * rather than as a new one: Back leaves the page, it does not undo a setting. Lists keep theirs this
 * way, so the address kept is also where an email's Back link returns (backToList).
 * @param {Record<string, string | number | undefined>} params
 */
export const keepPageParams = (params) => {
  const kept = new URLSearchParams()
  for (const [name, value] of Object.entries(params)) if (value !== undefined && value !== "") kept.set(name, String(value))
  const url = new URL(location.href)
  const path = url.hash.split("?")[0]
  const query = kept.toString()
  url.hash = query === "" ? path : `${path}?${query}`
  if (url.href !== location.href) history.replaceState(history.state, "", url)
  listLeft = url.hash
}
