/**
 * The operator interface (DESIGN.md §3), read once through Effect `Config` and checked at start.
 * A bad value stops the process with a message naming the variable.
 */
import { accessSync, constants, readFileSync } from "node:fs"
import { createPrivateKey } from "node:crypto"
import { isIP } from "node:net"
import { createSecureContext } from "node:tls"
import { Config, ConfigError, ConfigProvider, Duration, Effect, Either, Layer, LogLevel, Option, Redacted } from "effect"
import * as Context from "effect/Context"
import { DEFAULT_PASSWORD_COST, PASSWORD_COSTS } from "../services/accounts/passwords.ts"
import { DEFAULT_SPF_RECORD } from "../services/domains/domains.ts"
import { isLoopbackHost } from "../services/dns/addresses.ts"
import { isHostName } from "../services/domains/names.ts"
import { normalizeDomain, parseAddress } from "../services/mailboxes/rules.ts"
import { SYSTEM_SENDER } from "../services/outbound/system-mail.ts"
import { proxyEntry } from "./trusted-proxies.ts"

/**
 * `worker` ingests and indexes words (and runs webhooks, housekeeping, the event log); `indexer` makes
 * mail searchable by meaning;
 * `mta` delivers outbound mail. Each pipeline stage can so run in processes of its own.
 */
export type Role = "api" | "smtp" | "worker" | "indexer" | "mta"
export const allRoles: ReadonlyArray<Role> = ["api", "smtp", "worker", "indexer", "mta"]

const list = (name: string, fallback: string) =>
  Config.string(name).pipe(
    Config.withDefault(fallback),
    Config.map((value) =>
      value
        .split(",")
        .map((item) => item.trim())
        .filter((item) => item.length > 0)
    )
  )

const roles = list("ROLES", allRoles.join(",")).pipe(
  Config.mapOrFail((values) => {
    const unknown = values.filter((value) => !allRoles.includes(value as Role))
    if (values.length === 0 || unknown.length > 0) {
      return Either.left(
        ConfigError.InvalidData(
          ["ROLES"],
          `Expected a comma-separated list of ${allRoles.join(", ")} but received ${JSON.stringify(values.join(","))}`
        )
      )
    }
    return Either.right(Array.from(new Set(values)) as ReadonlyArray<Role>)
  })
)

const hostPortList = (name: string) =>
  Config.option(list(name, "")).pipe(
    Config.mapOrFail((option) => {
      const values = Option.getOrElse(option, () => [] as Array<string>)
      const bad = values.filter((value) => !/^[^\s:]+(:\d{1,5})?$|^\[[0-9a-fA-F:]+\](:\d{1,5})?$/.test(value))
      return bad.length > 0
        ? Either.left(ConfigError.InvalidData([name], `Expected host:port entries but received ${JSON.stringify(bad[0])}`))
        : Either.right(values)
    })
  )

/** Addresses and networks (`10.0.0.5`, `10.0.0.0/8`, `fd00::/8`), as src/trusted-proxies.ts reads them. */
const networkList = (name: string) =>
  list(name, "").pipe(
    Config.mapOrFail((values) => {
      const bad = values.find((value) => proxyEntry(value) === undefined)
      return bad === undefined
        ? Either.right(values)
        : Either.left(ConfigError.InvalidData([name], `Expected addresses or networks such as 10.0.0.0/8 but received ${JSON.stringify(bad)}`))
    })
  )

/** Peers (`10.0.0.5`, `2001:db8::1`, or `*` for every one) that open each connection with a PROXY protocol header. */
const proxyPeers = (name: string) =>
  list(name, "").pipe(
    Config.mapOrFail((values) => {
      const bad = values.find((value) => value !== "*" && isIP(value) === 0)
      return bad === undefined
        ? Either.right(values)
        : Either.left(ConfigError.InvalidData([name], `Expected addresses such as 10.0.0.5 (or *) but received ${JSON.stringify(bad)}`))
    })
  )

const url = (name: string) =>
  Config.string(name).pipe(
    Config.mapOrFail((value) => {
      try {
        return Either.right(new URL(value).toString().replace(/\/$/, ""))
      } catch {
        return Either.left(ConfigError.InvalidData([name], `Expected a URL but received ${JSON.stringify(value)}`))
      }
    })
  )

/**
 * A host (or mail domain) name: labels of letters, digits and '-', internationalized ones in punycode
 * as DNS and SMTP carry them, one label allowed (a private network's host, a compose service), no IP
 * address (an MX record names a host).
 */
const mailHost = (name: string) => (value: string) => {
  const host = normalizeDomain(value)
  return isHostName(host)
    ? Either.right(host)
    : Either.left(ConfigError.InvalidData([name], `Expected a host name such as example.com but received ${JSON.stringify(value)}`))
}

/**
 * An SPF record (RFC 7208): `v=spf1`, then mechanisms, ending in an `all`, spaces collapsed; at most
 * 255 characters, one TXT string, as a domain's DNS host is asked to publish it.
 */
const spfRecord = (name: string) => (value: string) => {
  const record = value.trim().replace(/\s+/g, " ")
  return /^v=spf1( [^\s]+)* [-~?+]?all$/i.test(record) && record.length <= 255
    ? Either.right(record)
    : Either.left(ConfigError.InvalidData([name], `Expected an SPF record such as "v=spf1 include:relay.example ~all" (ending in an all) but received ${JSON.stringify(value)}`))
}

/** An email address (`local@host`), lower-cased with its domain as DNS carries it. */
const mailAddress = (name: string) => (value: string) => {
  const trimmed = value.trim()
  const at = trimmed.lastIndexOf("@")
  const local = trimmed.slice(0, at)
  const domain = at > 0 && /^[a-z0-9._-]+$/i.test(local) ? Either.getRight(mailHost(name)(trimmed.slice(at + 1))) : Option.none()
  return Option.match(domain, {
    onNone: () => Either.left(ConfigError.InvalidData([name], `Expected an address such as ops-desk@example.com but received ${JSON.stringify(value)}`)),
    onSome: (host) => Either.right(`${local.toLowerCase()}@${host}`)
  })
}

/** Like Config.validate, but the error names the variable (Config.validate loses the path). */
const check = <A>(name: string, message: string, valid: (value: A) => boolean) => (config: Config.Config<A>) =>
  Config.mapOrFail(config, (value) =>
    valid(value) ? Either.right(value) : Either.left(ConfigError.InvalidData([name], `${message} but received ${JSON.stringify(value)}`)))

/** A PostgreSQL memory size (`512kB`, `32MB`, `1GB`) in kB. */
const sizeInKb = (size: string): number | undefined => {
  const match = /^([1-9][0-9]{0,6})(kB|MB|GB)$/.exec(size)
  return match ? Number(match[1]) * { kB: 1, MB: 1024, GB: 1024 * 1024 }[match[2] as "kB" | "MB" | "GB"] : undefined
}

const nonNegativeInt = (name: string, fallback: number) =>
  Config.integer(name).pipe(Config.withDefault(fallback), check(name, "Expected a non-negative integer", (n: number) => n >= 0))

const logLevels: Record<string, LogLevel.LogLevel> = {
  trace: LogLevel.Trace,
  debug: LogLevel.Debug,
  info: LogLevel.Info,
  warn: LogLevel.Warning,
  warning: LogLevel.Warning,
  error: LogLevel.Error,
  fatal: LogLevel.Fatal,
  none: LogLevel.None,
  off: LogLevel.None
}

const logLevel = (name: string) =>
  Config.string(name).pipe(
    Config.withDefault("info"),
    Config.mapOrFail((value) => {
      const level = logLevels[value.trim().toLowerCase()]
      return level
        ? Either.right(level)
        : Either.left(ConfigError.InvalidData([name], `Expected one of ${Object.keys(logLevels).join(", ")} but received ${JSON.stringify(value)}`))
    })
  )

const logFormat = Config.literal("pretty", "json")("LOG_FORMAT").pipe(Config.withDefault("pretty" as const))

/** A duration in seconds (`30`, `0.5`), as operators write it in an environment file. */
const seconds = (name: string, fallback: number) =>
  Config.number(name).pipe(
    Config.withDefault(fallback),
    check(name, "Expected a number of seconds greater than 0", (n: number) => Number.isFinite(n) && n > 0),
    Config.map((n) => Duration.millis(Math.round(n * 1000)))
  )

/** A list of durations (`1m,5m,15m,30m,1h`; units ms, s, m, h), as the retry schedule is written. */
const durations = (name: string, fallback: string) =>
  list(name, fallback).pipe(
    Config.mapOrFail((values) => {
      const parsed = values.map((value) => {
        const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(value)
        if (!match) return undefined
        const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[match[2] as "ms" | "s" | "m" | "h"]
        return Duration.millis(Math.round(Number(match[1]) * unit))
      })
      const bad = values.find((_, i) => parsed[i] === undefined)
      return bad !== undefined || parsed.length === 0
        ? Either.left(ConfigError.InvalidData([name], `Expected durations such as 1m,5m,1h but received ${JSON.stringify(bad ?? "")}`))
        : Either.right(parsed as Array<Duration.Duration>)
    })
  )

/** `SMTP_RELAY_URL`: smtp://user:pass@host:port or smtps://…; the password may be percent-encoded. */
const relayUrl = Config.redacted("SMTP_RELAY_URL").pipe(
  Config.mapOrFail((secret) => {
    const bad = ConfigError.InvalidData(["SMTP_RELAY_URL"], "Expected smtp://[user:password@]host[:port] or smtps://…")
    try {
      const url = new URL(Redacted.value(secret))
      if ((url.protocol !== "smtp:" && url.protocol !== "smtps:") || url.hostname === "") return Either.left(bad)
      const secure = url.protocol === "smtps:"
      return Either.right({
        host: url.hostname.replace(/^\[|\]$/g, ""),
        port: url.port === "" ? (secure ? 465 : 587) : Number(url.port),
        secure,
        user: url.username === "" ? undefined : decodeURIComponent(url.username),
        pass: url.password === "" ? undefined : decodeURIComponent(url.password)
      })
    } catch {
      return Either.left(bad)
    }
  })
)

export const appConfig = Config.all({
  port: Config.port("PORT").pipe(Config.withDefault(3000)),
  host: Config.string("HOST").pipe(Config.withDefault("127.0.0.1")),
  appUrl: Config.option(url("APP_URL")),
  smtpPort: Config.port("SMTP_PORT").pipe(Config.withDefault(2525)),
  smtpHost: Config.string("SMTP_HOST").pipe(Config.withDefault("127.0.0.1")),
  smtpTlsCert: Config.option(Config.string("SMTP_TLS_CERT")),
  smtpTlsKey: Config.option(Config.string("SMTP_TLS_KEY")),
  smtpMaxConnectionsPerIp: nonNegativeInt("SMTP_MAX_CONNECTIONS_PER_IP", 20),
  /**
   * The TCP load balancers in front of the mail listeners (SMTP, submission, IMAP) that open each
   * connection with a PROXY protocol (v1) header naming the client, which SPF and the limits per
   * address then see (src/proxy-protocol.ts).
   */
  proxyProtocol: proxyPeers("PROXY_PROTOCOL"),
  /** Where the smtp role takes mail to send (SMTP submission with an API key: src/smtp/submission.ts); unset, it takes none. */
  submissionPort: Config.option(Config.port("SUBMISSION_PORT")),
  /** The same on implicit TLS (RFC 8314's submissions, 465 by convention): needs SMTP_TLS_CERT and SMTP_TLS_KEY. */
  submissionsPort: Config.option(Config.port("SUBMISSIONS_PORT")),
  /** The submission listeners' host; unset, SMTP_HOST. */
  submissionHost: Config.option(Config.string("SUBMISSION_HOST")),
  /** Where the api role lets mail programs read mailboxes (IMAP with an API key: src/imap/server.ts); unset, it does not. */
  imapPort: Config.option(Config.port("IMAP_PORT")),
  /** The same on implicit TLS (993 by convention): needs SMTP_TLS_CERT and SMTP_TLS_KEY. */
  imapsPort: Config.option(Config.port("IMAPS_PORT")),
  /** The IMAP listeners' host; unset, SMTP_HOST. */
  imapHost: Config.option(Config.string("IMAP_HOST")),
  imapMaxConnectionsPerIp: nonNegativeInt("IMAP_MAX_CONNECTIONS_PER_IP", 20),
  /**
   * The load balancers and reverse proxies in front of the HTTP server, whose X-Forwarded-For names
   * the client (src/trusted-proxies.ts); empty, every request's client is the connection's peer.
   */
  trustedProxies: networkList("TRUSTED_PROXIES"),
  roles,
  dataDir: Config.string("DATA_DIR").pipe(Config.withDefault("./data")),
  databaseUrl: Config.option(Config.redacted("DATABASE_URL").pipe(
    // What pg takes: a postgres:// or postgresql:// URL (also libpq's socket form, postgresql://user@/db?host=/run/postgresql,
    // which is no WHATWG URL), a socket: URL or a socket path. Quoted back as "<redacted>": it may hold a password.
    check("DATABASE_URL", "Expected postgres://[user[:password]@]host[:port]/database", (secret) =>
      /^(postgres(ql)?:\/\/|socket:|\/)/i.test(Redacted.value(secret).trim()))
  )),
  /** Statements run prepared on each connection (layers/postgres.ts); off behind a transaction-mode pooler. */
  databasePreparedStatements: Config.boolean("DATABASE_PREPARED_STATEMENTS").pipe(Config.withDefault(true)),
  /**
   * `shared_buffers` of the embedded PGlite databases (the app's, the vector index's); unset, the app's
   * has PostgreSQL's 128MB and the vector index's are sized to its data (layers/pglite.ts `buffersForData`).
   */
  pgliteSharedBuffers: Config.option(Config.string("PGLITE_SHARED_BUFFERS").pipe(
    check("PGLITE_SHARED_BUFFERS", "Expected a size from 128kB to 1GB, such as 32MB,", (size: string) => {
      // PostgreSQL's least; PGlite's WebAssembly memory holds little more than a gigabyte of buffers.
      const kB = sizeInKb(size)
      return kB !== undefined && kB >= 128 && kB <= 1024 * 1024
    })
  )),
  natsUrl: Config.option(Config.string("NATS_URL")),
  natsPrefix: Config.string("NATS_PREFIX").pipe(
    Config.withDefault(""),
    check("NATS_PREFIX", "Expected letters, digits, '-' or '_' only", (value: string) => /^[A-Za-z0-9_-]*$/.test(value))
  ),
  /** Copies JetStream keeps of each stream (and its consumers): 3 on a 3-server cluster survives losing one. */
  natsReplicas: Config.integer("NATS_REPLICAS").pipe(
    Config.withDefault(1),
    check("NATS_REPLICAS", "Expected 1 to 5 (JetStream's limit on copies of a stream)", (n: number) => n >= 1 && n <= 5)
  ),
  qdrantUrl: Config.option(url("QDRANT_URL")),
  qdrantApiKey: Config.option(Config.redacted("QDRANT_API_KEY")),
  /** Put before the names of this deployment's Qdrant collections, as NATS_PREFIX is before its streams, so that several share one Qdrant. */
  qdrantPrefix: Config.string("QDRANT_PREFIX").pipe(
    Config.withDefault(""),
    check("QDRANT_PREFIX", "Expected at most 40 letters, digits, '-' or '_'", (value: string) => /^[A-Za-z0-9_-]{0,40}$/.test(value))
  ),
  openaiApiKey: Config.option(Config.redacted("OPENAI_API_KEY")),
  openaiBaseUrl: Config.option(url("OPENAI_BASE_URL")),
  embeddingModel: Config.string("EMBEDDING_MODEL").pipe(Config.withDefault("text-embedding-3-small")),
  embedderThreads: Config.option(Config.integer("EMBEDDER_THREADS").pipe(
    check("EMBEDDER_THREADS", "Expected 1 or more", (threads: number) => threads >= 1)
  )),
  embedderNice: Config.option(Config.integer("EMBEDDER_NICE").pipe(
    check("EMBEDDER_NICE", "Expected 0 to 19", (nice: number) => nice >= 0 && nice <= 19)
  )),
  /** Postings the word ranking holds in memory per API process (services/search/ranker.ts); 0 reads the database each time. */
  searchMemoryPostings: nonNegativeInt("SEARCH_MEMORY_POSTINGS", 8_000_000),
  /** scrypt's cost for passwords hashed from now on, as a power of two (services/accounts/passwords.ts). */
  passwordHashCost: Config.integer("PASSWORD_HASH_COST").pipe(
    Config.withDefault(DEFAULT_PASSWORD_COST),
    check(
      "PASSWORD_HASH_COST",
      `Expected an integer from ${PASSWORD_COSTS.min} to ${PASSWORD_COSTS.max}`,
      (n: number) => n >= PASSWORD_COSTS.min && n <= PASSWORD_COSTS.max
    )
  ),
  stripeSecretKey: Config.option(Config.redacted("STRIPE_SECRET_KEY")),
  stripeWebhookSecret: Config.option(Config.redacted("STRIPE_WEBHOOK_SECRET")),
  stripePricePro: Config.option(Config.string("STRIPE_PRICE_PRO")),
  stripePriceEnterprise: Config.option(Config.string("STRIPE_PRICE_ENTERPRISE")),
  stripeApiUrl: Config.option(url("STRIPE_API_URL")),
  sharedDomains: list("SHARED_DOMAINS", "agents.localhost").pipe(
    check("SHARED_DOMAINS", "Expected at least one domain", (domains: Array<string>) => domains.length > 0),
    Config.mapOrFail((domains) => Either.all(domains.map(mailHost("SHARED_DOMAINS"))))
  ),
  disallowedEmailNames: list(
    "DISALLOWED_EMAIL_NAME",
    "admin,postmaster,abuse,root,support,noreply,no-reply,webmaster,hostmaster,security"
  ).pipe(Config.map((names) => names.map((name) => name.toLowerCase()))),
  mxHost: Config.option(Config.string("MX_HOST").pipe(Config.mapOrFail(mailHost("MX_HOST")))),
  /** The mailbox (its address) that receives mail to postmaster@ and abuse@ the shared domains. */
  postmasterMailbox: Config.option(Config.string("POSTMASTER_MAILBOX").pipe(Config.mapOrFail(mailAddress("POSTMASTER_MAILBOX")))),
  verifyPrefix: Config.string("VERIFY_PREFIX").pipe(Config.withDefault("mailroom-verification")),
  spfRecord: Config.string("SPF_RECORD").pipe(Config.withDefault(DEFAULT_SPF_RECORD), Config.mapOrFail(spfRecord("SPF_RECORD"))),
  freeMaxCustomDomains: nonNegativeInt("FREE_MAX_CUSTOM_DOMAINS", 0),
  dnsServers: hostPortList("DNS_SERVERS"),
  webhookAllowPrivate: Config.boolean("WEBHOOK_ALLOW_PRIVATE").pipe(Config.withDefault(false)),
  jwtSecret: Config.option(Config.redacted("JWT_SECRET")),
  logLevel: logLevel("LOG_LEVEL"),
  logFormat,
  /** Where a process without the api role serves `/metrics`; unset, it serves none. */
  metricsPort: Config.option(Config.port("METRICS_PORT")),
  smtpRelay: Config.option(relayUrl),
  outboundSmtpPort: Config.port("OUTBOUND_SMTP_PORT").pipe(Config.withDefault(25)),
  /** Deliver to MX hosts on loopback and private addresses (local development): off, they are refused. */
  outboundAllowPrivate: Config.boolean("OUTBOUND_ALLOW_PRIVATE").pipe(Config.withDefault(false)),
  outboundMaxAge: seconds("OUTBOUND_MAX_AGE", 48 * 3600),
  outboundRetryDelays: durations("OUTBOUND_RETRY_DELAYS", "1m,5m,15m,30m,1h"),
  smtpHeloName: Config.option(Config.string("SMTP_HELO_NAME").pipe(Config.mapOrFail(mailHost("SMTP_HELO_NAME")))),
  dkimSelector: Config.string("DKIM_SELECTOR").pipe(
    Config.withDefault("mailroom"),
    check("DKIM_SELECTOR", "Expected a DNS label (letters, digits, -)", (value: string) => /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/i.test(value))
  ),
  // Read at once (a start that cannot sign is told so before the database is opened), kept as PKCS #8 PEM.
  dkimPrivateKey: Config.option(Config.redacted("DKIM_PRIVATE_KEY").pipe(Config.mapOrFail((secret) => Either.map(readPrivateKey(Redacted.value(secret)), Redacted.make)))),
  /** Refuse (550 5.7.1) inbound mail that fails DMARC under its From domain's p=reject. */
  dmarcEnforce: Config.boolean("DMARC_ENFORCE").pipe(Config.withDefault(false)),
  /** Check inbound SPF, DKIM, DMARC and ARC (false: a gateway in front checks already). */
  verifyInbound: Config.boolean("VERIFY_INBOUND").pipe(Config.withDefault(true)),
  /** rspamd's HTTP address (its normal worker, port 11333); unset, nothing is scored. */
  rspamdUrl: Config.option(url("RSPAMD_URL")),
  /** Refuse (550 5.7.1) inbound mail rspamd says to reject. */
  spamReject: Config.boolean("SPAM_REJECT").pipe(Config.withDefault(false)),
  /** A pipeline stage whose oldest unfinished message is older than this is logged as behind. */
  stageLagWarning: seconds("STAGE_LAG_WARNING", 60),
  /** How long SIGTERM waits for work in flight before the process exits anyway. */
  shutdownTimeout: seconds("SHUTDOWN_TIMEOUT", 30),
  /** An OTLP/HTTP collector: spans go to `<endpoint>/v1/traces`. Unset, no spans are made at all. */
  otlpEndpoint: Config.option(url("OTEL_EXPORTER_OTLP_ENDPOINT")),
  otelServiceName: Config.string("OTEL_SERVICE_NAME").pipe(Config.withDefault("mailroom")),
  /** Milliseconds between two exports of finished spans (OpenTelemetry's batch span processor delay). */
  otelExportDelay: Config.integer("OTEL_BSP_SCHEDULE_DELAY").pipe(
    Config.withDefault(5000),
    check("OTEL_BSP_SCHEDULE_DELAY", "Expected 1 or more (milliseconds)", (ms: number) => ms >= 1)
  )
})

type Raw = Config.Config.Success<typeof appConfig>

export interface AppConfigShape extends Omit<Raw, "appUrl" | "mxHost"> {
  /** `{app_url}`: public address used in links. */
  readonly appUrl: string
  /** `{base_url}`: `{app_url}/v1`. */
  readonly baseUrl: string
  readonly mxHost: string
  /** True when every role runs in this process. */
  readonly allRoles: boolean
}

/**
 * A clustered process (only some roles) must share its state through real services:
 * refuse to start on embedded stores, naming the missing setting.
 */
const checkCluster = (config: AppConfigShape): Effect.Effect<void, ConfigError.ConfigError> => {
  if (config.allRoles) return Effect.void
  const missing = [
    Option.isNone(config.databaseUrl) ? "DATABASE_URL" : undefined,
    Option.isNone(config.natsUrl) ? "NATS_URL" : undefined
  ].filter((name): name is string => name !== undefined)
  if (missing.length === 0) return Effect.void
  return Effect.fail(
    ConfigError.MissingData(
      [missing[0]!],
      `ROLES=${config.roles.join(",")} runs only part of Mailroom, so it must share state with the other nodes: set ${missing.join(" and ")} (the embedded stores serve a single all-role process only)`
    )
  )
}

const checkSecrets = (config: AppConfigShape): Effect.Effect<void, ConfigError.ConfigError> =>
  Option.isSome(config.databaseUrl) && Option.isNone(config.jwtSecret)
    ? Effect.fail(
      ConfigError.MissingData(
        ["JWT_SECRET"],
        "JWT_SECRET is required when DATABASE_URL is set, so every node signs and checks access tokens alike"
      )
    )
    : Option.isSome(config.jwtSecret) && Redacted.value(config.jwtSecret.value).length < 32
    ? Effect.fail(ConfigError.InvalidData(["JWT_SECRET"], "Expected at least 32 characters"))
    : Effect.void

/**
 * Local billing activates plans without taking payment, so a deployment that configured Stripe must
 * have everything Stripe needs, or not start at all.
 */
const checkPayments = (config: AppConfigShape): Effect.Effect<void, ConfigError.ConfigError> => {
  if (Option.isNone(config.stripeSecretKey)) return Effect.void
  const missing = [
    Option.isNone(config.stripeWebhookSecret) ? "STRIPE_WEBHOOK_SECRET" : undefined,
    Option.isNone(config.stripePricePro) ? "STRIPE_PRICE_PRO" : undefined,
    Option.isNone(config.stripePriceEnterprise) ? "STRIPE_PRICE_ENTERPRISE" : undefined
  ].filter((name): name is string => name !== undefined)
  return missing.length === 0 ? Effect.void : Effect.fail(
    ConfigError.MissingData(
      [missing[0]!],
      `STRIPE_SECRET_KEY is set, so Stripe takes the payments: set ${missing.join(", ")} too`
    )
  )
}

/** DKIM_PRIVATE_KEY: the PEM itself (newlines may be written `\n`), or a file holding it. */
const readPrivateKey = (value: string): Either.Either<string, ConfigError.ConfigError> =>
  Either.try({
    try: () => {
      const pem = value.includes("-----BEGIN") ? value.replace(/\\n/g, "\n") : readFileSync(value, "utf8")
      return createPrivateKey(pem).export({ type: "pkcs8", format: "pem" }).toString()
    },
    catch: (cause) =>
      ConfigError.InvalidData(["DKIM_PRIVATE_KEY"], `Expected a PEM private key or the path of a file holding one (${cause instanceof Error ? cause.message : String(cause)})`)
  })

/** STARTTLS needs both halves of the key pair, readable; anything less is a mistake worth stopping for. */
const checkSmtpTls = (config: AppConfigShape): Effect.Effect<void, ConfigError.ConfigError> => {
  if (Option.isSome(config.smtpTlsCert) !== Option.isSome(config.smtpTlsKey)) {
    return Effect.fail(
      ConfigError.MissingData(
        [Option.isSome(config.smtpTlsCert) ? "SMTP_TLS_KEY" : "SMTP_TLS_CERT"],
        "SMTP_TLS_CERT and SMTP_TLS_KEY (PEM file paths) enable STARTTLS together; set both or neither"
      )
    )
  }
  if (Option.isSome(config.submissionsPort) && Option.isNone(config.smtpTlsCert)) {
    return Effect.fail(
      ConfigError.MissingData(["SMTP_TLS_CERT"], "SUBMISSIONS_PORT (submission on implicit TLS) needs SMTP_TLS_CERT and SMTP_TLS_KEY")
    )
  }
  if (Option.isSome(config.imapsPort) && Option.isNone(config.smtpTlsCert)) {
    return Effect.fail(ConfigError.MissingData(["SMTP_TLS_CERT"], "IMAPS_PORT (IMAP on implicit TLS) needs SMTP_TLS_CERT and SMTP_TLS_KEY"))
  }
  const unreadable = (["SMTP_TLS_CERT", "SMTP_TLS_KEY"] as const).flatMap((name) => {
    const file = name === "SMTP_TLS_CERT" ? config.smtpTlsCert : config.smtpTlsKey
    if (Option.isNone(file)) return []
    try {
      accessSync(file.value, constants.R_OK)
      return []
    } catch (error) {
      return [ConfigError.InvalidData([name], `Cannot read ${file.value}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`)]
    }
  })
  if (unreadable.length > 0) return Effect.fail(unreadable.reduce((a, b) => ConfigError.And(a, b)))
  // Both readable: they must be a PEM certificate and its key, or the SMTP listener would fail later with a stack trace.
  if (Option.isSome(config.smtpTlsCert) && Option.isSome(config.smtpTlsKey)) {
    try {
      createSecureContext({ cert: readFileSync(config.smtpTlsCert.value), key: readFileSync(config.smtpTlsKey.value) })
    } catch (error) {
      return Effect.fail(ConfigError.InvalidData(
        ["SMTP_TLS_CERT"],
        `${config.smtpTlsCert.value} and SMTP_TLS_KEY's ${config.smtpTlsKey.value} are not a PEM certificate and its private key: ${
          (error as Error).message
        }`
      ))
    }
  }
  return Effect.void
}

/**
 * Where the settings are read from: the environment, a variable set to nothing (or to spaces) being
 * the same as one not set. An environment file or a compose file often lists a variable with no value
 * (`OPENAI_API_KEY=`); read as given it was an empty key, and an empty `NATS_REPLICAS` was 0.
 */
export const settingsFrom = (environment: Readonly<Record<string, string | undefined>>): ConfigProvider.ConfigProvider =>
  ConfigProvider.fromMap(
    new Map(Object.entries(environment).flatMap(([name, value]) => value === undefined || value.trim() === "" ? [] : [[name, value]]))
  )

/**
 * The settings of a process running `command`: `serve` (the roles) checks them all; a one-off command
 * (`migrate`, `dns-records`, `users …`) signs and checks no access tokens, so needs no JWT_SECRET.
 */
export const loadConfigFor = (command: string): Effect.Effect<AppConfigShape, ConfigError.ConfigError> => Effect.gen(function*() {
  const raw = yield* appConfig
  const appUrl = Option.getOrElse(raw.appUrl, () => `http://localhost:${raw.port}`)
  const config: AppConfigShape = {
    ...raw,
    appUrl,
    baseUrl: `${appUrl}/v1`,
    mxHost: Option.getOrElse(raw.mxHost, () => `mx.${raw.sharedDomains[0]}`).toLowerCase().replace(/\.$/, ""),
    allRoles: allRoles.every((role) => raw.roles.includes(role))
  }
  yield* checkCluster(config)
  if (command === "serve") yield* checkSecrets(config)
  yield* checkPayments(config)
  yield* checkSmtpTls(config)
  yield* checkPostmasterMailbox(config)
  yield* checkOwnPorts(config)
  return config
})

/** The settings of a node serving its roles. */
export const loadConfig = loadConfigFor("serve")

/** Whether two listeners' hosts take the same connections: the same address, or either every address. */
const overlapping = (a: string, b: string) => a === b || [a, b].some((host) => host === "0.0.0.0" || host === "::" || host === "")

/**
 * Two listeners of this process on one port: refused with the settings, naming both variables, rather
 * than found when the second cannot listen and told as another process's doing.
 */
const checkOwnPorts = (config: AppConfigShape): Effect.Effect<void, ConfigError.ConfigError> => {
  const api = config.roles.includes("api")
  const smtp = config.roles.includes("smtp")
  const mailHost = (host: Option.Option<string>) => Option.getOrElse(host, () => config.smtpHost)
  const listeners: ReadonlyArray<readonly [string, string, Option.Option<number>]> = [
    ...(api ? [["PORT", config.host, Option.some(config.port)] as const] : []),
    ...(api ? [["IMAP_PORT", mailHost(config.imapHost), config.imapPort] as const, ["IMAPS_PORT", mailHost(config.imapHost), config.imapsPort] as const] : []),
    ...(smtp ? [["SMTP_PORT", config.smtpHost, Option.some(config.smtpPort)] as const] : []),
    ...(smtp
      ? [["SUBMISSION_PORT", mailHost(config.submissionHost), config.submissionPort] as const, ["SUBMISSIONS_PORT", mailHost(config.submissionHost), config.submissionsPort] as const]
      : []),
    ...(api ? [] : [["METRICS_PORT", config.host, config.metricsPort] as const])
  ]
  const open = listeners.flatMap(([name, host, port]) => Option.isSome(port) && port.value !== 0 ? [{ name, host, port: port.value }] : [])
  for (const [i, one] of open.entries()) {
    const other = open.slice(i + 1).find((o) => o.port === one.port && overlapping(o.host, one.host))
    if (other !== undefined) {
      return Effect.fail(ConfigError.InvalidData([other.name], `Expected a port of its own, but ${one.name} is ${one.port} too`))
    }
  }
  return Effect.void
}

/** The local parts nobody may register: DISALLOWED_EMAIL_NAME's and Mailroom's own sender's. */
export const reservedLocalParts = (config: Pick<AppConfigShape, "disallowedEmailNames">): ReadonlyArray<string> => [
  ...new Set([...config.disallowedEmailNames, SYSTEM_SENDER])
]

/**
 * POSTMASTER_MAILBOX must be an address a mailbox can have (SPEC's local-part rules, the reserved names
 * included): otherwise postmaster@ would be refused for ever while the setting looked taken.
 */
const checkPostmasterMailbox = (config: AppConfigShape): Effect.Effect<void, ConfigError.ConfigError> =>
  Option.match(config.postmasterMailbox, {
    onNone: () => Effect.void,
    onSome: (address) => {
      const at = address.lastIndexOf("@")
      return Either.match(parseAddress({ local_part: address.slice(0, at), domain: address.slice(at + 1) }, reservedLocalParts(config)), {
        onRight: () => Effect.void,
        onLeft: (failure) =>
          Effect.fail(ConfigError.InvalidData(["POSTMASTER_MAILBOX"], `${address} can never be a mailbox's address: ${failure.message}`))
      })
    }
  })

/**
 * The variable a failure is about. Effect's Config puts a variable's name on a failure in front of
 * the path the check itself gave, which also names it (as the check must where the name is not put
 * in front): `EMBEDDER_NICE.EMBEDDER_NICE`. Every Mailroom setting is one variable, so it is named once.
 */
const variable = (path: ReadonlyArray<string>) => [...new Set(path)].join(".")

/** What a process whose settings are refused prints before it exits 1: each refusal on a line, by variable. */
export const configFailure = (error: ConfigError.ConfigError): string =>
  `mailroom: invalid configuration\n${
    ConfigError.reduceWithContext(error, undefined, {
      andCase: (_, left, right) => `${left}\n${right}`,
      orCase: (_, left, right) => `${left}\n${right}`,
      invalidDataCase: (_, path, message) => `${variable(path)}: ${message}`,
      missingDataCase: (_, path, message) => `${variable(path)}: ${message}`,
      sourceUnavailableCase: (_, path, message) => `${variable(path)}: ${message}`,
      unsupportedCase: (_, path, message) => `${variable(path)}: ${message}`
    })
  }\n`

export class AppConfig extends Context.Tag("mailroom/AppConfig")<AppConfig, AppConfigShape>() {
  static readonly layer = Layer.effect(AppConfig, loadConfig)
  static readonly make = (config: AppConfigShape) => Layer.succeed(AppConfig, config)
}

/**
 * Which role checks inbound SPF, DKIM, DMARC and ARC: the SMTP node, before it answers DATA, when a
 * verdict may refuse the message (DMARC_ENFORCE=true); otherwise the worker's ingest, after the 250
 * (smtp/server.ts); none with VERIFY_INBOUND=false.
 */
export const inboundChecksRole = (config: Pick<AppConfigShape, "verifyInbound" | "dmarcEnforce">): "smtp" | "worker" | undefined =>
  !config.verifyInbound ? undefined : config.dmarcEnforce ? "smtp" : "worker"

/** A host name or address only this machine reaches. */
/** A mail listener as a mail program is told to reach it: `localhost` on loopback, else MX_HOST (its certificate's name). */
const mailEndpoint = (config: AppConfigShape, listening: string, startTlsPort: Option.Option<number>, tlsPort: Option.Option<number>) =>
  Option.map(Option.orElse(startTlsPort, () => tlsPort), (port) => ({
    host: isLoopbackHost(listening) ? "localhost" : config.mxHost,
    port,
    /** How the port is secured: STARTTLS (needed to sign in), TLS from the start, or none (sign-in on loopback only). */
    security: Option.isSome(startTlsPort)
      ? (Option.isSome(config.smtpTlsCert) ? "starttls" as const : "plain" as const)
      : "tls" as const
  }))

/**
 * The submission server (smtp/submission.ts) as mail programs reach it, for the dashboard to tell:
 * `localhost` when it listens on loopback only, else MX_HOST (the name its certificate carries); its
 * STARTTLS port when there is one, else its implicit-TLS one. None without either.
 */
export const submissionEndpoint = (config: AppConfigShape) =>
  mailEndpoint(config, Option.getOrElse(config.submissionHost, () => config.smtpHost), config.submissionPort, config.submissionsPort)

/** The IMAP server (src/imap) as mail programs reach it, likewise. None without IMAP_PORT or IMAPS_PORT. */
export const imapEndpoint = (config: AppConfigShape) =>
  mailEndpoint(config, Option.getOrElse(config.imapHost, () => config.smtpHost), config.imapPort, config.imapsPort)
