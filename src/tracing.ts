/**
 * Traces (issue 22): with `OTEL_EXPORTER_OTLP_ENDPOINT` set, every span is exported over OTLP/HTTP
 * (JSON) to `<endpoint>/v1/traces`, in batches every `OTEL_BSP_SCHEDULE_DELAY` ms and when the
 * process stops. HTTP requests get a server span each (the platform's own), an SMTP transaction
 * its `smtp.accept` span, and every bus consumer a `consume <name>` span that continues the trace
 * of the message's publisher (services/bus/tracing.ts). Without the endpoint the tracer is off:
 * spans would go nowhere, and making them costs every request.
 *
 * Through `@effect/opentelemetry`'s OtlpTracer: an Effect `Tracer` that speaks OTLP itself, so the
 * spans Effect already makes are exported without the OpenTelemetry SDK running beside it.
 */
import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import * as OtlpTracer from "@effect/opentelemetry/OtlpTracer"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Duration, Effect, Layer, Option } from "effect"
import type { AppConfigShape } from "./config.ts"
import { nodeId } from "./logging.ts"

export const withTracing = (config: AppConfigShape) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Option.match(config.otlpEndpoint, {
    onNone: () => Effect.withTracerEnabled(effect, false),
    onSome: (endpoint) =>
      Effect.provide(
        effect,
        OtlpTracer.layer({
          url: `${endpoint.replace(/\/+$/, "")}/v1/traces`,
          resource: {
            serviceName: config.otelServiceName,
            attributes: { "service.instance.id": nodeId, "mailroom.roles": config.roles.join(",") }
          },
          exportInterval: Duration.millis(config.otelExportDelay)
        }).pipe(Layer.provide(Layer.merge(NodeHttpClient.layerUndici, OtlpSerialization.layerJson)))
      )
  })
