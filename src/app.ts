/**
 * One layer per role (api, smtp, worker, indexer, mta) over shared infrastructure (SQL, bus, settings).
 * `main` launches the roles the operator asked for.
 */
import { SqlClient } from "@effect/sql"
import { Context, Duration, Effect, Layer, Option, Redacted } from "effect"
import { AccountSettings } from "../services/accounts/settings.ts"
import { Authenticator } from "../services/accounts/authenticator.ts"
import { Principals } from "../services/accounts/principals.ts"
import { RateLeases } from "../services/ratelimit/leases.ts"
import { PasswordCost } from "../services/accounts/passwords.ts"
import { RecipientDirectory } from "../services/mail/directory.ts"
import { Billing } from "../services/billing/billing.ts"
import { Bus } from "../services/bus/bus.ts"
import { DomainSettings } from "../services/domains/domains.ts"
import { type Dependency, DependencyHealth } from "../services/health/dependency-health.ts"
import { Lifecycle } from "../services/lifecycle.ts"
import { IngestLive } from "../services/mail/ingest.ts"
import { ForwardingKey, forwardingKeyOf } from "../services/mail/forward-rules.ts"
import { MailboxSettings } from "../services/mailboxes/mailboxes.ts"
import { HousekeepingLive } from "../services/maintenance/housekeeping.ts"
import { Embedder } from "../services/search/embedder.ts"
import { IndexerLive } from "../services/search/indexer.ts"
import { WordIndexerLive } from "../services/search/word-indexer.ts"
import { Vectors } from "../services/search/vectors.ts"
import { SearchMemory } from "../services/search/ranker.ts"
import { StageLimits } from "../services/stage-limits.ts"
import { StageMonitor, type StageName, StageSettings } from "../services/pipeline/stages.ts"
import { OutboundBacklog } from "../services/outbound/backlog.ts"
import { DkimKeys } from "../services/outbound/dkim.ts"
import { Drafts, DraftSchedulerLive } from "../services/outbound/drafts.ts"
import { RequeueLive } from "../services/outbound/requeue.ts"
import { OutboxBacklogLive } from "../services/bus/outbox-backlog.ts"
import { OutboxLive } from "../services/bus/outbox.ts"
import { MtaLive } from "../services/outbound/mta.ts"
import { Replies } from "../services/outbound/replies.ts"
import { Meetings } from "../services/meetings/meetings.ts"
import { CalendarMailLive } from "../services/schedule/calendar-mail.ts"
import { ScheduleRemindersLive } from "../services/schedule/reminders.ts"
import { Schedule } from "../services/schedule/schedule.ts"
import { Outbound } from "../services/outbound/send.ts"
import { Submission } from "../services/outbound/submission.ts"
import { ImapStore } from "../services/imap/store.ts"
import { FolderViews } from "../services/imap/views.ts"
import { Deletions } from "../services/mail/deletion.ts"
import { Labels } from "../services/mail/labels.ts"
import { AutoReplyResponderLive } from "../services/outbound/auto-replies.ts"
import { OutboundSettings } from "../services/outbound/settings.ts"
import { EventRecorderLive } from "../services/events/recorder.ts"
import { WebhooksLive } from "../services/webhooks/delivery.ts"
import { WebhookSubscriptions } from "../services/webhooks/subscriptions.ts"
import { WebhookSettings, WebhookTargets } from "../services/webhooks/targets.ts"
import { VectorIndex } from "../services/search/vector-index.ts"
import * as DnsResolver from "../layers/dns.ts"
import * as LocalBilling from "../layers/local-billing.ts"
import * as DocumentReader from "../layers/document-reader.ts"
import * as Mailauth from "../layers/mailauth.ts"
import { layer as ArcSealLayer } from "../layers/arc-seal.ts"
import * as Rspamd from "../layers/rspamd.ts"
import * as LocalEmbedder from "../layers/local-embedder.ts"
import * as MemoryBus from "../layers/memory-bus.ts"
import * as NatsBus from "../layers/nats-bus.ts"
import * as OpenAiEmbedder from "../layers/openai-embedder.ts"
import * as PgvectorIndex from "../layers/pgvector-index.ts"
import * as QdrantIndex from "../layers/qdrant-index.ts"
import * as SmtpTransport from "../layers/smtp-transport.ts"
import * as StripeBilling from "../layers/stripe-billing.ts"
import * as WebhookHttp from "../layers/webhook-http.ts"
import * as WordNet from "../layers/wordnet.ts"
import { AppConfig, type AppConfigShape, inboundChecksRole, reservedLocalParts, type Role } from "./config.ts"
import * as Database from "./database.ts"
import { HttpServerLive } from "./http/server.ts"
import { metricsServerLayer } from "./metrics.ts"
import { RuntimeMetricsLive } from "./runtime-metrics.ts"
import { jwtSecret } from "./secrets.ts"
import { SmtpServerLive } from "./smtp/server.ts"
import { ImapServerLive } from "./imap/server.ts"
import { SubmissionServerLive } from "./smtp/submission.ts"

const busLayer = (config: AppConfigShape) =>
  Option.match(config.natsUrl, {
    onSome: (url) => NatsBus.layer({ url, prefix: config.natsPrefix, replicas: config.natsReplicas }),
    onNone: () => MemoryBus.layer
  })

/**
 * How DependencyHealth sees the database and the bus come back after an outage, and the names an
 * operator reads in "PostgreSQL unreachable: …" / "PostgreSQL reachable again after …".
 */
const watchedLayer = (config: AppConfigShape) =>
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
const sharedSettingsLayer = (config: AppConfigShape) => {
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
const vectorsApart = (config: AppConfigShape) => Option.isNone(config.qdrantUrl) && Option.isNone(config.databaseUrl)

/**
 * That PGlite, when `vectorsApart`: a layer of its own, so that `appLayer` can open it beside the app's
 * database rather than after it (a fresh one takes seconds, as the app's does); where the index is
 * built with the same layer, it is the one opened (layers are built once per process).
 */
const vectorDatabaseLayer = (config: AppConfigShape) =>
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

/** The API's own adapters and settings: how payments are taken, what custom domains are held to, how webhooks are posted. */
/**
 * With IMAP_PORT (STARTTLS) or IMAPS_PORT (implicit TLS), the api role also lets mail programs read
 * and file a mailbox's mail (src/imap), signed in with an API key.
 */
const imapLayer = (config: AppConfigShape) =>
  Option.isNone(config.imapPort) && Option.isNone(config.imapsPort)
    ? Layer.empty
    : Layer.mergeAll(
      Option.match(config.imapPort, { onNone: () => Layer.empty, onSome: (port) => ImapServerLive(port, "starttls") }),
      Option.match(config.imapsPort, { onNone: () => Layer.empty, onSome: (port) => ImapServerLive(port, "tls") })
    ).pipe(
      Layer.provide(ImapStore.Default),
      Layer.provide(Layer.mergeAll(Authenticator.Default, RateLeases.Default, Labels.Default, Deletions.Default, FolderViews.Default))
    )

const apiRole = (config: AppConfigShape) => Layer.merge(
  imapLayer(config),
  HttpServerLive.pipe(
    Layer.provide(paymentsLayer(config).pipe(Layer.provide(Billing.Default))),
    // A test event, or a delivery sent again, is posted by the API node the person asked.
    Layer.provide(WebhookHttp.layer),
    Layer.provide(Layer.succeed(DomainSettings, {
      verifyPrefix: config.verifyPrefix,
      mxHost: config.mxHost,
      freeMaxCustomDomains: config.freeMaxCustomDomains,
      spfRecord: config.spfRecord
    }))
  )
)
/**
 * SPF, DKIM, DMARC and ARC, checked through the Dns port in a thread of their own, naming this node
 * MX_HOST in the verdicts, by the one role that checks (`inboundChecksRole`): a process starts one thread.
 */
const checksLayer = (config: AppConfigShape, role: "smtp" | "worker") =>
  inboundChecksRole(config) === role ? Mailauth.layer({ authservId: config.mxHost }) : Mailauth.none

/**
 * The smtp role: the MX, and with SUBMISSION_PORT (STARTTLS) or SUBMISSIONS_PORT (implicit TLS) the
 * submission server, which sends as the API does (Outbound) for the API key a client signs in with.
 */
const smtpRole = (config: AppConfigShape) => Layer.merge(
  Option.isNone(config.submissionPort) && Option.isNone(config.submissionsPort)
    ? Layer.empty
    : Layer.mergeAll(
      Option.match(config.submissionPort, { onNone: () => Layer.empty, onSome: (port) => SubmissionServerLive(port, "starttls") }),
      Option.match(config.submissionsPort, { onNone: () => Layer.empty, onSome: (port) => SubmissionServerLive(port, "tls") })
    ).pipe(
      Layer.provide(Submission.Default),
      Layer.provide(Outbound.Default),
      Layer.provide(Layer.mergeAll(Authenticator.Default, RateLeases.Default))
    ),
  SmtpServerLive.pipe(
    Layer.provide(checksLayer(config, "smtp")),
    // With RSPAMD_URL, rspamd scores every message; without it nothing is scored.
    Layer.provide(Option.match(config.rspamdUrl, {
      onSome: (url) => Rspamd.layer({ url, hostname: config.mxHost }),
      onNone: () => Rspamd.none
    }))
  )
)
/**
 * The worker: ingest (the pipeline's second stage), webhooks, housekeeping, the event log, automatic
 * replies, the calendars mail brings (attendees' answers to the mailboxes' meetings, invitations
 * onto their schedules), reminders of what is on the schedules, and the outbox's publications a
 * change could not hand to the bus itself.
 */
const workerRole = (config: AppConfigShape) => Layer.mergeAll(
  IngestLive.pipe(Layer.provide(checksLayer(config, "worker"))),
  // The same reader as the indexer's and the API's where they run here too (a layer is built once per reference).
  WordIndexerLive.pipe(Layer.provide(DocumentReader.layer)),
  HousekeepingLive,
  OutboxLive,
  WebhooksLive.pipe(Layer.provide(WebhookHttp.layer)),
  EventRecorderLive,
  AutoReplyResponderLive.pipe(Layer.provide(Replies.Default), Layer.provide(Outbound.Default)),
  CalendarMailLive.pipe(Layer.provide(Meetings.Default), Layer.provide(Schedule.Default), Layer.provide(Outbound.Default)),
  ScheduleRemindersLive.pipe(Layer.provide(Schedule.Default))
)
/** The mta: delivery, sent mail whose delivery was never queued queued again, and scheduled drafts leaving on time. */
const MtaRole = Layer.mergeAll(
  MtaLive.pipe(Layer.provide(SmtpTransport.layer), Layer.provide(ArcSealLayer)),
  RequeueLive,
  DraftSchedulerLive.pipe(
    Layer.provide(Drafts.Default),
    Layer.provide(Replies.Default),
    Layer.provide(Outbound.Default)
  )
)

/** On the embedded database's one connection the background stages take turns (stage-limits.ts). */
const stageLimitsLayer = (config: AppConfigShape) =>
  Option.isSome(config.databaseUrl) ? Layer.empty : Layer.succeed(StageLimits, StageLimits.embedded)

/**
 * Every process samples the pipeline's stages (for /readyz, /metrics); it logs about the stages it
 * runs or feeds, so a stage no process runs is still told about by the one upstream of it.
 */
const stagesLayer = (config: AppConfigShape) => {
  const feeds: Record<StageName, ReadonlyArray<Role>> = {
    accept: ["smtp"],
    ingest: ["smtp", "worker"],
    words: ["worker"],
    index: ["worker", "indexer"]
  }
  const logged = (Object.keys(feeds) as Array<StageName>).filter((stage) => feeds[stage].some((role) => config.roles.includes(role)))
  return StageMonitor.Default.pipe(
    Layer.provide(Layer.succeed(StageSettings, { lagWarning: config.stageLagWarning, interval: Duration.seconds(1), logged }))
  )
}

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

/**
 * Everything this process runs, ready for `Layer.launch`. `stopping` completes when the process
 * begins to shut down (services/lifecycle.ts).
 */
export const appLayer = (config: AppConfigShape, stopping: Effect.Effect<void> = Effect.never) => {
  // One DependencyHealth for the process, so that an outage is told once whoever meets it.
  const infrastructure = watchedLayer(config).pipe(Layer.provideMerge(infrastructureLayer(config)))
  // The API and the indexer share one embedder and vector index; SMTP, the worker and the mta never open them.
  const searches = config.roles.includes("api") || config.roles.includes("indexer")
  const vectorDatabase = vectorDatabaseLayer(config)
  const shared = Layer.mergeAll(
    infrastructure,
    stagesLayer(config).pipe(Layer.provide(infrastructure)),
    OutboundBacklog.Default.pipe(Layer.provide(infrastructure)),
    OutboxBacklogLive.pipe(Layer.provide(infrastructure)),
    sharedSettingsLayer(config),
    stageLimitsLayer(config),
    Layer.succeed(SearchMemory, { postings: config.searchMemoryPostings }),
    Layer.succeed(Lifecycle, { stopping })
  ).pipe(Layer.provideMerge(outboundLayer(config).pipe(Layer.provide(infrastructure))))
  const when = <A, E, R>(role: Role, layer: Layer.Layer<A, E, R>) => (config.roles.includes(role) ? layer : Layer.empty)
  // One value, so that the layer is built once for every role given it (layers are shared by reference).
  const vectors = vectorsLayer(config, vectorDatabase)
  const searching = searches
    ? Layer.mergeAll(when("api", apiRole(config)), when("indexer", IndexerLive)).pipe(Layer.provide(vectors))
    : Layer.empty
  const roles = Layer.mergeAll(
    searching,
    when("worker", workerRole(config)),
    when("smtp", smtpRole(config)),
    when("mta", MtaRole),
    // An indexer node's /readyz tells its vector index too.
    searches ? metricsServerLayer(config).pipe(Layer.provide(vectors)) : metricsServerLayer(config),
    RuntimeMetricsLive
  )
  // The vector index's own PGlite opens beside the app's database (`vectorsLayer` then finds it open).
  return roles.pipe(Layer.provide(Layer.merge(shared, searches && vectorsApart(config) ? vectorDatabase : Layer.empty)))
}
