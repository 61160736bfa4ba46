/** What an account's mail did over recent days, on `{base_url}` and for the dashboard: the contract. */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { NotFound, ValidationError } from "../../../services/errors.ts"
import { MailStats, StatsParams } from "../../../services/mail/schemas.ts"
import { Ok } from "../envelope.ts"
import { envelope } from "../errors.ts"
import { ApiAuthentication, SessionAuthentication } from "../security.ts"

const statsEndpoints = <const Name extends string>(name: Name, prefix: `/${string}`) =>
  HttpApiGroup.make(name)
    .add(
      HttpApiEndpoint.get("stats", "/stats")
        .setUrlParams(StatsParams)
        .addSuccess(Ok(MailStats))
        .addError(envelope(ValidationError))
        .addError(envelope(NotFound))
        .annotateContext(OpenApi.annotations({
          summary: "Mail stats",
          description: "Emails received and sent over the last `days` days (default 30, UTC), what became of the sent ones' recipients " +
            "(sent, bounced, failed, suppressed, deferred, queued), the bounce rate, and the same per day; of one mailbox with " +
            "`mailbox_id`, else of every active mailbox. Deleting mail does not change past figures"
        }))
    )
    .prefix(prefix)

export class StatsGroup extends statsEndpoints("stats", "/v1/api")
  .middleware(ApiAuthentication)
  .annotate(OpenApi.Title, "Stats")
  .annotate(OpenApi.Description, "What the account's mail did: received, sent, delivered and bounced, by day")
{}

/** The same route under /api for dashboard sessions. */
export class DashboardStatsGroup extends statsEndpoints("dashboardStats", "/api")
  .middleware(SessionAuthentication)
  .annotate(OpenApi.Title, "Stats (dashboard session)")
  .annotate(OpenApi.Description, "As /v1/api/stats, for the dashboard's cookie session")
{}
