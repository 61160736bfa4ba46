/**
 * The Authenticator port over mailauth (the nodemailer family's SPF, DKIM, DMARC and ARC verifier).
 *
 * mailauth asks its questions through a resolver function shaped like node's `dns.promises.resolve`;
 * ours answers them through the Dns port, so DNS_SERVERS is honoured and every question has the
 * port's time-out, and keeps its answers for a minute (services/dns/answers.ts): the same sender's
 * next message asks nothing again. The thread asks one message's questions together and gives up on
 * those unanswered 6 s after its check started, each a temperror of its own check (mailauth-worker.mjs),
 * so the answers a sender withholds do not cost the checks that could be made. The whole check has a
 * deadline too (VERIFY_TIMEOUT), well inside the SMTP node's DATA time-out: a message whose checks
 * cannot finish is accepted with `temperror` verdicts. (The SMTP node checks only with DMARC_ENFORCE=true; otherwise ingest does, after the 250.)
 *
 * The checks run in a thread of their own (mailauth-worker.mjs): they cost ~1.5 ms of CPU a message,
 * which on the event loop would be time the node (and, in one process, every other role) could not
 * answer anyone. Their DNS questions come back to this thread, so the Dns port and its kept answers
 * serve them as before; a kept answer goes back with its end, and the thread keeps it until then, so a
 * sender's next messages cost this thread one message each way and no question (each question and
 * answer crossing threads cost ~0.1 ms of this thread's CPU: bench:smtp's profile). A thread that dies
 * fails the checks in flight (kept as `temperror`, as any failed check) and is replaced for the next
 * message. One thread: on 2 cores two did worse (bench:smtp's
 * SMTP node alone, reused connections: 581–602 msgs/s against 710–719 with one, 518 on the event loop).
 *
 * Where mailauth and RFC 8601 disagree, RFC 8601 wins: a signature whose body hash does not match
 * is `fail` (mailauth says `neutral`), since the message was changed after it was signed.
 */
import { Cause, Duration, Effect, Exit, Layer, Option, Runtime } from "effect"
import { domainToASCII } from "node:url"
import { Worker } from "node:worker_threads"
import { Dns, type DnsError } from "../services/dns/dns.ts"
import { answerCache, keptAnswers } from "../services/dns/answers.ts"
import {
  type Authentication,
  authenticationResults,
  Authenticator,
  type DkimVerdict,
  type DmarcVerdict,
  type Envelope,
  type SpfVerdict
} from "../services/mail/authentication.ts"

/** How long checking one message may take, DNS included. */
const VERIFY_TIMEOUT = Duration.seconds(10)

type Answer = ReadonlyArray<unknown>

/**
 * The answer to one of the thread's DNS questions: the records, or a failure as node's resolver reports
 * it (mailauth reads `code`: ENOTFOUND means no such records); with `until` (ms since the epoch) when
 * it is a kept answer, which the thread then keeps as long instead of asking again.
 */
type Reply = ({ readonly answer: Answer } | { readonly error: { readonly message: string; readonly code: string } }) & {
  readonly until?: number | undefined
}

const replyOf = (exit: Exit.Exit<Answer, DnsError>): Reply => {
  if (Exit.isSuccess(exit)) return { answer: exit.value }
  const error = Cause.failureOption(exit.cause)
  return Option.isSome(error)
    ? { error: { message: error.value.message, code: error.value.reason === "NotFound" ? "ENOTFOUND" : "ETIMEOUT" } }
    : { error: { message: "the DNS question failed", code: "ETIMEOUT" } }
}

const pick = <const A extends string>(value: unknown, allowed: ReadonlyArray<A>, otherwise: A): A =>
  typeof value === "string" && (allowed as ReadonlyArray<string>).includes(value) ? (value as A) : otherwise

const lower = (text: string) => text.toLowerCase().replace(/\.$/, "")

/** The domain of an address (or a bare domain), lower-cased. */
const domainOf = (address: string) => lower(address.slice(address.lastIndexOf("@") + 1).trim())

/**
 * The domain of a From address, when it is one DMARC can be asked about: a local part, then a name of
 * DNS labels (an internationalized one as its A-labels would be). Not `<` (of `<<<>>>`), nor an address
 * literal (`ada@[127.0.0.1]`), nor an empty domain: such a From names no author DMARC could check.
 */
const authorDomain = (address: string): string | null => {
  const at = address.lastIndexOf("@")
  if (at <= 0) return null
  const domain = domainOf(address)
  const ascii = domainToASCII(domain)
  const label = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/
  return ascii.length > 0 && ascii.length <= 253 && ascii.split(".").every((part) => label.test(part)) ? domain : null
}

/**
 * Relaxed alignment without a DMARC record to say how: the same domain, or one a subdomain of the
 * other. Stricter than the organizational-domain rule (siblings do not align), never looser.
 */
const related = (a: string, b: string) => a === b || a.endsWith(`.${b}`) || b.endsWith(`.${a}`)

/** A DMARC record's tags (lower-cased), as the thread read them; `isOrgRecord` when it is the organizational domain's. */
interface DmarcRecord {
  readonly p: string | undefined
  readonly sp: string | undefined
  readonly adkim: string | undefined
  readonly aspf: string | undefined
  readonly rua: string | undefined
  readonly isOrgRecord: boolean
}

/** What the thread sends back of mailauth's result: exactly what the verdicts are read from. */
interface Essentials {
  readonly spf: false | { readonly domain: string; readonly status: { readonly result: unknown } }
  readonly dkim: {
    readonly headerFrom: ReadonlyArray<string>
    readonly results: ReadonlyArray<{
      readonly signingDomain: unknown
      readonly selector: string | undefined
      readonly status: { readonly result: unknown; readonly comment: unknown; readonly aligned: unknown }
    }>
  }
  /** The From domain's DMARC record (false: none; "temperror": unanswered); false itself without a single From. */
  readonly dmarc: false | { readonly record: false | "temperror" | DmarcRecord }
  /** The organizational domain of each domain compared with the From's (RFC 7489 §3.2). */
  readonly organizational: Readonly<Record<string, string>>
  readonly arc: false | { readonly status: { readonly result: unknown }; readonly domain?: unknown }
}

const POLICIES = ["none", "quarantine", "reject"] as const
const isPolicy = (value: string | undefined): value is typeof POLICIES[number] => (POLICIES as ReadonlyArray<string | undefined>).includes(value)

/**
 * The verdicts of mailauth's result for the message of `envelope`. DMARC is evaluated here (RFC 7489
 * §3.1, §6.6), not by mailauth 4, which aligns relaxed whatever adkim= and aspf= say, and fails
 * a message whose SPF or DKIM could not be checked.
 */
const verdictOf = (result: Essentials, envelope: Envelope): Authentication => {
  const fromHeader = result.dkim.headerFrom
  // DMARC needs one author (RFC 7489 §6.6.1): a From of none or several (two From fields, or one
  // listing two addresses), or one whose domain is no domain, aligns with nothing, whatever its
  // signatures say.
  const fromDomain = fromHeader.length === 1 ? authorDomain(fromHeader[0]!) : null
  const found = result.dmarc === false ? false : result.dmarc.record
  // A record without a valid p= is no record unless it asks for reports (RFC 7489 §6.6.3): then p=none.
  const record = typeof found === "object" && (isPolicy(found.p) || found.rua !== undefined) ? found : undefined
  const organizational = (domain: string) => result.organizational[domain] ?? domain
  /** Whether `domain` aligns with the From's: as the record says (s: the same domain), else relaxed. */
  const aligns = (domain: string, mode: string | undefined) =>
    fromDomain !== null && (mode === "s" ? domain === fromDomain : organizational(domain) === organizational(fromDomain))
  const spfDomain = result.spf === false ? domainOf(envelope.mailFrom || envelope.helo || "") : lower(result.spf.domain)
  const spfResult = result.spf === false ? "none" : pick(result.spf.status.result, ["pass", "fail", "softfail", "neutral", "none", "temperror", "permerror"], "permerror")
  const spf: SpfVerdict = {
    result: spfResult,
    domain: spfDomain,
    // Without a DMARC record to say how, related domains align (siblings do not).
    aligned: record === undefined ? fromDomain !== null && related(spfDomain, fromDomain) : aligns(spfDomain, record.aspf)
  }
  const dkim = result.dkim.results
    .filter((signature): signature is typeof signature & { readonly signingDomain: string } =>
      typeof signature.signingDomain === "string" && signature.signingDomain.length > 0
    )
    .map((signature): DkimVerdict => ({
      result: signature.status.comment === "body hash did not verify"
        ? "fail"
        : pick(signature.status.result, ["pass", "fail", "neutral", "policy", "temperror", "permerror"], "permerror"),
      domain: lower(signature.signingDomain),
      selector: signature.selector ?? "",
      aligned: record === undefined
        ? fromDomain !== null && Boolean(signature.status.aligned)
        : aligns(lower(signature.signingDomain), record.adkim)
    }))
  const alignedWith = (outcome: string) => (spf.result === outcome && spf.aligned) || dkim.some((d) => d.result === outcome && d.aligned)
  // A check that could not be made, and could have passed aligned, leaves DMARC unknown, not failed
  // (RFC 7489 §6.6.2, RFC 7208 §2.6.6): the sender retries or the mail is kept.
  const dmarcResult = fromDomain === null
    ? "permerror"
    : found === "temperror"
    ? "temperror"
    : record === undefined
    ? "none"
    : alignedWith("pass")
    ? "pass"
    : alignedWith("temperror")
    ? "temperror"
    : "fail"
  // sp= for mail of a subdomain under its organizational domain's record; a p= that names no policy, with rua=, is none.
  const policy = record === undefined
    ? null
    : record.isOrgRecord && isPolicy(record.sp)
    ? record.sp
    : isPolicy(record.p)
    ? record.p
    : "none"
  const dmarc: DmarcVerdict = { result: dmarcResult, domain: fromDomain, policy: fromDomain === null ? null : policy }
  const arcResult = result.arc === false ? "none" : pick(result.arc.status.result, ["pass", "fail", "none", "temperror"], "fail")
  const arcDomain = result.arc === false || arcResult === "none" || typeof result.arc.domain !== "string" || result.arc.domain === ""
    ? null
    : lower(result.arc.domain)
  return { spf, dkim, dmarc, arc: { result: arcResult, domain: arcDomain } }
}

/** Every check `temperror`: what a message gets when its checks could not be made. */
const unverified = (envelope: Envelope): Authentication => ({
  spf: { result: "temperror", domain: domainOf(envelope.mailFrom || envelope.helo || ""), aligned: false },
  dkim: [],
  dmarc: { result: "temperror", domain: null, policy: null },
  arc: { result: "temperror", domain: null }
})

const workerUrl = new URL("./mailauth-worker.mjs", import.meta.url)

type FromWorker =
  | { readonly type: "question"; readonly id: number; readonly name: string; readonly questionType: string }
  | { readonly type: "checked"; readonly id: number; readonly result?: Essentials; readonly error?: string }

/** What mailauth is told besides the message and the resolver. */
export interface CheckOptions {
  readonly ip: string
  readonly helo?: string
  readonly sender: string
  readonly mta: string
  readonly disableBimi: boolean
}

/**
 * The checking thread (see the module's comment), started on the first message and again after it
 * died; `answer` answers its DNS questions. It keeps the process alive only while checks are in
 * flight, and ends with the scope. `script` is the thread's code (another only in its test).
 */
export const checkingThread = (answer: (name: string, type: string) => Reply | Promise<Reply>, script: URL = workerUrl) =>
  Effect.gen(function*() {
    let worker: Worker | undefined
    let nextId = 0
    const inFlight = new Map<number, (outcome: Effect.Effect<Essentials, Error>) => void>()

    const forget = (id: number) => {
      const resume = inFlight.get(id)
      inFlight.delete(id)
      if (inFlight.size === 0) worker?.unref()
      return resume
    }
    const settled = (id: number, outcome: Effect.Effect<Essentials, Error>) => forget(id)?.(outcome)

    const start = () => {
      const thread = new Worker(script)
      thread.unref()
      thread.on("message", (message: FromWorker) => {
        if (message.type === "checked") {
          settled(message.id, message.result === undefined ? Effect.fail(new Error(message.error ?? "the check failed")) : Effect.succeed(message.result))
          return
        }
        const reply = answer(message.name, message.questionType)
        const send = (done: Reply) => thread.postMessage({ type: "answer", id: message.id, ...done })
        // A question cut short (the server stopping) is answered as one that timed out.
        if (reply instanceof Promise) reply.then(send, () => send({ error: { message: "the DNS question was interrupted", code: "ETIMEOUT" } }))
        else send(reply)
      })
      const died = (reason: string) => {
        if (worker !== thread) return
        worker = undefined
        for (const id of [...inFlight.keys()]) settled(id, Effect.fail(new Error(`the checking thread ${reason}`)))
      }
      thread.on("error", (error) => died(`failed: ${error.message}`))
      thread.on("exit", (code) => died(`exited (${code})`))
      return thread
    }

    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        const thread = worker
        worker = undefined
        if (thread) await thread.terminate()
      })
    )

    const check = (raw: Uint8Array, options: CheckOptions) =>
      Effect.async<Essentials, Error>((resume) => {
        worker ??= start()
        const id = nextId++
        inFlight.set(id, resume)
        worker.ref()
        worker.postMessage({ type: "check", id, raw, options })
        // Given up on (the deadline): its answer, when it comes, is dropped.
        return Effect.sync(() => forget(id))
      })

    return { check } as const
  })

/** VERIFY_INBOUND=false: nothing is checked (a gateway in front of Mailroom checks already). */
export const none: Layer.Layer<Authenticator> = Layer.succeed(Authenticator, { verify: () => Effect.succeed(undefined) })

export const layer = (options: { readonly authservId: string }): Layer.Layer<Authenticator, never, Dns> =>
  Layer.scoped(Authenticator, Effect.gen(function*() {
    const dns = yield* Dns
    const runtime = yield* Effect.runtime<never>()
    const runPromise = Runtime.runPromise(runtime)

    const ask = (name: string, type: string): Effect.Effect<Answer, DnsError> => {
      switch (type) {
        case "TXT":
          // node gives each record as its character-strings; the port joins them already.
          return Effect.map(dns.txt(name), (records) => records.map((record) => [record]))
        case "MX":
          return Effect.map(dns.mx(name), (records) => records.map((r) => ({ exchange: r.exchange, priority: r.priority })))
        case "A":
        case "AAAA": {
          const family = type === "A" ? 4 : 6
          return Effect.map(dns.addresses(name), (found) => found.filter((a) => a.family === family).map((a) => a.address))
        }
        case "PTR":
          return dns.ptr(name)
        default:
          return Effect.succeed([])
      }
    }

    /** Each question asked once a minute at most (services/dns/answers.ts). */
    const remembered = answerCache<Answer>(keptAnswers)
    const keyOf = (name: string, type: string) => `${type} ${name.toLowerCase()}`
    const question = (name: string, type: string): Effect.Effect<Answer, DnsError> => remembered(keyOf(name, type), ask(name, type))

    // A kept answer is sent back at once; only a question not yet answered runs as an Effect. Either
    // way, an answer that is kept goes with its end, for the thread to keep as long.
    const checks = yield* checkingThread((name, type) => {
      const key = keyOf(name, type)
      const kept = remembered.peek(key)
      const withEnd = (exit: Exit.Exit<Answer, DnsError>): Reply => ({ ...replyOf(exit), until: remembered.keptUntil(key) })
      return kept !== undefined ? withEnd(kept) : runPromise(Effect.exit(question(name, type))).then(withEnd)
    })

    const check = (envelope: Envelope) =>
      Effect.map(
        checks.check(envelope.raw, {
          ip: envelope.clientIp,
          ...(envelope.helo ? { helo: envelope.helo } : {}),
          sender: envelope.mailFrom,
          mta: options.authservId,
          disableBimi: true
        }),
        (result) => verdictOf(result, envelope)
      )

    const verify = (envelope: Envelope) =>
      check(envelope).pipe(
        Effect.timeoutFail({ duration: VERIFY_TIMEOUT, onTimeout: () => new Error("the checks took too long") }),
        Effect.catchAll((error) =>
          Effect.as(
            Effect.logWarning("Could not check a message's SPF, DKIM, DMARC and ARC; it is kept as temperror", error),
            unverified(envelope)
          )
        ),
        Effect.map((authentication) => ({ authentication, results: authenticationResults(options.authservId, authentication) }))
      )

    return { verify }
  }))
