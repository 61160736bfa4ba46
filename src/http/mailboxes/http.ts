/**
 * Mailbox routes, served twice from one set of handlers: under /v1/api for API keys and under /api
 * for dashboard sessions (surface.ts). A body of the wrong shape is 400 BAD_REQUEST on /v1/api
 * (SPEC "Mailbox error codes": "malformed input") and VALIDATION_ERROR with `details.field_errors`
 * on /api.
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer, Option, type ParseResult } from "effect"
import { CurrentPrincipal } from "../../../services/accounts/principal.ts"
import { ValidationError } from "../../../services/errors.ts"
import { Mailboxes } from "../../../services/mailboxes/mailboxes.ts"
import { listMeta, page, parseSort } from "../../../services/listing.ts"
import { AddressInput, type CheckEmailParams, DeleteInput, type MailboxListParams } from "../../../services/mailboxes/schemas.ts"
import { MailroomApi } from "../api.ts"
import { orUnavailable } from "../infra.ts"
import { decodeBody, forSurface, type Surface } from "../surface.ts"

/** Every mailbox body field is a string (display_name may be null), so a field's only possible fault is not being one. */
const mustBeString = (issue: ParseResult.ArrayFormatterIssue) =>
  issue.path[0] === "display_name" ? "must be a string or null" : "must be a string"

/** A rule's VALIDATION_ERROR as the surface reports it (`details.field_errors` on /api). */
const validationFor = (surface: Surface) => <A, E, R>(effect: Effect.Effect<A, E | ValidationError, R>) =>
  Effect.catchIf(effect, (error): error is ValidationError => error instanceof ValidationError, (error) => Effect.fail(forSurface(surface, error)))

const makeHandlers = (surface: Surface) =>
  Effect.gen(function*() {
    const mailboxes = yield* Mailboxes
    const addressBody = decodeBody(AddressInput, surface, { malformed: "bad-request", describe: mustBeString })
    // SPEC: a delete's confirm_email_address "missing or wrong" is VALIDATION_ERROR, a wrong type included;
    // only a missing body is BAD_REQUEST.
    const deleteBody = decodeBody(DeleteInput, surface, { malformed: "validation", describe: mustBeString })

    return {
      list: ({ urlParams }: { readonly urlParams: typeof MailboxListParams.Type }) =>
        Effect.gen(function*() {
          const owner = yield* CurrentPrincipal
          const p = page(urlParams)
          const sort = parseSort(urlParams.sort, { field: "created_at", direction: "desc" })
          const listed = yield* mailboxes.listPage(owner, p, sort.direction, Option.getOrUndefined(owner.mailboxes)).pipe(orUnavailable)
          return { success: true as const, mailboxes: listed.mailboxes, meta: listMeta(listed.total, p) }
        }),
      create: ({ payload }: { readonly payload: unknown }) =>
        Effect.gen(function*() {
          const owner = yield* CurrentPrincipal
          const request = yield* addressBody(payload)
          const mailbox = yield* mailboxes.create(owner, request).pipe(orUnavailable, validationFor(surface))
          return { success: true as const, mailbox }
        }),
      get: ({ path }: { readonly path: { readonly mailboxId: string } }) =>
        Effect.gen(function*() {
          const owner = yield* CurrentPrincipal
          const mailbox = yield* mailboxes.get(owner, path.mailboxId).pipe(orUnavailable)
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
          const data = yield* mailboxes.rename(owner, path.mailboxId, request).pipe(orUnavailable, validationFor(surface))
          return { success: true as const, data }
        }),
      remove: ({ path, payload }: { readonly path: { readonly mailboxId: string }; readonly payload: unknown }) =>
        Effect.gen(function*() {
          const owner = yield* CurrentPrincipal
          const { confirm_email_address } = yield* deleteBody(payload)
          const data = yield* mailboxes.remove(owner, path.mailboxId, confirm_email_address).pipe(orUnavailable, validationFor(surface))
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
      .handle("get", mailbox.get)
      .handle("rename", mailbox.rename)
      .handle("remove", mailbox.remove))).pipe(Layer.provide(Mailboxes.Default))

export const DashboardMailboxesHandlers = HttpApiBuilder.group(MailroomApi, "dashboardMailboxes", (handlers) =>
  Effect.map(makeHandlers("dashboard"), (mailbox) =>
    handlers
      .handle("list", mailbox.list)
      .handle("create", mailbox.create)
      .handle("checkEmail", mailbox.checkEmail)
      .handle("get", mailbox.get)
      .handle("rename", mailbox.rename)
      .handle("remove", mailbox.remove))).pipe(Layer.provide(Mailboxes.Default))
