/**
 * The inbound checks' thread (layers/mailauth.ts, mailauth-worker.mjs), in process: verdicts made in
 * the thread from DNS answers given by this thread's Dns port, many messages at once; a DNS failure
 * kept as temperror (ARC's too, which mailauth calls a failure); a broken ARC seal failing; the event
 * loop free while the thread verifies; the thread gone with the layer.
 * How the verdicts reach stored mail over real SMTP is trust.test.ts's subject.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer, Schema, Scope } from "effect"
import { generateKeyPairSync } from "node:crypto"
import { sealMessage } from "mailauth"
import nodemailer from "nodemailer"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import * as Mailauth from "../../layers/mailauth.ts"
import { Dns, DnsError, type DnsShape } from "../../services/dns/dns.ts"
import { Authentication, AuthenticationOnTheBus, Authenticator, dmarcRejects, withoutOneAuthor } from "../../services/mail/authentication.ts"

const KEY = generateKeyPairSync("rsa", { modulusLength: 2048 })
const DOMAIN = "signed.test"
const SELECTOR = "s1"

/** The records the checks ask for: the DKIM key, SPF for 127.0.0.1 and DMARC p=reject; `questions` counts the asking. */
const dns = (failing = false) => {
  const questions: Array<string> = []
  const records: Record<string, ReadonlyArray<string>> = {
    [`${SELECTOR}._domainkey.${DOMAIN}`]: [`v=DKIM1; k=rsa; p=${KEY.publicKey.export({ type: "spki", format: "der" }).toString("base64")}`],
    [DOMAIN]: ["v=spf1 ip4:127.0.0.1 -all"],
    [`_dmarc.${DOMAIN}`]: ["v=DMARC1; p=reject"]
  }
  const notFound = (name: string) => new DnsError({ reason: "NotFound", message: `${name} does not resolve` })
  const shape: DnsShape = {
    txt: (name) =>
      Effect.suspend(() => {
        questions.push(`TXT ${name}`)
        if (failing) return Effect.fail(new DnsError({ reason: "Unavailable", message: `${name} could not be resolved (ETIMEOUT)` }))
        const found = records[name.toLowerCase()]
        return found ? Effect.succeed(found) : Effect.fail(notFound(name))
      }),
    addresses: (name) => Effect.fail(notFound(name)),
    mx: (name) => Effect.fail(notFound(name)),
    ptr: (name) => Effect.fail(notFound(name))
  }
  return { questions, records, layer: Layer.succeed(Dns, shape) }
}

/** Signed by nodemailer's own DKIM signer. */
const signer = nodemailer.createTransport({
  streamTransport: true,
  buffer: true,
  dkim: { domainName: DOMAIN, keySelector: SELECTOR, privateKey: KEY.privateKey.export({ type: "pkcs8", format: "pem" }).toString() }
})

const signedMessage = async (i: number): Promise<Uint8Array> =>
  (await signer.sendMail({
    from: `ada@${DOMAIN}`,
    to: "agent@agents.localhost",
    subject: `Message ${i}`,
    text: `Hello number ${i}.\n`,
    messageId: `<m${i}@${DOMAIN}>`
  })).message as Buffer

/** `raw` as a list relaying it (DOMAIN's key) seals it: ARC. */
const sealed = async (raw: Uint8Array): Promise<Uint8Array> =>
  Buffer.concat([
    await sealMessage(Buffer.from(raw), {
      signingDomain: DOMAIN,
      selector: SELECTOR,
      privateKey: KEY.privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
      authResults: `mx.${DOMAIN}; spf=pass smtp.mailfrom=${DOMAIN}; dkim=pass header.d=${DOMAIN}`,
      cv: "none"
      // The declarations leave out what createSeal reads: the list's own verdicts and the chain's state so far.
    } as Parameters<typeof sealMessage>[1]),
    raw
  ])

const envelope = (raw: Uint8Array) => ({ clientIp: "127.0.0.1", helo: "mail.signed.test", mailFrom: `ada@${DOMAIN}`, raw })

describe("the inbound checks' thread", () => {
  it.live("verifies many messages at once from this thread's DNS answers; later messages ask nothing again", () =>
    Effect.gen(function*() {
      const names = dns()
      const messages = yield* Effect.promise(() => Promise.all(Array.from({ length: 40 }, (_, i) => signedMessage(i))))
      const verifyAll = (batch: ReadonlyArray<Uint8Array>) =>
        Effect.flatMap(Authenticator, (checks) => Effect.forEach(batch, (raw) => checks.verify(envelope(raw)), { concurrency: "unbounded" }))
      const [verdicts, asked] = yield* Effect.gen(function*() {
        const first = yield* verifyAll(messages.slice(0, 20))
        const asked = names.questions.length
        return [[...first, ...(yield* verifyAll(messages.slice(20)))], asked] as const
      }).pipe(Effect.provide(Mailauth.layer({ authservId: "mx.test" }).pipe(Layer.provide(names.layer))))
      for (const verdict of verdicts) {
        expect(verdict!.authentication).toEqual({
          spf: { result: "pass", domain: DOMAIN, aligned: true },
          dkim: [{ result: "pass", domain: DOMAIN, selector: SELECTOR, aligned: true }],
          dmarc: { result: "pass", domain: DOMAIN, policy: "reject" },
          arc: { result: "none", domain: null }
        })
        expect(verdict!.results).toMatch(/^mx\.test; spf=pass .*dkim=pass .*dmarc=pass/)
      }
      expect(new Set(names.questions)).toEqual(new Set([`TXT ${DOMAIN}`, `TXT ${SELECTOR}._domainkey.${DOMAIN}`, `TXT _dmarc.${DOMAIN}`]))
      // The answers are kept (services/dns/answers.ts): the second twenty asked nothing.
      expect(names.questions.length).toBe(asked)
    }))

  it.live("the thread keeps a kept answer until its end, and asks again for one that is not kept or has ended", () =>
    Effect.gen(function*() {
      const records = dns().records
      const asked: Array<string> = []
      // How long the server's thread says it keeps its answers from now on (undefined: not kept).
      let life: number | undefined = 60_000
      const answer = (name: string, type: string) => {
        asked.push(`${type} ${name}`)
        const until = life === undefined ? undefined : Date.now() + life
        const found = records[name.toLowerCase()]
        return found ? { answer: found.map((record) => [record]), until } : { error: { message: `no ${name}`, code: "ENOTFOUND" }, until }
      }
      const options = { ip: "127.0.0.1", helo: "mail.signed.test", sender: `ada@${DOMAIN}`, mta: "mx.test", disableBimi: true }
      const messages = yield* Effect.promise(() => Promise.all(Array.from({ length: 4 }, (_, i) => signedMessage(i))))
      const kept = yield* Mailauth.checkingThread(answer)
      const checkedBy = (thread: typeof kept, i: number) => thread.check(messages[i]!, options)
      const dkimOf = (result: { readonly dkim: { readonly results: ReadonlyArray<{ readonly status: { readonly result: unknown } }> } }) =>
        result.dkim.results.map((r) => r.status.result)

      expect(dkimOf(yield* checkedBy(kept, 0))).toEqual(["pass"])
      const first = asked.length
      expect(asked).toContain(`TXT ${SELECTOR}._domainkey.${DOMAIN}`)
      expect(dkimOf(yield* checkedBy(kept, 1))).toEqual(["pass"])
      expect(asked.length).toBe(first)

      // Answers the server does not keep (no end), and answers whose end has come, are asked again.
      life = undefined
      const unkept = yield* Mailauth.checkingThread(answer)
      yield* checkedBy(unkept, 0)
      yield* checkedBy(unkept, 1)
      expect(asked.length).toBe(3 * first)
      life = 200
      const brief = yield* Mailauth.checkingThread(answer)
      yield* checkedBy(brief, 2)
      yield* Effect.sleep("300 millis")
      expect(dkimOf(yield* checkedBy(brief, 3))).toEqual(["pass"])
      expect(asked.length).toBe(5 * first)
    }).pipe(Effect.scoped))

  it.live("a thread that dies fails the checks it had, and the next message gets a new one", () =>
    Effect.gen(function*() {
      // A stand-in for the thread's code: it dies on a message starting with "die", answers any other.
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mailroom-checks-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
      const script = path.join(dir, "thread.mjs")
      fs.writeFileSync(script, `import { parentPort } from "node:worker_threads"
        parentPort.on("message", (m) => {
          if (Buffer.from(m.raw).toString().startsWith("die")) process.exit(3)
          parentPort.postMessage({ type: "checked", id: m.id, result: { started: process.pid } })
        })`)
      const thread = yield* Mailauth.checkingThread(() => ({ answer: [] }), pathToFileURL(script))
      const options = { ip: "127.0.0.1", sender: "", mta: "mx.test", disableBimi: true }
      const check = (text: string) => Effect.either(thread.check(new TextEncoder().encode(text), options))
      const [dying, waiting] = yield* Effect.all([check("die now"), check("hello")], { concurrency: "unbounded" })
      expect(dying).toMatchObject({ _tag: "Left", left: { message: "the checking thread exited (3)" } })
      // The check queued behind it on the same thread fails with it (the layer keeps it as temperror).
      expect(waiting).toMatchObject({ _tag: "Left", left: { message: "the checking thread exited (3)" } })
      expect(yield* check("hello again")).toMatchObject({ _tag: "Right" })
    }).pipe(Effect.scoped))

  it.live("a DNS server that does not answer: every verdict temperror, not a failure (an ARC chain's too)", () =>
    Effect.gen(function*() {
      const names = dns(true)
      const raw = yield* Effect.promise(() => signedMessage(0).then(sealed))
      const verdict = yield* Effect.flatMap(Authenticator, (checks) => checks.verify(envelope(raw))).pipe(
        Effect.provide(Mailauth.layer({ authservId: "mx.test" }).pipe(Layer.provide(names.layer)))
      )
      expect(verdict!.authentication.spf.result).toBe("temperror")
      expect(verdict!.authentication.dkim.map((d) => d.result)).toEqual(["temperror"])
      // mailauth calls a seal whose key it could not fetch a failure.
      expect(verdict!.authentication.arc).toEqual({ result: "temperror", domain: DOMAIN })
    }))

  it.live("an ARC chain checked against its published key: a seal that holds passes, a broken one fails", () =>
    Effect.gen(function*() {
      const names = dns()
      const raw = yield* Effect.promise(() => signedMessage(1).then(sealed))
      const text = Buffer.from(raw).toString()
      // The seal's signature altered in its last characters: it no longer verifies.
      const broken = text.replace(/(ARC-Seal:[^]*?b=[^;]*?)[A-Za-z0-9](\r\n[^ \t])/, (_, head, tail) => `${head}${head.endsWith("A") ? "B" : "A"}${tail}`)
      expect(broken).not.toBe(text)
      const [kept, failed] = yield* Effect.flatMap(Authenticator, (checks) =>
        Effect.all([checks.verify(envelope(raw)), checks.verify(envelope(new TextEncoder().encode(broken)))])).pipe(
          Effect.provide(Mailauth.layer({ authservId: "mx.test" }).pipe(Layer.provide(names.layer)))
        )
      expect(kept!.authentication.arc).toEqual({ result: "pass", domain: DOMAIN })
      expect(failed!.authentication.arc).toEqual({ result: "fail", domain: DOMAIN })
    }))

  it.live("the event loop stays free while the thread verifies", () =>
    Effect.gen(function*() {
      const names = dns()
      const messages = yield* Effect.promise(() => Promise.all(Array.from({ length: 200 }, (_, i) => signedMessage(i))))
      const scope = yield* Scope.make()
      const checks = yield* Effect.provide(Authenticator, Mailauth.layer({ authservId: "mx.test" }).pipe(Layer.provide(names.layer))).pipe(
        Scope.extend(scope)
      )
      // Started on first use.
      yield* checks.verify(envelope(messages[0]!))
      const before = performance.eventLoopUtilization()
      yield* Effect.forEach(messages, (raw) => checks.verify(envelope(raw)), { concurrency: 20, discard: true })
      const used = performance.eventLoopUtilization(before)
      // On this thread the checks keep the loop busy all the time (1.0, measured); off it, the
      // loop only hands messages over and answers DNS questions from the kept answers.
      expect(used.utilization).toBeLessThan(0.9)
      yield* Scope.close(scope, Exit.void)
    }))
})

/**
 * A Dns answering TXT questions from `records` (a name without records: NotFound); a name matching
 * `silent` is never answered, as a DNS server that drops the question. `questions` counts the asking.
 */
const answering = (records: Record<string, ReadonlyArray<string>>, silent: RegExp = /^$/) => {
  const questions: Array<string> = []
  const notFound = (name: string) => new DnsError({ reason: "NotFound", message: `${name} does not resolve` })
  const shape: DnsShape = {
    txt: (name) =>
      Effect.suspend(() => {
        questions.push(`TXT ${name}`)
        if (silent.test(name)) return Effect.never
        const found = records[name.toLowerCase()]
        return found ? Effect.succeed(found) : Effect.fail(notFound(name))
      }),
    addresses: (name) => Effect.fail(notFound(name)),
    mx: (name) => Effect.fail(notFound(name)),
    ptr: (name) => Effect.fail(notFound(name))
  }
  return { questions, layer: Layer.succeed(Dns, shape) }
}

const verifiedWith = (names: { readonly layer: Layer.Layer<Dns> }, envelope: Parameters<Authenticator["Type"]["verify"]>[0]) =>
  Effect.flatMap(Authenticator, (checks) => checks.verify(envelope)).pipe(
    Effect.provide(Mailauth.layer({ authservId: "mx.test" }).pipe(Layer.provide(names.layer)))
  )

/** A throwaway key for signing as `domainName`: its key is never published. */
const unpublished = (domainName: string) => ({
  domainName,
  keySelector: "k",
  privateKey: generateKeyPairSync("rsa", { modulusLength: 1024 }).privateKey.export({ type: "pkcs8", format: "pem" }).toString()
})

const publishedKey = { domainName: DOMAIN, keySelector: SELECTOR, privateKey: KEY.privateKey.export({ type: "pkcs8", format: "pem" }).toString() }

describe("a sender's unanswered questions", () => {
  const SILENT = Array.from({ length: 12 }, (_, i) => `silent${i}.test`)
  const records = {
    "spffail.test": ["v=spf1 -all"],
    "_dmarc.spffail.test": ["v=DMARC1; p=reject"],
    [`${SELECTOR}._domainkey.${DOMAIN}`]: [`v=DKIM1; k=rsa; p=${KEY.publicKey.export({ type: "spki", format: "der" }).toString("base64")}`],
    [DOMAIN]: ["v=spf1 ip4:127.0.0.1 -all"],
    [`_dmarc.${DOMAIN}`]: ["v=DMARC1; p=reject"]
  }
  const signedBy = (keys: ReadonlyArray<ReturnType<typeof unpublished>>, from: string) =>
    Effect.promise(async () =>
      (await nodemailer.createTransport({ streamTransport: true, buffer: true, dkim: { keys: [...keys] } }).sendMail({
        from,
        to: "agent@agents.localhost",
        subject: "Wire the money",
        text: "Today, please.\n"
      })).message as Buffer
    )

  it.live("a dozen signatures whose keys nobody answers for are temperror each; SPF and DMARC still decide", () =>
    Effect.gen(function*() {
      const names = answering(records, /\.silent\d+\.test$/)
      const raw = yield* signedBy(SILENT.map(unpublished), "ceo@spffail.test")
      const verdict = yield* verifiedWith(names, { clientIp: "127.0.0.1", helo: "mx.spffail.test", mailFrom: "ceo@spffail.test", raw })
      expect(verdict!.authentication).toEqual({
        spf: { result: "fail", domain: "spffail.test", aligned: true },
        dkim: SILENT.map((domain) => ({ result: "temperror", domain, selector: "k", aligned: false })),
        dmarc: { result: "fail", domain: "spffail.test", policy: "reject" },
        arc: { result: "none", domain: null }
      })
      expect(dmarcRejects(verdict!.authentication)).toBe(true)
      // At most five signatures' keys are asked for.
      expect(names.questions.filter((q) => q.includes("silent")).length).toBe(5)
    }), 20_000)

  it.live("good mail among such signatures keeps its pass: the From domain's signature is checked first", () =>
    Effect.gen(function*() {
      const names = answering(records, /\.silent\d+\.test$/)
      const raw = yield* signedBy([...SILENT.map(unpublished), publishedKey], `ada@${DOMAIN}`)
      const verdict = yield* verifiedWith(names, { clientIp: "127.0.0.2", helo: "mx.other.test", mailFrom: `ada@${DOMAIN}`, raw })
      expect(verdict!.authentication.spf).toEqual({ result: "fail", domain: DOMAIN, aligned: true })
      expect(verdict!.authentication.dkim.filter((d) => d.result === "pass")).toEqual([{ result: "pass", domain: DOMAIN, selector: SELECTOR, aligned: true }])
      expect(verdict!.authentication.dkim.filter((d) => d.result === "temperror").length).toBe(12)
      expect(verdict!.authentication.dmarc).toEqual({ result: "pass", domain: DOMAIN, policy: "reject" })
    }), 20_000)
})

describe("DMARC as the From domain's record says", () => {
  const publicKey = `v=DKIM1; k=rsa; p=${KEY.publicKey.export({ type: "spki", format: "der" }).toString("base64")}`
  const records = {
    "mail.strict.test": ["v=spf1 ip4:127.0.0.1 -all"],
    [`${SELECTOR}._domainkey.mail.strict.test`]: [publicKey],
    "_dmarc.strict.test": ["v=DMARC1; p=reject; adkim=s; aspf=s"],
    "mail.relaxed.test": ["v=spf1 ip4:127.0.0.1 -all"],
    [`${SELECTOR}._domainkey.mail.relaxed.test`]: [publicKey],
    "_dmarc.relaxed.test": ["v=DMARC1; p=reject"],
    "slowspf.test": ["v=spf1 include:spf.silent.test -all"],
    "_dmarc.slowspf.test": ["v=DMARC1; p=reject"],
    "badpol.test": ["v=spf1 -all"],
    "_dmarc.badpol.test": ["v=DMARC1; p=bogus"],
    "reports.test": ["v=spf1 -all"],
    "_dmarc.reports.test": ["v=DMARC1; p=bogus; rua=mailto:dmarc@reports.test"]
  }
  const names = answering(records, /silent\.test$/)
  /** A message from `from`, signed for `signer` with the published key when given. */
  const message = (from: string, signer?: string) =>
    Effect.promise(async () =>
      (await nodemailer.createTransport({
        streamTransport: true,
        buffer: true,
        ...(signer ? { dkim: { ...publishedKey, domainName: signer } } : {})
      }).sendMail({ from, to: "agent@agents.localhost", subject: "Hello", text: "Hello.\n" })).message as Buffer
    )

  it.live("adkim=s and aspf=s: a subdomain's SPF and DKIM passes do not align, and DMARC fails", () =>
    Effect.gen(function*() {
      const raw = yield* message("ada@strict.test", "mail.strict.test")
      const verdict = yield* verifiedWith(names, { clientIp: "127.0.0.1", helo: "mail.strict.test", mailFrom: "bounces@mail.strict.test", raw })
      expect(verdict!.authentication).toEqual({
        spf: { result: "pass", domain: "mail.strict.test", aligned: false },
        dkim: [{ result: "pass", domain: "mail.strict.test", selector: SELECTOR, aligned: false }],
        dmarc: { result: "fail", domain: "strict.test", policy: "reject" },
        arc: { result: "none", domain: null }
      })
      expect(dmarcRejects(verdict!.authentication)).toBe(true)
      // Relaxed (the default), the same subdomain aligns.
      const relaxed = yield* verifiedWith(names, {
        clientIp: "127.0.0.1",
        helo: "mail.relaxed.test",
        mailFrom: "bounces@mail.relaxed.test",
        raw: yield* message("ada@relaxed.test", "mail.relaxed.test")
      })
      expect(relaxed!.authentication.spf.aligned).toBe(true)
      expect(relaxed!.authentication.dkim.map((d) => d.aligned)).toEqual([true])
      expect(relaxed!.authentication.dmarc).toEqual({ result: "pass", domain: "relaxed.test", policy: "reject" })
    }))

  it.live("an aligned SPF that could not be checked (an include nobody answers for) leaves DMARC temperror, which p=reject does not refuse", () =>
    Effect.gen(function*() {
      const raw = yield* message("ada@slowspf.test")
      const verdict = yield* verifiedWith(names, { clientIp: "127.0.0.1", helo: "mx.slowspf.test", mailFrom: "ada@slowspf.test", raw })
      expect(verdict!.authentication.spf).toEqual({ result: "temperror", domain: "slowspf.test", aligned: true })
      expect(verdict!.authentication.dmarc).toEqual({ result: "temperror", domain: "slowspf.test", policy: "reject" })
      expect(dmarcRejects(verdict!.authentication)).toBe(false)
    }), 20_000)

  it.live("a record whose p= names no policy is no record (DMARC none), unless it asks for reports (p=none)", () =>
    Effect.gen(function*() {
      const bogus = yield* verifiedWith(names, { clientIp: "127.0.0.1", helo: "mx.badpol.test", mailFrom: "ada@badpol.test", raw: yield* message("ada@badpol.test") })
      expect(bogus!.authentication.dmarc).toEqual({ result: "none", domain: "badpol.test", policy: null })
      const reports = yield* verifiedWith(names, { clientIp: "127.0.0.1", helo: "mx.reports.test", mailFrom: "ada@reports.test", raw: yield* message("ada@reports.test") })
      expect(reports!.authentication.dmarc).toEqual({ result: "fail", domain: "reports.test", policy: "none" })
    }))
})

describe("a From that names no author DMARC could check", () => {
  const names = answering({ "x.test": ["v=spf1 ip4:127.0.0.1 -all"] })
  const fromLine = (from: string) =>
    new TextEncoder().encode(`From: ${from}\r\nTo: agent@agents.localhost\r\nSubject: Hello\r\nMessage-ID: <1@x.test>\r\n\r\nHello.\r\n`)

  it.live("<<<>>>, an address literal, an empty domain: DMARC permerror with no domain, which DMARC_ENFORCE refuses", () =>
    Effect.gen(function*() {
      for (const from of ["<<<>>>", "ada@[127.0.0.1]", "ada@", "@x.test", "ada@x..test"]) {
        const verdict = yield* verifiedWith(names, { clientIp: "127.0.0.1", helo: "mx.x.test", mailFrom: "ada@x.test", raw: fromLine(from) })
        expect(verdict!.authentication.dmarc, from).toEqual({ result: "permerror", domain: null, policy: null })
        expect(verdict!.authentication.spf, from).toEqual({ result: "pass", domain: "x.test", aligned: false })
        expect(withoutOneAuthor(verdict!.authentication), from).toBe(true)
        expect(dmarcRejects(verdict!.authentication), from).toBe(true)
      }
      // A name of DNS labels is checked, an internationalized one too.
      for (const [from, domain] of [["Ada <ada@x.test>", "x.test"], ["ada@bücher.example", "bücher.example"]] as const) {
        const verdict = yield* verifiedWith(names, { clientIp: "127.0.0.1", helo: "mx.x.test", mailFrom: "ada@x.test", raw: fromLine(from) })
        expect(verdict!.authentication.dmarc, from).toEqual({ result: "none", domain, policy: null })
      }
    }))
})

describe("verdicts on the bus", () => {
  it("a verdict made before the ARC domain was kept (a message from an older node) reads with the domain null", () => {
    const older = {
      spf: { result: "pass", domain: DOMAIN, aligned: true },
      dkim: [],
      dmarc: { result: "pass", domain: DOMAIN, policy: "reject" },
      arc: { result: "none" }
    }
    expect(Schema.decodeUnknownSync(AuthenticationOnTheBus)(older).arc).toEqual({ result: "none", domain: null })
    // The API's answers always carry the domain.
    expect(() => Schema.decodeUnknownSync(Authentication)(older)).toThrow(/domain/)
  })
})
