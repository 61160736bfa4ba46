/**
 * SPEC's mailbox address rules, as pure functions (no I/O): what the create, check-email and
 * rename routes share. The uniqueness rule needs the database and lives in mailboxes.ts.
 */
import { Either } from "effect"
import type { Details } from "../errors.ts"

export const MIN_LOCAL_LENGTH = 5
const LOCAL_CHARS = /^[A-Za-z0-9._-]+$/

/** A rule that failed: SPEC's code, its HTTP status and details. */
export interface RuleFailure {
  readonly status: 400 | 422
  readonly code: "BAD_REQUEST" | "MISSING_FIELDS" | "LOCAL_TOO_SHORT" | "INVALID_LOCAL" | "DISALLOWED_LOCAL" | "DOMAIN_MISMATCH"
  readonly message: string
  readonly details?: Details
}

export interface AddressRequest {
  readonly domain?: string | undefined
  readonly local_part?: string | undefined
  readonly email_address?: string | undefined
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

const fail = (failure: RuleFailure) => Either.left(failure)

export const normalizeDomain = (domain: string) => domain.trim().toLowerCase().replace(/\.$/, "")

/**
 * Rules 1-4 and the shape rules: which local part and domain the request names, and whether the
 * local part is allowed anywhere. `reserved` comes from DISALLOWED_EMAIL_NAME (lower-cased).
 */
export const parseAddress = (request: AddressRequest, reserved: ReadonlyArray<string>): Either.Either<Address, RuleFailure> => {
  const domainInput = request.domain?.trim() ?? ""
  const localInput = request.local_part
  const emailInput = request.email_address
  if (domainInput === "" || ((localInput === undefined || localInput.trim() === "") && (emailInput === undefined || emailInput.trim() === ""))) {
    const missing = [domainInput === "" ? "domain" : undefined, localInput === undefined && emailInput === undefined ? "local_part or email_address" : undefined]
      .filter((field): field is string => field !== undefined)
    return fail({
      status: 400,
      code: "MISSING_FIELDS",
      message: `Missing required fields: ${missing.length > 0 ? missing.join(", ") : "local_part or email_address"}`,
      details: { missing_fields: missing.length > 0 ? missing : ["local_part or email_address"] }
    })
  }
  const domain = normalizeDomain(domainInput)

  let local: string
  if (localInput !== undefined && localInput.trim() !== "") {
    local = localInput.trim()
  } else {
    const email = emailInput!.trim()
    const at = email.lastIndexOf("@")
    if (at === -1) {
      local = email
    } else {
      local = email.slice(0, at).trim()
      const host = normalizeDomain(email.slice(at + 1))
      if (local === "") {
        return fail({ status: 400, code: "BAD_REQUEST", message: "email_address has no local part before the @", details: { email_address: email } })
      }
      if (host !== domain) {
        return fail({
          status: 422,
          code: "DOMAIN_MISMATCH",
          message: `The host of email_address (${host}) differs from domain (${domain})`,
          details: { domain_expected: domain, domain_in_request: host }
        })
      }
    }
  }

  if (local.length < MIN_LOCAL_LENGTH) {
    return fail({
      status: 422,
      code: "LOCAL_TOO_SHORT",
      message: `The local part must be at least ${MIN_LOCAL_LENGTH} characters`,
      details: { min_length: MIN_LOCAL_LENGTH, actual_length: local.length }
    })
  }
  if (!LOCAL_CHARS.test(local) || /^[.-]|[.-]$/.test(local)) {
    return fail({
      status: 422,
      code: "INVALID_LOCAL",
      message: "The local part may hold letters, digits, '.', '_' and '-', and must not start or end with '.' or '-'",
      details: { local_part: local }
    })
  }
  if (reserved.includes(local.toLowerCase())) {
    return fail({ status: 422, code: "DISALLOWED_LOCAL", message: `The local part "${local}" is reserved`, details: { local_part: local } })
  }
  return Either.right({ localPart: local, domain, emailAddress: `${local}@${domain}`, normalized: `${local}@${domain}`.toLowerCase() })
}

/** A colliding address on migration: the local part gets `.` and 6 hex characters. */
export const withSuffix = (local: string, hex: string) => `${local}.${hex.slice(0, 6).toLowerCase()}`
