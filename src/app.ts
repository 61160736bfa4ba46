/**
 * One layer per role (api, smtp, worker) over shared infrastructure (SQL, bus, settings).
 * `main` launches the roles the operator asked for.
 */
import { Effect, Layer, Option } from "effect"
import { AccountSettings } from "../services/accounts/settings.ts"
import { IngestLive } from "../services/mail/ingest.ts"
import { MailboxSettings } from "../services/mailboxes/mailboxes.ts"
import { HousekeepingLive } from "../services/maintenance/housekeeping.ts"
import { IndexerLive } from "../services/search/indexer.ts"
import { Vectors } from "../services/search/vectors.ts"
import { StageLimits } from "../services/stage-limits.ts"
import { WebhooksLive } from "../services/webhooks/delivery.ts"
import { WebhookSettings, WebhookTargets } from "../services/webhooks/targets.ts"
import * as DnsResolver from "../layers/dns.ts"
import * as LocalEmbedder from "../layers/local-embedder.ts"
import * as MemoryBus from "../layers/memory-bus.ts"
import * as NatsBus from "../layers/nats-bus.ts"
import * as OpenAiEmbedder from "../layers/openai-embedder.ts"
import * as PgvectorIndex from "../layers/pgvector-index.ts"
import * as QdrantIndex from "../layers/qdrant-index.ts"
import * as WebhookHttp from "../layers/webhook-http.ts"
import { AppConfig, type AppConfigShape, type Role } from "./config.ts"
import * as Database from "./database.ts"
import { ApiServices, HttpServerLive } from "./http/server.ts"
import { jwtSecret } from "./secrets.ts"
import { SmtpServerLive } from "./smtp/server.ts"

const busLayer = (config: AppConfigShape) =>
  Option.match(config.natsUrl, {
    onSome: (url) => NatsBus.layer({ url, prefix: config.natsPrefix }),
    onNone: () => MemoryBus.layer
  })

const settingsLayer = (config: AppConfigShape) =>
  Layer.effect(AccountSettings, Effect.map(jwtSecret(config), (secret) => ({ jwtSecret: secret })))

/**
 * What the roles share beyond storage: DNS (webhook targets, domain verification), where webhooks
 * may point (checked by the API on save and by the worker before every attempt), and the mailbox
 * rules' settings (the shared domain pool, reserved local parts) that the API and SMTP both apply.
 */
const sharedSettingsLayer = (config: AppConfigShape) => {
  const dns = DnsResolver.layer({ servers: config.dnsServers })
  return Layer.mergeAll(
    WebhookTargets.Default.pipe(Layer.provide(Layer.succeed(WebhookSettings, { allowPrivate: config.webhookAllowPrivate }))),
    Layer.succeed(MailboxSettings, { sharedDomains: config.sharedDomains, disallowedNames: config.disallowedEmailNames })
  ).pipe(Layer.provideMerge(dns))
}

/**
 * Search's outside systems: the embedder (OpenAI with `OPENAI_API_KEY`, else the offline model) and
 * the vector index (Qdrant with `QDRANT_URL`, else pgvector), with the current model's collection.
 */
export const vectorsLayer = (config: AppConfigShape) => {
  const embedder = Option.match(config.openaiApiKey, {
    onSome: (apiKey) =>
      OpenAiEmbedder.layer({ apiKey, model: config.embeddingModel, baseUrl: Option.getOrUndefined(config.openaiBaseUrl) }),
    onNone: () => LocalEmbedder.layer({ threads: Option.getOrUndefined(config.embedderThreads) })
  })
  const index = Option.match(config.qdrantUrl, {
    onSome: (url) => QdrantIndex.layer({ url, apiKey: Option.getOrUndefined(config.qdrantApiKey) }),
    onNone: () => PgvectorIndex.autoLayer({ dataDir: config.dataDir, embedded: config.allRoles ? "allow" : "refuse" })
  })
  return Vectors.Default.pipe(Layer.provideMerge(Layer.merge(embedder, index)))
}

const ApiRole = HttpServerLive.pipe(Layer.provide(ApiServices))
const SmtpRole = SmtpServerLive
const WorkerRole = Layer.mergeAll(IngestLive, IndexerLive, HousekeepingLive, WebhooksLive.pipe(Layer.provide(WebhookHttp.layer)))

/** On the embedded database's one connection the background stages take turns (stage-limits.ts). */
const stageLimitsLayer = (config: AppConfigShape) =>
  Option.isSome(config.databaseUrl) ? Layer.empty : Layer.succeed(StageLimits, StageLimits.embedded)

/** Everything this process runs, ready for `Layer.launch`. */
export const appLayer = (config: AppConfigShape) => {
  const infrastructure = Layer.mergeAll(busLayer(config), settingsLayer(config), AppConfig.make(config)).pipe(
    Layer.provideMerge(Database.layer(config))
  )
  const shared = Layer.mergeAll(infrastructure, sharedSettingsLayer(config), stageLimitsLayer(config))
  const when = <A, E, R>(role: Role, layer: Layer.Layer<A, E, R>) => (config.roles.includes(role) ? layer : Layer.empty)
  // The API and the worker share one embedder and vector index; SMTP alone never opens them.
  const searching = config.roles.includes("api") || config.roles.includes("worker")
    ? Layer.mergeAll(when("api", ApiRole), when("worker", WorkerRole)).pipe(Layer.provide(vectorsLayer(config)))
    : Layer.empty
  const roles = Layer.mergeAll(searching, when("smtp", SmtpRole))
  return roles.pipe(Layer.provide(shared))
}
