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
