/** Liveness and readiness: the contract. */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { Ok } from "../envelope.ts"
import { ServiceUnavailable } from "../../../services/errors.ts"
import { envelope } from "../errors.ts"

const Health = Schema.Struct({
  status: Schema.Literal("ok"),
  database: Schema.optional(Schema.Literal("ok")),
  bus: Schema.optional(Schema.Literal("ok"))
})

const Stage = Schema.Struct({
  rate_per_second: Schema.Number.annotations({ description: "Messages this process finished per second, over the last 5 s" }),
  handled: Schema.Number.annotations({ description: "Messages this process finished since it started" }),
  pending: Schema.NullOr(Schema.Number).annotations({
    description: "Messages waiting for the stage on the bus, whichever process runs it (null: unknown; accept: nothing queues)"
  }),
  in_flight: Schema.NullOr(Schema.Number).annotations({ description: "Taken by the stage, not finished (accept: in this process)" }),
  oldest_age_seconds: Schema.NullOr(Schema.Number).annotations({
    description: "Age of the oldest message the stage has not finished; 0 when none (null: unknown)"
  }),
  lagging: Schema.Boolean.annotations({ description: "The oldest is older than STAGE_LAG_WARNING" })
})

const Outbound = Schema.Struct({
  queued: Schema.Number.annotations({ description: "Deliveries of sent mail not tried yet" }),
  deferred: Schema.Number.annotations({ description: "Deliveries that failed for now, to be tried again" }),
  oldest_queued_age_seconds: Schema.NullOr(Schema.Number).annotations({
    description: "How long the oldest queued delivery has waited; 0 when none (null: not sampled yet). Grows while no mta role sends"
  })
})

const Ready = Schema.Struct({
  ...Health.fields,
  vector_index: Schema.optional(Schema.Literal("ok", "unreachable")).annotations({
    description: "Whether the vector index (Qdrant, or pgvector) answers within 2 s; told by a process that searches (api, indexer). " +
      "Unreachable leaves the process ready: mail is still accepted, stored and read, while hybrid searches rank by words alone, vector searches answer 503 and indexing waits"
  }),
  stages: Schema.optional(Schema.Struct({ accept: Stage, ingest: Stage, words: Stage, index: Stage })).annotations({
    description: "The inbound pipeline: accept (SMTP to 250), ingest (parse and store), words (full text: searchable by words), " +
      "index (embed: searchable by meaning); words and index each follow ingest at their own pace; sampled every second"
  }),
  outbound: Schema.optional(Outbound).annotations({
    description: "Sent mail waiting to go, whichever process runs the mta role; sampled every 5 s"
  })
})

export class HealthGroup extends HttpApiGroup.make("health")
  .add(
    HttpApiEndpoint.get("healthz", "/healthz")
      .addSuccess(Ok(Health))
      .annotateContext(OpenApi.annotations({ summary: "Liveness", description: "200 while the process serves requests; checks nothing else" }))
  )
  .add(
    HttpApiEndpoint.get("readyz", "/readyz")
      .addSuccess(Ok(Ready))
      .addError(envelope(ServiceUnavailable))
      .annotateContext(OpenApi.annotations({
        summary: "Readiness",
        description: "200 when the database and the bus answer within 2 s each; 503 SERVICE_UNAVAILABLE otherwise. " +
          "`vector_index` says whether search's vector index answers (it does not make the process unready). `stages` tells each inbound stage's rate and lag (a stage behind does not make the process unready)"
      }))
  )
  .annotate(OpenApi.Description, "Liveness (the process serves) and readiness (database and bus reachable)")
{}
