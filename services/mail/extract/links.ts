/**
 * The http(s) links of a message: the anchors of its HTML body (with their text), the URLs written
 * out in either body, and the `List-Unsubscribe` header's. One entry per URL, the first anchor text
 * that says something kept. A link is marked with what it is for (`kind`) when its text says so, or,
 * for a link whose text names no purpose ("click here", a bare URL), its URL or the words before it;
 * the rest are `null`. A tracking redirect's URL says nothing: its text does.
 */
import type { Document, Element } from "domhandler"
import { getAttributeValue, getElementsByTagName, textContent } from "domutils"

export type LinkKind = "confirmation" | "sign_in" | "password_reset" | "unsubscribe"

export interface Link {
  readonly url: string
  readonly text: string | null
  readonly kind: LinkKind | null
}

/** At most this many links per message: a newsletter's hundred footer links add nothing for an agent. */
export const MAX_LINKS = 100
const MAX_URL = 2048
const MAX_TEXT = 200

/**
 * Words that say what a link is for, most specific first (a password-reset link often says
 * "confirm"; an unsubscribe link often sits beside "sign in"), matched lower-cased on the anchor
 * text, then (for a link whose text names no purpose) the words before it.
 */
const saying: ReadonlyArray<readonly [LinkKind, RegExp]> = [
  ["unsubscribe", /unsubscri|opt[- ]?out|abmelden|abbestellen|d[ée]sinscri|d[ée]sabonner|(darse|darte|date) de baja|cancelar (la )?suscripci|配信停止|購読解除/],
  ["password_reset", /reset|passwor[dt]|kennwort|mot de passe|contrase[ñn]a|パスワード/],
  ["sign_in", /sign[ -]?in|log[ -]?in|magic|einloggen|anmelden|se connecter|connexion|iniciar sesi[óo]n|ログイン|サインイン/],
  ["confirmation", /confirm|verif|activat|best[äa]tig|aktivier|v[ée]rifi|valider|validez|confirmar|activar|確認|認証|有効化/]
]

/** What a URL's path and query say, read only when the anchor text says nothing ("click here", a bare URL). */
const pointing: ReadonlyArray<readonly [LinkKind, RegExp]> = [
  ["unsubscribe", /unsubscri|opt-?out/],
  ["password_reset", /(reset|forgot|recover)[-_/]?(your[-_]?)?password|password[-_/]?(reset|forgot|recover)/],
  ["sign_in", /magic/],
  ["confirmation", /^(?=.*(verify|verification|confirm|activat))(?=.*([?&](token|code|key|t)=|\/[A-Za-z0-9_-]{16,}))/],
  ["sign_in", /^(?=.*(log-?in|sign-?in|\bauth\b))(?=.*[?&](token|code|key)=)/]
]

/** Anchor text that names no purpose: the URL and the words before the link say it instead. */
const GENERIC = /^(click here|here|this link|link|hier|ici|aquí|aqui|こちら|ここ)$/

export const kindOf = (url: string, text: string | null, before: string): LinkKind | null => {
  const label = (text ?? "").toLowerCase()
  for (const [kind, words] of saying) if (words.test(label)) return kind
  if (label === "" || GENERIC.test(label) || label.startsWith("http")) {
    let target = url.toLowerCase()
    try {
      const parsed = new URL(url)
      target = decodeURIComponent(parsed.pathname + parsed.search).toLowerCase()
    } catch {
      // Read as written.
    }
    for (const [kind, words] of pointing) if (words.test(target)) return kind
    const context = before.toLowerCase()
    for (const [kind, words] of saying) if (words.test(context)) return kind
  }
  return null
}

const isHttp = (url: string) => /^https?:\/\/[^\s/]/i.test(url) && url.length <= MAX_URL

const squeeze = (text: string) => text.replace(/\s+/g, " ").trim()

/** The words written before a position in a text: at most 100 characters, none before the previous link. */
const wordsBefore = (text: string, index: number, floor: number) => squeeze(text.slice(Math.max(index - 100, floor, 0), index))

/** URLs in plain text: up to white space or a character that cannot end one; trailing punctuation dropped. */
const URL_IN_TEXT = /https?:\/\/[^\s<>"'`\[\]{}|\\^]+/gi
const trimTrailing = (url: string) => {
  let end = url.length
  while (end > 0 && /[.,;:!?)'"»」]/.test(url[end - 1]!)) {
    // A closing parenthesis that closes one in the URL (a Wikipedia link) belongs to it.
    if (url[end - 1] === ")" && url.slice(0, end - 1).includes("(")) break
    end--
  }
  return url.slice(0, end)
}

export interface LinkSources {
  readonly document: Document | null
  /** The visible text of the HTML body, for the words before each anchor. */
  readonly htmlText: string
  readonly text: string
  readonly listUnsubscribe: ReadonlyArray<string>
}

export const extractLinks = (sources: LinkSources): Array<Link> => {
  const found = new Map<string, { text: string | null; kind: LinkKind | null }>()
  const add = (rawUrl: string, text: string | null, before: string, kind?: LinkKind) => {
    const url = rawUrl.trim()
    if (!isHttp(url)) return
    const existing = found.get(url)
    const label = text && squeeze(text).length > 0 ? squeeze(text).slice(0, MAX_TEXT) : null
    const linkKind = kind ?? kindOf(url, label, before)
    if (existing) {
      found.set(url, { text: existing.text ?? label, kind: existing.kind ?? linkKind })
    } else if (found.size < MAX_LINKS) {
      found.set(url, { text: label, kind: linkKind })
    }
  }
  if (sources.document) {
    let previousEnd = 0
    for (const anchor of getElementsByTagName("a", sources.document, true) as Array<Element>) {
      const href = getAttributeValue(anchor, "href")
      if (href === undefined) continue
      const alt = getElementsByTagName("img", anchor, true).map((img) => getAttributeValue(img as Element, "alt") ?? "").join(" ")
      const text = squeeze(textContent(anchor)) || squeeze(alt)
      // The anchor's place in the visible text, to read the words before it ("Forgot your password? Reset it here").
      const at = text.length > 0 ? sources.htmlText.indexOf(text, previousEnd) : -1
      add(href, text, at === -1 ? "" : wordsBefore(sources.htmlText, at, previousEnd))
      if (at !== -1) previousEnd = at + text.length
    }
  }
  // URLs written out in either body ("or paste this link into your browser: https://…").
  for (const text of [sources.htmlText, sources.text]) {
    let afterLastUrl = 0
    for (const match of text.matchAll(URL_IN_TEXT)) {
      add(trimTrailing(match[0]), null, wordsBefore(text, match.index, afterLastUrl))
      afterLastUrl = match.index + match[0].length
    }
  }
  for (const value of sources.listUnsubscribe) {
    for (const part of value.matchAll(/<([^>]+)>/g)) add(part[1]!, null, "", "unsubscribe")
  }
  return [...found].map(([url, { text, kind }]) => ({ url, text, kind }))
}
