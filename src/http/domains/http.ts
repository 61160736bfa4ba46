/**
 * Custom-domain routes, served from one set of handlers under /v1/api (API keys) and /api (dashboard
 * sessions), plus the generic list form `GET {base_url}/domains`.
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { CurrentPrincipal } from "../../../services/accounts/principal.ts"
import { Domains } from "../../../services/domains/domains.ts"
import { CreateDomainInput, type DomainListParams, MigrateInput, UpdateDomainInput } from "../../../services/domains/schemas.ts"
import { ValidationError } from "../../../services/errors.ts"
import { listMeta, page, parseSort } from "../../../services/listing.ts"
import { MailroomApi } from "../api.ts"
import { orUnavailable } from "../infra.ts"
import { decodeBody, forSurface, type Surface } from "../surface.ts"

/** Every domain list (/v1/api, /api and the generic form): a page, its meta the plan's and the page's. */
const listPage = (domains: Domains) => ({ urlParams }: { readonly urlParams: typeof DomainListParams.Type }) =>
  Effect.gen(function*() {
    const owner = yield* CurrentPrincipal
    const p = page(urlParams)
    const sort = parseSort(urlParams.sort, { field: "created_at", direction: "desc" })
    const listed = yield* domains.list(owner, p, sort.direction).pipe(orUnavailable)
    return { success: true as const, data: listed.domains, meta: { ...listed.meta, ...listMeta(listed.meta.domain_count, p) } }
  })

const makeHandlers = (surface: Surface) =>
  Effect.gen(function*() {
    const domains = yield* Domains
    const createBody = decodeBody(CreateDomainInput, surface)
    const migrateBody = decodeBody(MigrateInput, surface)
    const updateBody = decodeBody(UpdateDomainInput, surface)
    /** A field-level problem found by the service, told as this surface tells them. */
    const told = <A, E, R>(effect: Effect.Effect<A, E | ValidationError, R>): Effect.Effect<A, E | ValidationError, R> =>
      Effect.catchIf(effect, (error): error is ValidationError => error instanceof ValidationError, (error) =>
        Effect.fail(forSurface(surface, error)))

    return {
      list: listPage(domains),
      create: ({ payload }: { readonly payload: unknown }) =>
        Effect.gen(function*() {
          const owner = yield* CurrentPrincipal
          const { domain } = yield* createBody(payload)
          const data = yield* domains.create(owner, domain).pipe(orUnavailable, told)
          return { success: true as const, data }
        }),
      get: ({ path }: { readonly path: { readonly id: string } }) =>
        Effect.gen(function*() {
          const owner = yield* CurrentPrincipal
          const data = yield* domains.get(owner, path.id).pipe(orUnavailable)
          return { success: true as const, data }
        }),
      verify: ({ path }: { readonly path: { readonly id: string } }) =>
        Effect.gen(function*() {
          const owner = yield* CurrentPrincipal
          const data = yield* domains.verify(owner, path.id).pipe(orUnavailable)
          return { success: true as const, data }
        }),
      update: ({ path, payload }: { readonly path: { readonly id: string }; readonly payload: unknown }) =>
        Effect.gen(function*() {
          const owner = yield* CurrentPrincipal
          const input = yield* updateBody(payload)
          const data = yield* domains.setCatchAll(owner, path.id, input.catch_all_mailbox_id).pipe(orUnavailable, told)
          return { success: true as const, data }
        }),
      migrate: ({ path, payload }: { readonly path: { readonly id: string }; readonly payload: unknown }) =>
        Effect.gen(function*() {
          const owner = yield* CurrentPrincipal
          const input = yield* migrateBody(payload)
          const data = yield* domains.migrate(owner, path.id, input.target_domain, input.dry_run ?? true).pipe(orUnavailable, told)
          return { success: true as const, data }
        }),
      remove: ({ path }: { readonly path: { readonly id: string } }) =>
        Effect.gen(function*() {
          const owner = yield* CurrentPrincipal
          const data = yield* domains.remove(owner, path.id).pipe(orUnavailable)
          return { success: true as const, data }
        })
    }
  })

export const DomainsHandlers = HttpApiBuilder.group(MailroomApi, "domains", (handlers) =>
  Effect.map(makeHandlers("api"), (domain) =>
    handlers
      .handle("list", domain.list)
      .handle("create", domain.create)
      .handle("get", domain.get)
      .handle("verify", domain.verify)
      .handle("update", domain.update)
      .handle("migrate", domain.migrate)
      .handle("remove", domain.remove))).pipe(Layer.provide(Domains.Default))

export const DashboardDomainsHandlers = HttpApiBuilder.group(MailroomApi, "dashboardDomains", (handlers) =>
  Effect.map(makeHandlers("dashboard"), (domain) =>
    handlers
      .handle("list", domain.list)
      .handle("create", domain.create)
      .handle("get", domain.get)
      .handle("verify", domain.verify)
      .handle("update", domain.update)
      .handle("migrate", domain.migrate)
      .handle("remove", domain.remove))).pipe(Layer.provide(Domains.Default))

export const DomainListHandlers = HttpApiBuilder.group(MailroomApi, "domainList", (handlers) =>
  Effect.map(Domains, (domains) => handlers.handle("list", listPage(domains)))).pipe(Layer.provide(Domains.Default))
