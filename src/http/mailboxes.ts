/**
 * Mailbox routes, served twice from one set of handlers: under /v1/api for API keys and under /api
 * for dashboard sessions. The two surfaces differ only in how a body of the wrong shape is told
 * (SPEC "Mailbox error codes"):
 *
 * - /v1/api: 400 BAD_REQUEST ("malformed input");
 * - /api:    400 VALIDATION_ERROR with `details.field_errors` (the dashboard's JSON schema), which is
 *            also how the dashboard gets every other field-level VALIDATION_ERROR.
 *
 * The endpoints accept any JSON (see AddressBody in services/mailboxes/schemas.ts) and decode it
 * here, because the global decode-error mapping (errors.ts) can only say VALIDATION_ERROR with
 * `details` per field, one shape for every route.
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, ParseResult, Schema } from "effect"
import { CurrentPrincipal } from "../../services/accounts/principal.ts"
import { BadRequest, ValidationError } from "../../services/errors.ts"
import { Mailboxes } from "../../services/mailboxes/mailboxes.ts"
import { AddressInput, type CheckEmailParams, DeleteInput } from "../../services/mailboxes/schemas.ts"
import { MailroomApi } from "./api.ts"
import { orUnavailable } from "./infra.ts"

type Surface = "api" | "dashboard"

/** Every body field is a string, so a field's only possible fault is not being one. */
const fieldErrors = (error: ParseResult.ParseError): Record<string, string> => {
  const errors: Record<string, string> = {}
  for (const issue of ParseResult.ArrayFormatter.formatErrorSync(error)) {
    const field = issue.path.length === 0 ? "body" : issue.path.map(String).join(".")
    errors[field] ??= issue.path.length === 0 ? "must be a JSON object" : "must be a string"
  }
  return errors
}

/** A field-level VALIDATION_ERROR as the dashboard expects it: under `details.field_errors`. */
const forSurface = (surface: Surface, error: ValidationError): ValidationError =>
  surface === "api" ? error : ValidationError.of({ message: error.message, details: { field_errors: error.details ?? {} } })

/**
 * An absent body is BAD_REQUEST on both surfaces (SPEC's "missing JSON body"). The platform reads an
 * empty body as JSON `null`, so a literal `null` counts as absent too.
 */
const decodeBody = <A, I>(schema: Schema.Schema<A, I>, surface: Surface) => (body: unknown) => {
  if (body === undefined || body === null) return Effect.fail(BadRequest.of({ message: "A JSON body is required" }))
  return Effect.mapError(Schema.decodeUnknown(schema)(body), (error): BadRequest | ValidationError => {
    const field_errors = fieldErrors(error)
    const summary = Object.entries(field_errors).map(([field, message]) => `${field} ${message}`).join("; ")
    return surface === "api"
      ? BadRequest.of({ message: `Malformed request body: ${summary}`, details: { field_errors } })
      : ValidationError.of({ message: `Invalid request body: ${summary}`, details: { field_errors } })
  })
}

const makeHandlers = (surface: Surface) =>
  Effect.gen(function*() {
    const mailboxes = yield* Mailboxes
    const addressBody = decodeBody(AddressInput, surface)
    const deleteBody = decodeBody(DeleteInput, surface)

    return {
      list: () =>
        Effect.gen(function*() {
          const owner = yield* CurrentPrincipal
          const list = yield* mailboxes.list(owner).pipe(orUnavailable)
          return { success: true as const, mailboxes: list }
        }),
      create: ({ payload }: { readonly payload: unknown }) =>
        Effect.gen(function*() {
          const owner = yield* CurrentPrincipal
          const request = yield* addressBody(payload)
          const mailbox = yield* mailboxes.create(owner, request).pipe(orUnavailable)
          return { success: true as const, mailbox }
        }),
      checkEmail: ({ urlParams }: { readonly urlParams: typeof CheckEmailParams.Type }) =>
        Effect.gen(function*() {
          const owner = yield* CurrentPrincipal
          const { exclude_mailbox_id, ...request } = urlParams
          const answer = yield* mailboxes.check(owner, request, exclude_mailbox_id).pipe(orUnavailable)
          return { success: true as const, ...answer }
        }),
      rename: ({ path, payload }: { readonly path: { readonly mailboxId: string }; readonly payload: unknown }) =>
        Effect.gen(function*() {
          const owner = yield* CurrentPrincipal
          const request = yield* addressBody(payload)
          const data = yield* mailboxes.rename(owner, path.mailboxId, request).pipe(orUnavailable)
          return { success: true as const, data }
        }),
      remove: ({ path, payload }: { readonly path: { readonly mailboxId: string }; readonly payload: unknown }) =>
        Effect.gen(function*() {
          const owner = yield* CurrentPrincipal
          const { confirm_email_address } = yield* deleteBody(payload)
          const data = yield* mailboxes.remove(owner, path.mailboxId, confirm_email_address).pipe(
            orUnavailable,
            Effect.catchTag("ValidationError", (error) => Effect.fail(forSurface(surface, error)))
          )
          return { success: true as const, data }
        })
    }
  })

export const MailboxesHandlers = HttpApiBuilder.group(MailroomApi, "mailboxes", (handlers) =>
  Effect.map(makeHandlers("api"), (mailbox) =>
    handlers
      .handle("list", mailbox.list)
      .handle("create", mailbox.create)
      .handle("checkEmail", mailbox.checkEmail)
      .handle("rename", mailbox.rename)
      .handle("remove", mailbox.remove)))

export const DashboardMailboxesHandlers = HttpApiBuilder.group(MailroomApi, "dashboardMailboxes", (handlers) =>
  Effect.map(makeHandlers("dashboard"), (mailbox) =>
    handlers
      .handle("list", mailbox.list)
      .handle("create", mailbox.create)
      .handle("checkEmail", mailbox.checkEmail)
      .handle("rename", mailbox.rename)
      .handle("remove", mailbox.remove)))
