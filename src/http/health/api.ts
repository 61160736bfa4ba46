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

export class HealthGroup extends HttpApiGroup.make("health")
  .add(
    HttpApiEndpoint.get("healthz", "/healthz")
      .addSuccess(Ok(Health))
      .annotateContext(OpenApi.annotations({ summary: "Liveness", description: "200 while the process serves requests; checks nothing else" }))
  )
  .add(
    HttpApiEndpoint.get("readyz", "/readyz")
      .addSuccess(Ok(Health))
      .addError(envelope(ServiceUnavailable))
      .annotateContext(OpenApi.annotations({
        summary: "Readiness",
        description: "200 when the database and the bus answer within 2 s each; 503 SERVICE_UNAVAILABLE otherwise"
      }))
  )
  .annotate(OpenApi.Description, "Liveness (the process serves) and readiness (database and bus reachable)")
{}
