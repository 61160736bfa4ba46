/**
 * What a custom domain name may be: a registrable-looking DNS hostname, compared in lower-case ASCII
 * (internationalized names in punycode, as DNS and SMTP carry them).
 */
import { Either } from "effect"
import { domainToASCII } from "node:url"
import { isIpAddress } from "../dns/addresses.ts"
import { normalizeDomain } from "../mailboxes/rules.ts"

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/

/**
 * Whether `name` (normalized: lower case, punycode) names a host: labels of letters, digits and '-'
 * (1-63 characters, not starting or ending with '-'), the last not all digits, and no IP address.
 * One label is a host too (a private network's, a compose service); a custom domain needs more
 * (`parseDomainName`).
 */
export const isHostName = (name: string): boolean => {
  const labels = name.split(".")
  return !isIpAddress(name) && labels.every((label) => LABEL.test(label)) && !/^\d+$/.test(labels[labels.length - 1]!)
}

/** The normalized name, or what is wrong with it. */
export const parseDomainName = (input: string): Either.Either<string, string> => {
  const name = normalizeDomain(input)
  if (name === "") return Either.left("is required")
  if (isIpAddress(name.replace(/^\[(.*)\]$/, "$1"))) return Either.left("must be a hostname, not an IP address")
  if (name.length > 253) return Either.left("must be at most 253 characters")
  const labels = name.split(".")
  if (labels.length < 2) return Either.left("must be a fully qualified hostname such as example.com")
  if (!labels.every((label) => LABEL.test(label))) {
    return Either.left("must be a hostname: labels of letters, digits and '-' (1-63 characters, not starting or ending with '-')")
  }
  if (/^\d+$/.test(labels[labels.length - 1]!)) return Either.left("must end in a top-level domain, not a number")
  // An A-label (xn--…) must decode: "xn--zz" is no internationalized name, and nothing can be registered under it.
  if (labels.some((label) => label.startsWith("xn--")) && domainToASCII(name) === "") {
    return Either.left("must be a hostname: an xn-- label must be valid punycode of an internationalized name")
  }
  return Either.right(name)
}
