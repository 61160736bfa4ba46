/** Search on `{base_url}` (SPEC "Search"): the contract. */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { SearchInput, SearchMeta, SearchResult, SuggestionsParams } from "../../../services/search/schemas.ts"
import { Ok, OkWithMeta } from "../envelope.ts"
import { NotFound, RankingExpired, RateLimited, SearchQuotaReached, ValidationError } from "../../../services/errors.ts"
import { envelope } from "../errors.ts"
import { ApiAuthentication, SessionAuthentication } from "../security.ts"

const searchEndpoints = <const Name extends string>(name: Name) =>
  HttpApiGroup.make(name)
  .add(
    HttpApiEndpoint.post("search", "/search")
      .setPayload(SearchInput)
      .addSuccess(OkWithMeta(Schema.Array(SearchResult), SearchMeta))
      .addError(envelope(ValidationError))
      .addError(envelope(RankingExpired))
      .addError(envelope(NotFound))
      .addError(envelope(SearchQuotaReached))
      .addError(envelope(RateLimited))
      .annotate(OpenApi.Summary, "Search emails")
      .annotate(
        OpenApi.Description,
        "Your mail ranked by words and meaning together, best first. Counts against the plan's searches per period " +
          "(403 SEARCH_QUOTA when used up) and its searches per minute (429). An answer with more pages carries " +
          "`meta.ranking`: pass it back as `ranking` (with the same query and filters) and the later pages are read from " +
          "that ranking, so they neither repeat nor skip an email while new mail is indexed; 400 RANKING_EXPIRED once it " +
          "has expired (10 minutes after its last use)"
      )
  )
  .add(
    HttpApiEndpoint.get("suggestions", "/search/suggestions")
      .setUrlParams(SuggestionsParams)
      .addSuccess(Ok(Schema.Array(Schema.String)))
      .annotateContext(OpenApi.annotations({
        summary: "Suggest queries",
        description: "Completions of a partial query: your past queries, then subjects, then senders (10 at most)"
      }))
  )

export class SearchGroup extends searchEndpoints("search")
  .middleware(ApiAuthentication)
  .prefix("/v1")
  .annotate(OpenApi.Title, "Search")
  .annotate(OpenApi.Description, "Semantic search over received emails on {base_url}")
{}

/** The same routes under /api for dashboard sessions. */
export class DashboardSearchGroup extends searchEndpoints("dashboardSearch")
  .middleware(SessionAuthentication)
  .prefix("/api")
  .annotate(OpenApi.Title, "Search (dashboard session)")
  .annotate(OpenApi.Description, "As /v1/search, for the dashboard's cookie session")
{}
