/**
 * SPEC's mailbox address rules, as pure functions (no I/O): what the create, check-email and
 * rename routes share. Uniqueness (rule 5) and the allowed domains (rule 6) need the database and
 * live in mailboxes.ts.
 */
import { Either } from "effect"
import { domainToASCII } from "node:url"
import { BadRequest, DisallowedLocal, DomainMismatch, InvalidLocal, LocalTooShort, MissingFields, ValidationError } from "../errors.ts"

export const MIN_LOCAL_LENGTH = 5
/** RFC 5321's limit on a local part; longer ones could not receive mail anyway. */
export const MAX_LOCAL_LENGTH = 64
const LOCAL_CHARS = /^[A-Za-z0-9._-]+$/

/** A rule that failed, as the error SPEC names for it. */
export type RuleFailure = BadRequest | MissingFields | LocalTooShort | InvalidLocal | DisallowedLocal | DomainMismatch

/** The address fields of a create, rename or check-email request, as sent. */
export interface AddressRequest {
  readonly domain?: string | undefined
  readonly local_part?: string | undefined
  readonly email_address?: string | undefined
}

/** A create or change: the address fields, and the name its sent mail shows (null or "" for none). */
export interface MailboxRequest extends AddressRequest {
  readonly display_name?: string | null | undefined
}

export interface Address {
  /** As given (trimmed): shown back to the user. */
  readonly localPart: string
  /** Lower-cased hostname. */
  readonly domain: string
  /** `local@domain` with the local part's case kept. */
  readonly emailAddress: string
  /** Lower-cased full address: what uniqueness and routing compare. */
  readonly normalized: string
}

const fail = <E extends RuleFailure>(failure: E) => Either.left(failure)

const present = (value: string | undefined): value is string => value !== undefined && value.trim() !== ""

/** Whether a change names an address at all: one naming only `display_name` keeps the address. */
export const asksForAddress = (request: AddressRequest) =>
  present(request.domain) || present(request.local_part) || present(request.email_address)

/** Lower-cased, without a trailing dot, internationalized names in punycode (as DNS and SMTP see them). */
export const normalizeDomain = (domain: string) => {
  const plain = domain.trim().toLowerCase().replace(/\.$/, "")
  return (/[^\x00-\x7f]/.test(plain) ? domainToASCII(plain) : "") || plain
}

export const normalizeAddress = (localPart: string, domain: string) => `${localPart}@${domain}`.toLowerCase()

/**
 * A local part quoted without need (`"ada"`: no quote, backslash or white space inside) unquoted: to
 * SMTP the same mailbox (RFC 5321 §4.1.2). Anything else as it is.
 */
export const unquotedLocal = (localPart: string) => /^"([^"\\\s]+)"$/.exec(localPart)?.[1] ?? localPart

/** The domain of an address (what follows its last @), lower-cased: what routes mail to it. */
export const domainOf = (address: string) => address.slice(address.lastIndexOf("@") + 1).toLowerCase()

/** The local part an `email_address` names, checked against `domain` when it carries a host. */
const fromEmailAddress = (email: string, domain: string): Either.Either<string, RuleFailure> => {
  const at = email.lastIndexOf("@")
  if (at === -1) return Either.right(email)
  const local = email.slice(0, at).trim()
  const host = normalizeDomain(email.slice(at + 1))
  if (local === "") {
    return fail(new BadRequest({ message: "email_address has no local part before the @", details: { email_address: email } }))
  }
  if (host === "") {
    return fail(new BadRequest({ message: "email_address has no host after the @", details: { email_address: email } }))
  }
  if (host !== domain) {
    return fail(
      new DomainMismatch({
        message: `The host of email_address (${host}) differs from domain (${domain})`,
        details: { domain_expected: domain, domain_in_request: host }
      })
    )
  }
  return Either.right(local)
}

/**
 * Rules 1-4 and the shape rules: which local part and domain the request names, and whether the
 * local part is allowed anywhere. `reserved` comes from DISALLOWED_EMAIL_NAME (lower-cased).
 * When both `local_part` and `email_address` are sent they must name the same local part.
 */
export const parseAddress = (request: AddressRequest, reserved: ReadonlyArray<string>): Either.Either<Address, RuleFailure> =>
  Either.gen(function*() {
    const missing = [
      present(request.domain) ? undefined : "domain",
      present(request.local_part) || present(request.email_address) ? undefined : "local_part or email_address"
    ].filter((field): field is string => field !== undefined)
    if (missing.length > 0) {
      return yield* fail(
        new MissingFields({ message: `Missing required fields: ${missing.join(", ")}`, details: { missing_fields: missing } })
      )
    }
    const domain = normalizeDomain(request.domain!)

    const fromEmail = present(request.email_address) ? yield* fromEmailAddress(request.email_address.trim(), domain) : undefined
    const local = present(request.local_part) ? request.local_part.trim() : fromEmail!
    if (fromEmail !== undefined && fromEmail.toLowerCase() !== local.toLowerCase()) {
      return yield* fail(
        new BadRequest({
          message: "local_part and email_address name different local parts; send one of them",
          details: { local_part: local, email_address: request.email_address!.trim() }
        })
      )
    }

    if (local.length < MIN_LOCAL_LENGTH) {
      return yield* fail(
        new LocalTooShort({
          message: `The local part must be at least ${MIN_LOCAL_LENGTH} characters`,
          details: { min_length: MIN_LOCAL_LENGTH, actual_length: local.length }
        })
      )
    }
    if (local.length > MAX_LOCAL_LENGTH || !LOCAL_CHARS.test(local) || /^[.-]|[.-]$/.test(local) || local.includes("..")) {
      return yield* fail(
        new InvalidLocal({
          message:
            `The local part may hold letters, digits, '.', '_' and '-' (at most ${MAX_LOCAL_LENGTH}), must not start or end with '.' or '-', and must not hold '..'`,
          details: { local_part: local }
        })
      )
    }
    if (reserved.includes(local.toLowerCase())) {
      return yield* fail(new DisallowedLocal({ message: `The local part "${local}" is reserved`, details: { local_part: local } }))
    }
    return { localPart: local, domain, emailAddress: `${local}@${domain}`, normalized: normalizeAddress(local, domain) }
  })

/** The longest display name, in characters: what a mail client shows in full. */
export const MAX_DISPLAY_NAME_LENGTH = 100
/**
 * Characters a display name may not hold: controls (a line break would end the From header) and the
 * bidirectional overrides and isolates, which make a name read differently from how it is written.
 */
const UNSHOWABLE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/

/**
 * A mailbox's display name as asked: trimmed; `null` or blank is no name (null); `undefined` (not
 * sent) stays undefined, which a change reads as "keep the one it has".
 */
export const parseDisplayName = (value: string | null | undefined): Either.Either<string | null | undefined, ValidationError> => {
  if (value === undefined) return Either.right(undefined)
  const name = value?.trim() ?? ""
  if (name === "") return Either.right(null)
  if (UNSHOWABLE.test(name)) {
    return Either.left(ValidationError.field("display_name", "must not hold line breaks, control characters or direction overrides"))
  }
  if ([...name].length > MAX_DISPLAY_NAME_LENGTH) {
    return Either.left(ValidationError.field("display_name", `must be at most ${MAX_DISPLAY_NAME_LENGTH} characters`))
  }
  return Either.right(name)
}

/** A colliding address on migration: the local part gets `.` and 6 hex characters. */
export const withSuffix = (local: string, hex: string) => `${local}.${hex.slice(0, 6).toLowerCase()}`
