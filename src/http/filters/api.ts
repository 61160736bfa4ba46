/**
 * Filters (services/mail/filters.ts; the rules are filter-rules.ts), for API keys under /v1/api and
 * for dashboard sessions under /api:
 *
 *   /filters                        the account's filters, in the order they apply
 *   /filters/{filter_id}
 *   /filters/{filter_id}/apply      run one over mail already received
 *
 * A filter of one mailbox names it in its body (`mailbox_id`) rather than in the path: the account's
 * filters are one ordered list, whichever mailboxes they reach.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { FactLabel, FilterQuotaReached, NotFound, ValidationError } from "../../../services/errors.ts"
import { APPLY_LIMIT, Filter, FilterInput, filterSortFields, FilterUpdate, MAX_FILTERS } from "../../../services/mail/filter-rules.ts"
import { Limit, ListMeta, Offset, SortParam } from "../../../services/listing.ts"
import { Ok, OkWithMeta } from "../envelope.ts"
import { envelope } from "../errors.ts"
import { OptionalBody } from "../optional-body.ts"
import { ApiAuthentication, SessionAuthentication } from "../security.ts"

const FilterPath = Schema.Struct({ filterId: Schema.String })
export const FilterListQuery = Schema.Struct({
  mailbox_id: Schema.optional(Schema.String).annotations({ description: "Only the filters of this mailbox" }),
  limit: Schema.optional(Limit),
  offset: Schema.optional(Offset),
  sort: Schema.optional(SortParam(filterSortFields))
}).annotations({ parseOptions: { errors: "all" } })

export const RemovedFilter = Schema.Struct({ filter_id: Schema.String, deleted: Schema.Literal(true) }).annotations({
  identifier: "RemovedFilter"
})

/** Optional, as its one field is: no body runs the filter for real. */
export const ApplyInput = OptionalBody(
  Schema.Struct({
    dry_run: Schema.optional(Schema.Boolean).annotations({ description: "true: count what it would change, change nothing" })
  }).annotations({ identifier: "FilterApplyInput", parseOptions: { errors: "all", onExcessProperty: "error" } }),
  {}
)

export const FilterApplied = Schema.Struct({
  filter_id: Schema.String,
  dry_run: Schema.Boolean,
  scanned: Schema.Number.annotations({ description: `Received emails looked at: the newest ${APPLY_LIMIT.toLocaleString("en")} at most` }),
  matched: Schema.Number.annotations({ description: "Those its conditions hold for" }),
  changed: Schema.Number.annotations({ description: "Those whose labels it changed (or would, in a dry run)" })
}).annotations({ identifier: "FilterApplied" })

const WHAT = "Each received email is labelled, as it is stored, by every enabled filter of the account (or of its mailbox) " +
  "whose conditions all hold, in the order the filters were created: before its webhooks, events and search see it"

const filterEndpoints = <const Name extends string>(name: Name) =>
  HttpApiGroup.make(name)
    .add(
      HttpApiEndpoint.get("list", "/filters")
        .setUrlParams(FilterListQuery)
        .addSuccess(OkWithMeta(Schema.Array(Filter), ListMeta))
        .addError(envelope(ValidationError))
        .addError(envelope(NotFound))
        .annotateContext(OpenApi.annotations({
          summary: "List the account's filters",
          description: `In the order they apply, oldest first (limit 1-100, default 20; offset; mailbox_id: one mailbox's). ${WHAT}`
        }))
    )
    .add(
      HttpApiEndpoint.post("create", "/filters")
        .setPayload(FilterInput)
        .addSuccess(Ok(Filter), { status: 201 })
        .addError(envelope(ValidationError))
        .addError(envelope(FactLabel))
        .addError(envelope(NotFound))
        .addError(envelope(FilterQuotaReached))
        .annotateContext(OpenApi.annotations({
          summary: "Create a filter",
          description: `Conditions (at least one) and the labels to add or remove (at least one). It applies to mail stored from now on; ` +
            `POST /filters/{filter_id}/apply runs it over mail already received. At most ${MAX_FILTERS} filters per account ` +
            `(403 FILTER_QUOTA). ${WHAT}`
        }))
    )
    .add(
      HttpApiEndpoint.get("get", "/filters/:filterId")
        .setPath(FilterPath)
        .addSuccess(Ok(Filter))
        .addError(envelope(NotFound))
        .annotateContext(OpenApi.annotations({
          summary: "Get a filter",
          description: "With how many received emails it has applied to (counted a few seconds behind)"
        }))
    )
    .add(
      HttpApiEndpoint.patch("update", "/filters/:filterId")
        .setPath(FilterPath)
        .setPayload(FilterUpdate)
        .addSuccess(Ok(Filter))
        .addError(envelope(ValidationError))
        .addError(envelope(FactLabel))
        .addError(envelope(NotFound))
        .annotateContext(OpenApi.annotations({
          summary: "Change a filter",
          description: "The fields given; conditions and actions are replaced whole. enabled: false keeps it without applying it"
        }))
    )
    .add(
      HttpApiEndpoint.del("remove", "/filters/:filterId")
        .setPath(FilterPath)
        .addSuccess(Ok(RemovedFilter))
        .addError(envelope(NotFound))
        .annotateContext(OpenApi.annotations({ summary: "Delete a filter", description: "Labels it gave stay on the emails" }))
    )
    .add(
      HttpApiEndpoint.post("apply", "/filters/:filterId/apply")
        .setPath(FilterPath)
        .setPayload(ApplyInput)
        .addSuccess(Ok(FilterApplied))
        .addError(envelope(ValidationError))
        .addError(envelope(NotFound))
        .annotateContext(OpenApi.annotations({
          summary: "Apply a filter to mail already received",
          description: `Runs it (enabled or not) over the newest ${APPLY_LIMIT.toLocaleString("en")} received emails of its mailbox, ` +
            "or of every mailbox for an account's filter; each email it changes is announced as email.labels_changed. " +
            "dry_run: true only counts; the body may be left out (a real run)"
        }))
    )

export class FiltersGroup extends filterEndpoints("filters")
  .middleware(ApiAuthentication)
  .prefix("/v1/api")
  .annotate(OpenApi.Title, "Filters")
  .annotate(OpenApi.Description, "Labels received mail gets by its sender, recipients, subject, body or attachments")
{}

export class DashboardFiltersGroup extends filterEndpoints("dashboardFilters")
  .middleware(SessionAuthentication)
  .prefix("/api")
  .annotate(OpenApi.Title, "Filters (dashboard)")
  .annotate(OpenApi.Description, "The filter routes for dashboard sessions")
{}
