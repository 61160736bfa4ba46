/**
 * One layer per role (api, smtp, worker, indexer, mta) over shared infrastructure (SQL, bus, settings:
 * infrastructure.ts, which the operator's commands build too).
 * `main` launches the roles the operator asked for.
 */
import { Duration, Effect, Layer, Option } from "effect"
import { Authenticator } from "../services/accounts/authenticator.ts"
import { RateLeases } from "../services/ratelimit/leases.ts"
import { Billing } from "../services/billing/billing.ts"
import { DomainSettings } from "../services/domains/domains.ts"
import { Lifecycle } from "../services/lifecycle.ts"
import { IngestLive } from "../services/mail/ingest.ts"
import { HousekeepingLive } from "../services/maintenance/housekeeping.ts"
import { IndexerLive } from "../services/search/indexer.ts"
import { WordIndexerLive } from "../services/search/word-indexer.ts"
import { SearchMemory } from "../services/search/ranker.ts"
import { StageMonitor, type StageName, StageSettings } from "../services/pipeline/stages.ts"
import { OutboundBacklog } from "../services/outbound/backlog.ts"
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
import { EventRecorderLive } from "../services/events/recorder.ts"
import { WebhooksLive } from "../services/webhooks/delivery.ts"
import * as DocumentReader from "../layers/document-reader.ts"
import * as Mailauth from "../layers/mailauth.ts"
import { layer as ArcSealLayer } from "../layers/arc-seal.ts"
import * as Rspamd from "../layers/rspamd.ts"
import * as SmtpTransport from "../layers/smtp-transport.ts"
import * as WebhookHttp from "../layers/webhook-http.ts"
import { type AppConfigShape, inboundChecksRole, type Role } from "./config.ts"
import {
  infrastructureLayer,
  outboundLayer,
  paymentsLayer,
  sharedSettingsLayer,
  stageLimitsLayer,
  vectorDatabaseLayer,
  vectorsApart,
  vectorsLayer,
  watchedLayer
} from "./infrastructure.ts"
import { HttpServerLive } from "./http/server.ts"
import { metricsServerLayer } from "./metrics.ts"
import { RuntimeMetricsLive } from "./runtime-metrics.ts"
import { SmtpServerLive } from "./smtp/server.ts"
import { ImapServerLive } from "./imap/server.ts"
import { SubmissionServerLive } from "./smtp/submission.ts"

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
