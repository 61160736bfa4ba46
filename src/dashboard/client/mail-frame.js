/**
 * A received email's HTML, shown without trusting it. Three layers:
 * 1. the iframe's `sandbox` (no `allow-same-origin`): the document is a stranger to the dashboard,
 *    with an opaque origin of its own; `allow-popups…` lets links open outside it;
 * 2. the document's own policy (a CSP `<meta>` first in its head): nothing loads but inline styles
 *    and data: images, remote images only once the reader allows them, and one script, ours
 *    (frame-height.js: it tells the page the email's height), by a nonce made for the document;
 * 3. before that, the HTML is cleaned in an inert DOMParser document: scripts, frames, forms and
 *    event attributes removed, remote image addresses parked, so nothing is even attempted (a
 *    blocked attempt would still be noise in the console and a hint to the sender when allowed later).
 * The sandbox allows scripts for that one: the email's own never run, since the cleaning removed
 * them and the frame's policy and the page's (which the frame inherits: it allows the script by
 * its hash) refuse any other.
 */
import { html } from "htm/preact"
import { useEffect, useLayoutEffect, useMemo, useRef } from "preact/hooks"
import { FRAME_SCRIPT } from "./frame-height.js"

const REMOVED = "script, iframe, frame, frameset, object, embed, applet, form, base, meta, link[rel=import], noscript"
const REMOTE = /^\s*(https?:)?\/\//i
const PARKED = "data-mailroom-src"

/** @param {string} value */
const isScriptUrl = (value) => /^\s*(javascript|vbscript|data:text\/html)/i.test(value)

/**
 * `source` with `inTag` (an attribute within a tag) replaced until nothing changes: one tag may hold
 * several, and a replacement may uncover another.
 * @param {string} source @param {RegExp} inTag @param {string} replacement
 */
const rewriteTags = (source, inTag, replacement) => {
  let before
  do {
    before = source
    source = source.replace(inTag, replacement)
  } while (source !== before)
  return source
}

/**
 * Event-handler attributes renamed before parsing: Chromium checks them against the dashboard's own
 * policy as soon as they are parsed, even in an inert document, and reports each as a console error.
 * @param {string} source
 */
const disarmHandlers = (source) => rewriteTags(source, /(<[^<>]*?\s)(on[a-z]+\s*=)/gi, "$1data-mailroom-removed-$2")

/**
 * The message's own images (`src="cid:…"`, RFC 2392) parked before parsing, as remote ones are after:
 * Chromium checks an image address against the dashboard's policy as soon as it is parsed, and a
 * `cid:` one would be refused there and in the frame (a console error each). Put back as data: URLs.
 * @param {string} source
 */
const parkContentIds = (source) => rewriteTags(source, /(<[^<>]*?\s)(src|background)(\s*=\s*["']?\s*)cid:/gi, "$1data-mailroom-cid-$2$3")

/** The Content-ID a parked `cid:` address names (the id without its angle brackets, URL-encoded). @param {string} value */
const contentIdOf = (value) => {
  try {
    return decodeURIComponent(value.trim())
  } catch {
    return value.trim()
  }
}

/**
 * @param {string} source the email's HTML
 * @param {boolean} allowImages
 * @param {Record<string, string>} [inline] the message's own images by Content-ID (no angle brackets), as data: URLs
 * @returns {{ srcdoc: string, blockedImages: number }}
 */
export const mailDocument = (source, allowImages, inline = {}) => {
  const doc = new DOMParser().parseFromString(parkContentIds(disarmHandlers(source)), "text/html")
  for (const element of doc.querySelectorAll(REMOVED)) element.remove()
  let blockedImages = 0
  for (const element of doc.querySelectorAll("*")) {
    for (const attribute of [...element.attributes]) {
      const name = attribute.name.toLowerCase()
      if (name.startsWith("on") || name.startsWith("data-mailroom-removed-") || (["href", "src", "action", "formaction", "xlink:href"].includes(name) && isScriptUrl(attribute.value))) {
        element.removeAttribute(attribute.name)
      }
    }
    if (element.tagName === "A") {
      element.setAttribute("target", "_blank")
      element.setAttribute("rel", "noopener noreferrer")
    }
    // The message's own images (cid:) are part of it, not remote: shown as the data: URLs given, once read.
    for (const name of ["src", "background"]) {
      const parked = element.getAttribute(`data-mailroom-cid-${name}`)
      if (parked === null) continue
      element.removeAttribute(`data-mailroom-cid-${name}`)
      const url = inline[contentIdOf(parked)]
      if (url !== undefined) element.setAttribute(name, url)
    }
    for (const name of ["src", "srcset", "background", "poster"]) {
      const value = element.getAttribute(name)
      if (value && REMOTE.test(value) && !allowImages) {
        element.removeAttribute(name)
        element.setAttribute(PARKED + "-" + name, value)
        blockedImages++
      }
    }
  }
  const images = allowImages ? "data: https: http:" : "data:"
  const nonce = crypto.randomUUID().replaceAll("-", "")
  const policy = `default-src 'none'; script-src 'nonce-${nonce}'; img-src ${images}; style-src 'unsafe-inline'; font-src data:; base-uri 'none'; form-action 'none'`
  const head = `<meta http-equiv="Content-Security-Policy" content="${policy}"><meta name="referrer" content="no-referrer">` +
    `<base target="_blank"><style>body{font-family:system-ui,sans-serif;margin:1rem;overflow-wrap:anywhere}img{max-width:100%;height:auto}</style>` +
    `<script nonce="${nonce}">${FRAME_SCRIPT}</script>`
  return { srcdoc: `<!doctype html><html><head>${head}${doc.head.innerHTML}</head><body>${doc.body.innerHTML}</body></html>`, blockedImages }
}

/** The frame's sandbox: an opaque origin, scripts (frame-height.js's alone: see above); links may open a new, unsandboxed tab. */
const SANDBOX = "allow-scripts allow-popups allow-popups-to-escape-sandbox"

/** The tallest a frame grows: beyond it, an email (a page-long table, say) scrolls within its frame. */
const MAX_HEIGHT = 30_000

/**
 * A mail document (mailDocument's `srcdoc`) in its sandboxed frame, grown to the email's height as the
 * frame reports it (frame-height.js), so that the email reads with the page. It grows, never shrinks
 * (a wider window, or the email shown again with its images, leaves some room below rather than the
 * page jumping), up to MAX_HEIGHT. Content
 * sized by the frame's own height (`100vh`) would grow it forever: such an email overflows the frame
 * by as much after a step as before it, and the frame stops there (the rest scrolls within it).
 * @param {{ title: string, srcdoc: string }} props
 */
export const MailFrame = ({ title, srcdoc }) => {
  const frame = useRef(/** @type {HTMLIFrameElement | null} */ (null))
  /** The height the frame last grew to: a new document of the same email (its images shown) starts there, the page where it was. */
  const grown = useRef(0)
  useLayoutEffect(() => {
    if (frame.current !== null && grown.current > 0) frame.current.style.height = `${grown.current}px`
  }, [srcdoc])
  useEffect(() => {
    /** The last report's overflow, and the frame's height it was measured in. */
    let last = { viewport: 0, overflow: 0 }
    let following = false
    /** @param {MessageEvent} event */
    const onMessage = (event) => {
      const element = frame.current
      if (following || element === null || event.source !== element.contentWindow) return
      const { height, viewport } = event.data?.mailroomFrame ?? {}
      // Measured before the frame's last resize: the report that follows it tells.
      if (!Number.isFinite(height) || viewport !== element.clientHeight) return
      const overflow = Math.max(0, Math.min(Math.ceil(height), MAX_HEIGHT) - viewport)
      following = overflow > 0 && last.viewport < viewport && Math.abs(overflow - last.overflow) <= 1
      last = { viewport, overflow }
      if (overflow > 0 && !following) {
        grown.current = element.offsetHeight + overflow
        element.style.height = `${grown.current}px`
      }
    }
    addEventListener("message", onMessage)
    return () => removeEventListener("message", onMessage)
  }, [srcdoc])
  return html`<iframe ref=${frame} key=${srcdoc} class="mail-body" title=${title} sandbox=${SANDBOX} referrerpolicy="no-referrer" srcdoc=${srcdoc}></iframe>`
}

/**
 * An HTML version shown as it will be sent (a draft's, a forwarded email's): in its frame, remote images
 * kept back. One document for the same HTML: each has a nonce of its own, and a new one is a new frame.
 * @param {{ title: string, html: string }} props
 */
export const HtmlPreview = ({ title, html: source }) => {
  const srcdoc = useMemo(() => mailDocument(source, false).srcdoc, [source])
  return html`<${MailFrame} title=${title} srcdoc=${srcdoc} />`
}
