/**
 * `mailroom <command>`: the operator's commands (the package's `bin`, so `npx mailroom …`).
 *
 *   serve (the default)        run the roles in ROLES until SIGTERM
 *   migrate                    apply the database migrations, then exit
 *   reindex [--all]            embed mail not searchable with the current model (or all of it afresh)
 *   dns-records                the DNS records to publish for the shared domains
 *   users create <email> [--name <name>] [--password-stdin] [--plan free|pro|enterprise]
 *   users set-plan <email> <free|pro|enterprise>
 *   users set-password <email> [--password-stdin]
 *   users reset-two-factor <email>
 *   users delete <email> --yes
 *   keys revoke <key_id>
 *   usage <email>
 *
 * Every command reads the same settings as the server (DATABASE_URL or DATA_DIR, NATS_URL, …). On
 * the embedded database one process holds DATA_DIR at a time: stop the server first.
 * Exit codes: 0 done, 1 the command failed (the reason on stderr), 2 the command line is wrong.
 */
import { SqlClient } from "@effect/sql"
import { randomBytes } from "node:crypto"
import { Effect, Either, Layer, Schema } from "effect"
import { Accounts } from "../services/accounts/accounts.ts"
import { Administration } from "../services/accounts/administration.ts"
import { AccountClosure } from "../services/accounts/closure.ts"
import { Email, PersonName } from "../services/accounts/schemas.ts"
import { TwoFactor } from "../services/accounts/two-factor.ts"
import { Billing } from "../services/billing/billing.ts"
import { DMARC_RECORD } from "../services/domains/domains.ts"
import { ApiKeys } from "../services/keys/api-keys.ts"
import { Plan } from "../services/plans/plans.ts"
import { DkimKeys } from "../services/outbound/dkim.ts"
import { infrastructureLayer, mailboxSettingsLayer, outboundLayer, paymentsLayer, vectorIndexLayer } from "./infrastructure.ts"
import type { AppConfigShape } from "./config.ts"
import * as Database from "./database.ts"
import { CommandFailed, type UsageError, usageError } from "./usage.ts"

const print = (text: string) => Effect.sync(() => void process.stdout.write(text.endsWith("\n") ? text : `${text}\n`))

/** `--name value` style options, and the positional arguments left. */
const parseArgs = (
  args: ReadonlyArray<string>,
  options: ReadonlyArray<string>,
  flags: ReadonlyArray<string>
): Either.Either<{ values: Record<string, string>; set: Set<string>; positional: Array<string> }, UsageError> => {
  const values: Record<string, string> = {}
  const set = new Set<string>()
  const positional: Array<string> = []
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    if (options.includes(arg)) {
      const value = args[++i]
      if (value === undefined) return Either.left(usageError(`${arg} needs a value`))
      values[arg] = value
    } else if (flags.includes(arg)) set.add(arg)
    else if (arg.startsWith("--")) return Either.left(usageError(`unknown option ${arg}`))
    else positional.push(arg)
  }
  return Either.right({ values, set, positional })
}

const exactly = (positional: ReadonlyArray<string>, names: ReadonlyArray<string>, command: string): Either.Either<ReadonlyArray<string>, UsageError> =>
  positional.length === names.length
    ? Either.right(positional)
    : Either.left(usageError(names.length === 0 ? `${command} takes no arguments` : `${command} takes ${names.map((name) => `<${name}>`).join(" ")}`))

const decode = <A, I>(schema: Schema.Schema<A, I>, value: unknown, what: string): Either.Either<A, UsageError> =>
  Either.mapLeft(
    Schema.decodeUnknownEither(schema)(value),
    (error) => usageError(`${what} ${JSON.stringify(value)}: ${error.message.split("\n").at(-1)?.trim()}`)
  )

const planNamed = (name: string): Either.Either<Plan, UsageError> =>
  Schema.is(Plan)(name) ? Either.right(name) : Either.left(usageError(`unknown plan ${JSON.stringify(name)} (plans: ${Plan.literals.join(", ")})`))

const readStdin = () =>
  Effect.promise(async () => {
    const chunks: Array<Buffer> = []
    for await (const chunk of process.stdin) chunks.push(Buffer.from(chunk))
    return Buffer.concat(chunks).toString("utf8").replace(/\r?\n$/, "")
  })

const formatLimit = (used: number, limit: number) => `${used} of ${limit < 0 ? "unlimited" : limit}`

/** The services the account commands use, over the server's storage and bus. */
const accountsLayer = (config: AppConfigShape) =>
  Layer.mergeAll(Accounts.Default, ApiKeys.Default, Billing.Default, Administration.Default).pipe(
    Layer.provideMerge(infrastructureLayer(config))
  )

/** `accountsLayer` and two-factor sign-in (whose notices are Mailroom's own mail: its sender, DKIM keys). */
const twoFactorLayer = (config: AppConfigShape) =>
  TwoFactor.Default.pipe(
    Layer.provide(Layer.merge(outboundLayer(config), mailboxSettingsLayer(config))),
    Layer.provideMerge(accountsLayer(config))
  )

/** `accountsLayer` and deleting accounts: the payment provider and the vector index (no embedder). */
const closureLayer = (config: AppConfigShape) =>
  AccountClosure.Default.pipe(
    Layer.provide(Layer.merge(paymentsLayer(config).pipe(Layer.provide(Billing.Default)), vectorIndexLayer(config))),
    Layer.provideMerge(accountsLayer(config))
  )

/** An expected refusal from a service (not found, already registered) is the command's failure. */
const failWith = <A, E extends { readonly message: string }, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.mapError(effect, (error) => new CommandFailed(error.message))

/**
 * Each command checks its command line first (failing with UsageError), before anything is opened, and
 * answers its work: an Effect over the account services, which runCommand provides them to.
 */
const usersCreate = (args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const { values, set, positional } = yield* parseArgs(args, ["--name", "--plan"], ["--password-stdin"])
    const [rawEmail] = yield* exactly(positional, ["email"], "users create")
    const email = yield* decode(Email, rawEmail, "email")
    const name = yield* decode(PersonName, values["--name"] ?? email.split("@")[0]!, "name")
    const plan = yield* planNamed(values["--plan"] ?? "free")
    return Effect.gen(function*() {
      const generated = !set.has("--password-stdin")
      const password = generated ? randomBytes(18).toString("base64url") : yield* readStdin()
      if (password.length < 8) return yield* usageError("the password read from stdin must be at least 8 characters")
      const accounts = yield* Accounts
      const billing = yield* Billing
      const user = yield* failWith(accounts.register({ email, password, name }))
      if (plan !== "free") yield* billing.changePlan(user.userId, plan)
      yield* print(`Created ${user.userId} ${user.email} (plan ${plan})`)
      if (generated) yield* print(`Password: ${password}`)
    })
  })

const usersSetPlan = (args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const [email, rawPlan] = yield* exactly((yield* parseArgs(args, [], [])).positional, ["email", "plan"], "users set-plan")
    const plan = yield* planNamed(rawPlan!)
    return Effect.gen(function*() {
      const user = yield* failWith((yield* Administration).userByEmail(email!))
      const billing = yield* Billing
      const before = yield* failWith(billing.subscription(user.id))
      // Setting the plan again would restart its period and its usage: nothing is changed.
      if (before.plan === plan && before.status === "active") {
        return yield* Effect.fail(new CommandFailed(`${user.email} is on the ${plan} plan already (until ${before.currentPeriodEnd}); nothing changed`))
      }
      yield* billing.changePlan(user.id, plan)
      const after = yield* failWith(billing.subscription(user.id))
      yield* print(`${user.email}: ${before.plan} -> ${after.plan} until ${after.currentPeriodEnd}`)
    })
  })

/** A person locked out where no mail reaches them: the operator sets the password (every session ends). */
const usersSetPassword = (args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const { set, positional } = yield* parseArgs(args, [], ["--password-stdin"])
    const [email] = yield* exactly(positional, ["email"], "users set-password")
    return Effect.gen(function*() {
      const generated = !set.has("--password-stdin")
      const password = generated ? randomBytes(18).toString("base64url") : yield* readStdin()
      if (password.length < 8) return yield* usageError("the password read from stdin must be at least 8 characters")
      const user = yield* failWith((yield* Administration).userByEmail(email!))
      const done = yield* failWith((yield* Accounts).setPassword(user.id, password, "operator"))
      yield* print(`${done.email}: password set; ${done.sessionsEnded} ${done.sessionsEnded === 1 ? "session" : "sessions"} signed out`)
      if (generated) yield* print(`Password: ${password}`)
    })
  })

/** A person who lost both authenticator app and recovery codes: the operator turns two-factor sign-in off. */
const usersResetTwoFactor = (args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const [email] = yield* exactly((yield* parseArgs(args, [], [])).positional, ["email"], "users reset-two-factor")
    return Effect.gen(function*() {
      const user = yield* failWith((yield* Administration).userByEmail(email!))
      const done = yield* (yield* TwoFactor).reset(user.id)
      yield* print(
        done.wasOn
          ? `${user.email}: two-factor sign-in turned off; the password alone signs in until it is turned on again`
          : `${user.email}: two-factor sign-in was off; nothing changed`
      )
    })
  })

const usersDelete = (args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const { set, positional } = yield* parseArgs(args, [], ["--yes"])
    const [email] = yield* exactly(positional, ["email"], "users delete")
    if (!set.has("--yes")) {
      return yield* usageError("users delete deletes the account and everything it holds, for good: add --yes to confirm")
    }
    return Effect.gen(function*() {
      const user = yield* failWith((yield* Administration).userByEmail(email!))
      const deleted = yield* failWith((yield* AccountClosure).close(user.id))
      const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : word.endsWith("x") ? "es" : "s"}`
      yield* print(
        `Deleted ${user.id} ${deleted.email}: ${plural(deleted.mailboxes, "mailbox")}, ${plural(deleted.emails, "email")}` +
          (deleted.mailboxes > 0 ? " (their addresses are held from other accounts for 30 days)" : "")
      )
    })
  })

const keysRevoke = (args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const [keyId] = yield* exactly((yield* parseArgs(args, [], [])).positional, ["key_id"], "keys revoke")
    return Effect.gen(function*() {
      const key = yield* failWith((yield* Administration).keyOwner(keyId!))
      if (key.revokedAt !== null) return yield* Effect.fail(new CommandFailed(`${keyId} was revoked already (${key.revokedAt.toISOString()})`))
      yield* failWith((yield* ApiKeys).revoke(key.userId, keyId!))
      yield* print(`Revoked ${keyId}`)
    })
  })

const showUsage = (args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const [email] = yield* exactly((yield* parseArgs(args, [], [])).positional, ["email"], "usage")
    return Effect.gen(function*() {
      const admin = yield* Administration
      const billing = yield* Billing
      const user = yield* failWith(admin.userByEmail(email!))
      const subscription = yield* failWith(billing.subscription(user.id))
      const used = yield* failWith(billing.usage(user.id))
      const counts = yield* admin.counts(user.id)
      yield* print([
        `${user.email} (${user.id})`,
        `plan:      ${subscription.plan} (${subscription.status}), period ${subscription.currentPeriodStart} to ${subscription.currentPeriodEnd}`,
        `emails:    ${formatLimit(used.emailsUsed, used.emailsLimit)} received this period; ${counts.emails} stored`,
        `sent:      ${formatLimit(used.emailsSent, used.emailsSentLimit)} this period`,
        `today:     ${formatLimit(used.emailsToday, used.emailsDailyLimit)} emails received, ` +
        `${formatLimit(used.emailsSentToday, used.emailsSentDailyLimit)} sent (the UTC day, until ${used.dayEnd})`,
        `searches:  ${formatLimit(used.searchesUsed, used.searchesLimit)} this period`,
        `storage:   ${formatLimit(used.storageUsed, used.storageLimit)} bytes`,
        `mailboxes: ${counts.mailboxes} active`,
        `api keys:  ${counts.keys} active`
      ].join("\n"))
    })
  })

/** A TXT value as zone files write it: character-strings of at most 255 bytes. */
const txt = (value: string) => (value.match(/.{1,255}/g) ?? [""]).map((part) => `"${part}"`).join(" ")

/**
 * What to publish for the shared domains: MX, so that their mail reaches the SMTP nodes; SPF, the
 * DKIM key (generated on first use and kept in the database, or DKIM_PRIVATE_KEY) and a DMARC record
 * (policy none), so that mail they send is accepted.
 */
export const dnsRecords = (config: AppConfigShape) =>
  Effect.gen(function*() {
    const dkim = yield* DkimKeys
    const keys = yield* Effect.forEach(config.sharedDomains, (domain) => dkim.record(domain, undefined))
    const lines = [
      `; Mailroom: DNS records for the shared domains (${config.sharedDomains.join(", ")})`,
      `; MX_HOST (${config.mxHost}) must also resolve (A/AAAA) to the SMTP nodes or their load balancer, port 25.`,
      `; SPF (SPF_RECORD) names the hosts mail leaves from: the mta's MX hosts, or with SMTP_RELAY_URL the relay's.`,
      ...config.sharedDomains.flatMap((domain, i) => [
        `${domain}.\tIN\tMX\t10 ${config.mxHost}.`,
        `${domain}.\tIN\tTXT\t${txt(config.spfRecord)}`,
        `${keys[i]!.name}.\tIN\tTXT\t${txt(keys[i]!.value)}`,
        `_dmarc.${domain}.\tIN\tTXT\t${txt(DMARC_RECORD)}`
      ])
    ]
    return `${lines.join("\n")}\n`
  }).pipe(Effect.provide(outboundLayer(config).pipe(Layer.provide(Database.layer(config)))))

/** Apply the migrations the database lacks (nothing else is started), saying which, or that it lacked none. */
const migrate = (config: AppConfigShape) =>
  Effect.gen(function*() {
    const applied = yield* Database.migrate
    const sql = yield* SqlClient.SqlClient
    const [latest] = yield* sql<{ readonly name: string }>`
      SELECT migration_id || '_' || name AS name FROM mailroom_migrations ORDER BY migration_id DESC LIMIT 1`
    yield* print(
      applied.length > 0
        ? Database.appliedMigrations(applied)
        : `Nothing to apply: the database has every migration, the latest ${latest?.name ?? "none"}`
    )
  }).pipe(Effect.provide(Database.unmigratedLayer(config)))

/**
 * The commands other than serve and reindex (which main.ts runs itself). A command's line is checked
 * (UsageError) before its work is given the layers it runs over: a wrong command line opens nothing.
 */
export const runCommand = (config: AppConfigShape, command: string, args: ReadonlyArray<string>): Effect.Effect<void, unknown> =>
  Effect.gen(function*() {
    switch (command) {
      case "migrate":
        yield* exactly(args, [], "migrate")
        return yield* migrate(config)
      case "dns-records":
        yield* exactly(args, [], "dns-records")
        return yield* Effect.flatMap(dnsRecords(config), (records) => print(records.trimEnd()))
      case "users": {
        const [sub, ...rest] = args
        if (sub === "create") return yield* Effect.provide(yield* usersCreate(rest), accountsLayer(config))
        if (sub === "set-plan") return yield* Effect.provide(yield* usersSetPlan(rest), accountsLayer(config))
        if (sub === "set-password") return yield* Effect.provide(yield* usersSetPassword(rest), accountsLayer(config))
        if (sub === "reset-two-factor") return yield* Effect.provide(yield* usersResetTwoFactor(rest), twoFactorLayer(config))
        if (sub === "delete") return yield* Effect.provide(yield* usersDelete(rest), closureLayer(config))
        return yield* usageError(
          sub === undefined ? "users needs a subcommand: create, set-plan, set-password, reset-two-factor, delete" : `unknown users subcommand ${sub}`
        )
      }
      case "keys": {
        const [sub, ...rest] = args
        if (sub === "revoke") return yield* Effect.provide(yield* keysRevoke(rest), accountsLayer(config))
        return yield* usageError(sub === undefined ? "keys needs a subcommand: revoke" : `unknown keys subcommand ${sub}`)
      }
      case "usage":
        return yield* Effect.provide(yield* showUsage(args), accountsLayer(config))
      default:
        return yield* usageError(`unknown command ${command}`)
    }
  })
