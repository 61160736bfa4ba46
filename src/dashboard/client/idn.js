/**
 * Internationalized domains as a person reads them: `ada@münchen.example`, not the A-label
 * `ada@xn--mnchen-3ya.example` that DNS, SMTP and the API's stored addresses carry. The rule is the
 * server's (services/mail/narrowing.ts, parse.ts): Node's `url.domainToUnicode`, and the name as it was
 * when that finds it invalid. A browser has no such function (its URL keeps hosts in ASCII), so each
 * `xn--` label is decoded here by RFC 3492 and kept only when the browser's own IDNA turns it back into
 * the same label: a label that is not the canonical spelling of a name shows as it is written.
 * For display only: what is copied, compared or sent stays the address as stored.
 */

const BASE = 36
const T_MIN = 1
const T_MAX = 26
const SKEW = 38
const DAMP = 700

/** RFC 3492 6.1. @param {number} delta @param {number} points @param {boolean} first */
const adapt = (delta, points, first) => {
  delta = first ? Math.floor(delta / DAMP) : Math.floor(delta / 2)
  delta += Math.floor(delta / points)
  let k = 0
  for (; delta > ((BASE - T_MIN) * T_MAX) >> 1; k += BASE) delta = Math.floor(delta / (BASE - T_MIN))
  return k + Math.floor(((BASE - T_MIN + 1) * delta) / (delta + SKEW))
}

/** A base-36 digit's value, BASE for a character that is none. @param {number} code */
const digit = (code) =>
  code >= 0x30 && code <= 0x39 ? code - 22 : code >= 0x41 && code <= 0x5a ? code - 0x41 : code >= 0x61 && code <= 0x7a ? code - 0x61 : BASE

/**
 * RFC 3492 6.2: the code points a Punycode string (a label without its `xn--`) stands for; undefined
 * when it is not Punycode.
 * @param {string} input
 */
const punycodeDecode = (input) => {
  /** @type {number[]} */
  const output = []
  const basic = Math.max(input.lastIndexOf("-"), 0)
  for (let j = 0; j < basic; j++) {
    const code = input.charCodeAt(j)
    if (code >= 0x80) return undefined
    output.push(code)
  }
  let n = 0x80
  let bias = 72
  let i = 0
  for (let index = basic > 0 ? basic + 1 : 0; index < input.length;) {
    const before = i
    for (let w = 1, k = BASE; ; k += BASE) {
      if (index >= input.length) return undefined
      const d = digit(input.charCodeAt(index++))
      if (d >= BASE) return undefined
      i += d * w
      const t = k <= bias ? T_MIN : k >= bias + T_MAX ? T_MAX : k - bias
      if (d < t) break
      w *= BASE - t
      if (i > 0x10ffff * (output.length + 1) || w > 0x7fffffff) return undefined
    }
    const length = output.length + 1
    bias = adapt(i - before, length, before === 0)
    n += Math.floor(i / length)
    i %= length
    if (n > 0x10ffff) return undefined
    output.splice(i++, 0, n)
  }
  return String.fromCodePoint(...output)
}

/** The A-label a host name becomes in this browser's IDNA, or undefined when it takes none. @param {string} name */
const asciiOf = (name) => {
  try {
    return new URL(`http://${name}/`).hostname
  } catch {
    return undefined
  }
}

/**
 * `domain` with its `xn--` labels in Unicode (`xn--mnchen-3ya.example` → `münchen.example`); as it is
 * when it has none, or when one is not a name's canonical A-label.
 * @param {string} domain
 */
export const domainShown = (domain) => {
  if (!/(^|\.)xn--/i.test(domain)) return domain
  const labels = domain.toLowerCase().split(".").map((label) => (label.startsWith("xn--") ? punycodeDecode(label.slice(4)) : label))
  if (labels.some((label) => label === undefined || label === "")) return domain
  const unicode = labels.join(".")
  return asciiOf(unicode) === domain.toLowerCase() ? unicode : domain
}

/**
 * An address as a person reads it: its domain by domainShown. Anything else (a name, or text that holds no address)
 * as it is.
 * @param {string} address
 */
export const addressShown = (address) => {
  const at = address.lastIndexOf("@")
  if (at < 0) return address
  const domain = address.slice(at + 1)
  const shown = domainShown(domain)
  return shown === domain ? address : `${address.slice(0, at + 1)}${shown}`
}

/**
 * Every address in a text of them (`To a@xn--bcher-kva.example, b@example.com`) as addressShown has it.
 * @param {string} text
 */
export const addressesShown = (text) => text.replace(/@([^\s@,;<>()"]+)/g, (whole, domain) => {
  const shown = domainShown(domain)
  return shown === domain ? whole : `@${shown}`
})

/**
 * The title (tooltip) of addresses shown in Unicode: the addresses as stored; none when they show as stored.
 * @param {string} addresses
 */
export const storedTitle = (addresses) => (addressesShown(addresses) === addresses ? undefined : addresses)
