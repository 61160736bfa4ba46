/**
 * What the roles and the operator's commands share: storage, the bus, settings, DependencyHealth, and
 * the adapters more than one of them opens (the embedder and vector index, outbound's settings and
 * DKIM keys, the payment provider). Apart from app.ts, so that a command (src/cli.ts, src/reindex.ts)
 * loads none of the servers (HTTP, SMTP, IMAP) to build them.
 */
import { SqlClient } from "@effect/sql"
import { Context, Duration, Effect, Layer, Option, Redacted } from "effect"
import { AccountSettings } from "../services/accounts/settings.ts"
import { Principals } from "../services/accounts/principals.ts"
import { PasswordCost } from "../services/accounts/passwords.ts"
import { RecipientDirectory } from "../services/mail/directory.ts"
import { Bus } from "../services/bus/bus.ts"
import { type Dependency, DependencyHealth } from "../services/health/dependency-health.ts"
import { ForwardingKey, forwardingKeyOf } from "../services/mail/forward-rules.ts"
import { MailboxSettings } from "../services/mailboxes/mailboxes.ts"
import { Embedder } from "../services/search/embedder.ts"
import { Vectors } from "../services/search/vectors.ts"
import { StageLimits } from "../services/stage-limits.ts"
import { DkimKeys } from "../services/outbound/dkim.ts"
import { OutboundSettings } from "../services/outbound/settings.ts"
import { WebhookSubscriptions } from "../services/webhooks/subscriptions.ts"
import { WebhookSettings, WebhookTargets } from "../services/webhooks/targets.ts"
import { VectorIndex } from "../services/search/vector-index.ts"
import * as DnsResolver from "../layers/dns.ts"
import * as LocalBilling from "../layers/local-billing.ts"
import * as DocumentReader from "../layers/document-reader.ts"
import * as LocalEmbedder from "../layers/local-embedder.ts"
import * as MemoryBus from "../layers/memory-bus.ts"
import * as NatsBus from "../layers/nats-bus.ts"
import * as OpenAiEmbedder from "../layers/openai-embedder.ts"
import * as PgvectorIndex from "../layers/pgvector-index.ts"
import * as QdrantIndex from "../layers/qdrant-index.ts"
import * as StripeBilling from "../layers/stripe-billing.ts"
import * as WordNet from "../layers/wordnet.ts"
import { AppConfig, type AppConfigShape, reservedLocalParts } from "./config.ts"
import * as Database from "./database.ts"
import { jwtSecret } from "./secrets.ts"

const busLayer = (config: AppConfigShape) =>
  Option.match(config.natsUrl, {
    onSome: (url) => NatsBus.layer({ url, prefix: config.natsPrefix, replicas: config.natsReplicas }),
    onNone: () => MemoryBus.layer
  })

/**
 * How DependencyHealth sees the database and the bus come back after an outage, and the names an
 * operator reads in "PostgreSQL unreachable: …" / "PostgreSQL reachable again after …".
 */
export const watchedLayer = (config: AppConfigShape) =>
  Layer.effectDiscard(Effect.gen(function*() {
    const health = yield* DependencyHealth
    const sql = yield* SqlClient.SqlClient
    const bus = yield* Bus
    yield* health.watch("database", {
      name: Option.isSome(config.databaseUrl) ? "PostgreSQL" : "The embedded database",
      probe: sql`SELECT 1`
    })
    yield* health.watch("bus", { name: Option.isSome(config.natsUrl) ? "NATS" : "The bus", probe: bus.ping })
  }))

/**
 * The settings made of the server's secret: access tokens are signed with it, and forwarded copies'
 * loop fields with a key derived from it (forward-rules.ts), alike on every node.
 */
const settingsLayer = (config: AppConfigShape) =>
  Layer.unwrapEffect(Effect.map(jwtSecret(config), (secret) =>
    Layer.merge(
      Layer.succeed(AccountSettings, { jwtSecret: secret }),
      Layer.succeed(ForwardingKey, forwardingKeyOf(Redacted.value(secret)))
    )))

/**
 * What the roles share beyond storage: DNS (webhook targets, domain verification), where webhooks
 * may point (checked by the API on save and by the worker before every attempt), and the mailbox
 * rules' settings (the shared domain pool, reserved local parts) that the API and SMTP both apply.
 */
export const sharedSettingsLayer = (config: AppConfigShape) => {
  const dns = DnsResolver.layer({ servers: config.dnsServers })
  return Layer.mergeAll(
    WebhookTargets.Default.pipe(Layer.provide(Layer.succeed(WebhookSettings, { allowPrivate: config.webhookAllowPrivate }))),
    mailboxSettingsLayer(config)
  ).pipe(Layer.provideMerge(dns))
}

/** The shared domain pool and the reserved local parts (Mailroom's own sender among them). */
export const mailboxSettingsLayer = (config: AppConfigShape) =>
  Layer.succeed(MailboxSettings, {
    sharedDomains: config.sharedDomains,
    disallowedNames: reservedLocalParts(config),
    postmasterMailbox: Option.getOrUndefined(config.postmasterMailbox),
    freeMaxCustomDomains: config.freeMaxCustomDomains
  })

/**
 * Search's outside systems: the embedder (OpenAI with `OPENAI_API_KEY`, else the offline model),
 * the vector index (Qdrant with `QDRANT_URL`, else pgvector: in the app's PostgreSQL when it has the
 * extension, else in a PGlite of its own, which it always is beside the embedded database), with the
 * current model's collection, the thesaurus (WordNet, read only once a query is expanded), and the
 * reader of document attachments (a process started on the first PDF or Word file): what the indexer and the API's
 * attachment texts share.
 */
export const vectorsLayer = (config: AppConfigShape, vectorDatabase = vectorDatabaseLayer(config)) => {
  const embedder = Option.match(config.openaiApiKey, {
    onSome: (apiKey) =>
      OpenAiEmbedder.layer({ apiKey, model: config.embeddingModel, baseUrl: Option.getOrUndefined(config.openaiBaseUrl) }),
    onNone: () => LocalEmbedder.layer({
      threads: Option.getOrUndefined(config.embedderThreads),
      nice: Option.getOrUndefined(config.embedderNice)
    })
  })
  // While it is out of reach ("OpenAI unreachable: …"), DependencyHealth asks it for one short
  // vector a second, to say when it is back.
  const watchedEmbedder = watchedBy(embedder, Embedder, "embedder", (model) => ({
    name: Option.isSome(config.openaiApiKey) ? "OpenAI" : "The embedder",
    // Cut short: the adapter's own retries would see the return only at their next turn. Ahead of
    // indexing work waiting (as a query is): behind a backlog it would time out, the embedder well.
    probe: model.embed(["ping"], "query").pipe(Effect.timeout("3 seconds"), Effect.asVoid)
  }))
  return Layer.mergeAll(
    Vectors.Default.pipe(Layer.provideMerge(Layer.merge(watchedEmbedder, vectorIndexLayer(config, vectorDatabase)))),
    WordNet.layer,
    DocumentReader.layer
  )
}

/** Whether the vector index is an embedded PGlite of its own beside the embedded database (`PgvectorIndex.apartLayer`). */
export const vectorsApart = (config: AppConfigShape) => Option.isNone(config.qdrantUrl) && Option.isNone(config.databaseUrl)

/**
 * That PGlite, when `vectorsApart`: a layer of its own, so that `appLayer` can open it beside the app's
 * database rather than after it (a fresh one takes seconds, as the app's does); where the index is
 * built with the same layer, it is the one opened (layers are built once per process).
 */
export const vectorDatabaseLayer = (config: AppConfigShape) =>
  PgvectorIndex.embeddedDatabaseLayer(config.dataDir, { sharedBuffers: Option.getOrUndefined(config.pgliteSharedBuffers) })

/**
 * The vector index alone (`vectorsLayer`'s), for what removes vectors without embedding anything.
 * DependencyHealth pings it while it is out of reach ("Qdrant unreachable: …", "Qdrant reachable
 * again after …"), as it does the database and the bus.
 */
export const vectorIndexLayer = (config: AppConfigShape, vectorDatabase = vectorDatabaseLayer(config)) =>
  watchedBy(vectorIndexAdapter(config, vectorDatabase), VectorIndex, "vectorIndex", (index) => ({
    name: index.kind === "qdrant" ? "Qdrant" : "The vector index",
    probe: index.ping
  }))

/**
 * `layer`, with DependencyHealth (where the process has it) told how to see that the service `tag` it
 * builds is back after an outage, and its name in the log.
 */
const watchedBy = <I, S, E, R>(
  layer: Layer.Layer<I, E, R>,
  tag: Context.Tag<I, S>,
  dependency: Dependency,
  watch: (service: S) => { readonly name: string; readonly probe: Effect.Effect<void, unknown> }
) =>
  layer.pipe(
    Layer.tap((context) =>
      Effect.flatMap(Effect.serviceOption(DependencyHealth), (health) =>
        Option.match(health, { onNone: () => Effect.void, onSome: (health) => health.watch(dependency, watch(Context.get(context, tag))) }))
    )
  )

const vectorIndexAdapter = (config: AppConfigShape, vectorDatabase: ReturnType<typeof vectorDatabaseLayer>) =>
  Option.match(config.qdrantUrl, {
    onSome: (url) => QdrantIndex.layer({ url, apiKey: Option.getOrUndefined(config.qdrantApiKey), prefix: config.qdrantPrefix }),
    onNone: () =>
      vectorsApart(config)
        ? PgvectorIndex.apartLayer.pipe(Layer.provide(vectorDatabase))
        : PgvectorIndex.autoLayer({
          dataDir: config.dataDir,
          embedded: config.allRoles ? "allow" : "refuse",
          sharedBuffers: Option.getOrUndefined(config.pgliteSharedBuffers)
        })
  })

/**
 * What outbound mail is held to (DESIGN.md §4b), and the DKIM keys it is signed with (DKIM_PRIVATE_KEY
 * read by config.ts).
 */
export const outboundLayer = (config: AppConfigShape) =>
  DkimKeys.Default.pipe(Layer.provideMerge(Layer.succeed(OutboundSettings, {
    relay: config.smtpRelay,
    mxPort: config.outboundSmtpPort,
    allowPrivate: config.outboundAllowPrivate,
    heloName: Option.getOrElse(config.smtpHeloName, () => config.mxHost),
    maxAge: config.outboundMaxAge,
    retryDelays: config.outboundRetryDelays,
    dkimSelector: config.dkimSelector,
    dkimPrivateKey: Option.map(config.dkimPrivateKey, Redacted.value),
    appUrl: config.appUrl,
    // RFC 5321 §4.5.3.2 asks 5 minutes for MAIL and RCPT and 10 for the answer to the message's final
    // dot. At 60 s, a receiver that took 65 s to check a message was sent it again on every retry, and
    // the delivery ended failed; 5 minutes serves such receivers without holding a delivery for 10 on
    // a server gone silent.
    timeouts: { connect: Duration.seconds(30), command: Duration.minutes(5) }
  })))

/** The payment provider: Stripe when `STRIPE_SECRET_KEY` is set (config.ts checks the rest), else local billing. */
export const paymentsLayer = (config: AppConfigShape) =>
  Option.match(config.stripeSecretKey, {
    onNone: () => LocalBilling.layer({ appUrl: config.appUrl }),
    onSome: (secretKey) =>
      StripeBilling.layer({
        secretKey,
        webhookSecret: Option.getOrThrow(config.stripeWebhookSecret),
        prices: { pro: Option.getOrThrow(config.stripePricePro), enterprise: Option.getOrThrow(config.stripePriceEnterprise) },
        apiUrl: config.stripeApiUrl
      })
  })

/** On the embedded database's one connection the background stages take turns (stage-limits.ts). */
export const stageLimitsLayer = (config: AppConfigShape) =>
  Option.isSome(config.databaseUrl) ? Layer.empty : Layer.succeed(StageLimits, StageLimits.embedded)

/** Storage, the bus, settings and DependencyHealth: what the roles and the operator's commands share. */
export const infrastructureLayer = (config: AppConfigShape) =>
  // One Principals, RecipientDirectory and WebhookSubscriptions per process: a change applied by any
  // service reaches the cache requests, RCPTs and the webhook actor read.
  Layer.mergeAll(Principals.Default, RecipientDirectory.Default, WebhookSubscriptions.Default).pipe(
    Layer.provideMerge(Layer.mergeAll(
      busLayer(config),
      settingsLayer(config),
      AppConfig.make(config),
      Layer.succeed(PasswordCost, config.passwordHashCost)
    )),
    Layer.provideMerge(Database.layer(config)),
    Layer.provideMerge(DependencyHealth.Default)
  )
