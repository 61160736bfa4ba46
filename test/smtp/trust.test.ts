/**
 * Inbound trust (issue 20, slice 1): SPF, DKIM, DMARC and ARC verdicts on received mail, as an agent
 * meets them. Senders talk real SMTP (nodemailer, DKIM-signed by nodemailer's own signer) to a
 * started server whose DNS questions go to a DNS server this test runs (DNS_SERVERS), where the
 * signing keys, SPF records (for 127.0.0.1, where the test connects from) and DMARC policies are
 * published. The suite's server runs as most do, without DMARC_ENFORCE: it answers 250 before the
 * checks, which ingest runs with the connection the SMTP node passed on, and a verdict only labels.
 * A second server runs with DMARC_ENFORCE=true, where the SMTP node checks before it answers and
 * refuses p=reject failures.
 */
import { sealMessage } from "mailauth"
import { generateKeyPairSync } from "node:crypto"
import * as net from "node:net"
import nodemailer from "nodemailer"
import type Mail from "nodemailer/lib/mailer"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { withApiKey } from "../support/accounts.ts"
import { type Box, fresh, newBox } from "../support/mailboxes.ts"
import { type DnsServer, startDnsServer } from "../support/dns-server.ts"
import { type Receiver, startReceiver } from "../support/receiver.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { withKey } from "../support/typed-client.ts"
import { until } from "../support/wait.ts"

const KEY = generateKeyPairSync("rsa", { modulusLength: 2048 })
const privateKey = KEY.privateKey.export({ type: "pkcs8", format: "pem" }).toString()
const publicDer = KEY.publicKey.export({ type: "spki", format: "der" }).toString("base64")
const SELECTOR = "s2026"

/** Signs, sends from 127.0.0.1 (SPF pass) and asks for p=reject. */
const SIGNED = "signed.test"
/** Publishes `-all`: 127.0.0.1 may not send for it. */
const SPF_FAIL = "spf-fail.test"
/** Publishes `~all`. */
const SPF_SOFT = "spf-soft.test"
/** p=none, and nothing passes for it. */
const LAX = "lax.test"
/** p=reject, and nothing passes for it. */
const STRICT = "strict.test"
/** A mailing list that relays signed.test's mail and seals it (ARC). */
const LIST = "list.test"
/** Sends from 198.51.100.7 only, through the load balancer at 127.0.0.5 (PROXY_PROTOCOL). */
const PROXIED = "proxied.test"
const BALANCER = "127.0.0.5"

let names: DnsServer
let hooks: Receiver
let suite: SuiteServer

beforeAll(async () => {
  names = await startDnsServer()
  hooks = await startReceiver()
  // A TXT character-string holds at most 255 bytes: a 2048-bit key's record is published in pieces.
  names.set(`${SELECTOR}._domainkey.${SIGNED}`, { TXT: [`v=DKIM1; k=rsa; p=${publicDer}`.match(/.{1,255}/g)!] })
  names.set(`${SELECTOR}._domainkey.${LIST}`, { TXT: [`v=DKIM1; k=rsa; p=${publicDer}`.match(/.{1,255}/g)!] })
  names.set(SIGNED, { TXT: [["v=spf1 ip4:127.0.0.1 -all"]] })
  names.set(`_dmarc.${SIGNED}`, { TXT: [["v=DMARC1; p=reject"]] })
  names.set(SPF_FAIL, { TXT: [["v=spf1 -all"]] })
  names.set(SPF_SOFT, { TXT: [["v=spf1 ~all"]] })
  names.set(LAX, { TXT: [["v=spf1 -all"]] })
  names.set(`_dmarc.${LAX}`, { TXT: [["v=DMARC1; p=none"]] })
  names.set(STRICT, { TXT: [["v=spf1 -all"]] })
  names.set(`_dmarc.${STRICT}`, { TXT: [["v=DMARC1; p=reject"]] })
  names.set(PROXIED, { TXT: [["v=spf1 ip4:198.51.100.7 -all"]] })
})

afterAll(async () => {
  await names?.close()
  await hooks?.close()
})

useSuiteServer((s) => {
  suite = s
}, {
  // Set before the server starts: the suite's beforeAll above runs first.
  get DNS_SERVERS() {
    return names.address
  },
  WEBHOOK_ALLOW_PRIVATE: "true",
  PROXY_PROTOCOL: BALANCER
} as Record<string, string>)

const dkim = { domainName: SIGNED, keySelector: SELECTOR, privateKey }

const transportOptions = (server = suite) => ({
  host: "127.0.0.1",
  port: server.server.smtpPort,
  secure: false,
  ignoreTLS: true,
  name: "client.test"
})

/** Send `mail` over SMTP; with `sign`, nodemailer's DKIM signer signs it for signed.test. */
const send = async (mail: Mail.Options, sign = false, server = suite) => {
  const transport = nodemailer.createTransport({ ...transportOptions(server), ...(sign ? { dkim } : {}) })
  try {
    return await transport.sendMail(mail)
  } finally {
    transport.close()
  }
}

/** The bytes nodemailer would send, DKIM-signed for signed.test. */
const signedBytes = async (mail: Mail.Options) => {
  const transport = nodemailer.createTransport({ streamTransport: true, buffer: true, dkim })
  const info = await transport.sendMail(mail)
  return info.message as Buffer
}

const sendRaw = async (raw: Buffer, from: string, to: string, server = suite) => {
  const transport = nodemailer.createTransport(transportOptions(server))
  try {
    return await transport.sendMail({ envelope: { from, to: [to] }, raw })
  } finally {
    transport.close()
  }
}

/**
 * A message of two authors: signed for signed.test as alice's (DKIM passes, aligned with her From),
 * with a second From field naming ceo@strict.test (p=reject) on top, which a mail program may show.
 */
const twoAuthors = async (to: string, subject: string) => {
  const signed = await signedBytes({ from: `alice@${SIGNED}`, to, subject, text: "Wire the money." })
  return Buffer.concat([Buffer.from(`From: ceo@${STRICT}\r\n`), signed])
}

const mailbox = async (server = suite) => newBox(server.url, { user: await withApiKey(server.url), localPart: fresh("trust") })

/** The email with this subject once it is stored, as `GET /emails/{id}` shows it. */
const received = async (box: Box, subject: string, server = suite) => {
  const mailroom = withKey(server.url, box.user)
  const summary = await until(`"${subject}" in ${box.address}`, async () => {
    const list = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
    expect(list.response.status, JSON.stringify(list.error)).toBe(200)
    return list.data!.data.find((email) => email.subject === subject)
  }, 30_000, 300, 2_000)
  const email = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: summary.email_id } } })
  expect(email.response.status, JSON.stringify(email.error)).toBe(200)
  // The list shows the same verdicts as the email itself.
  expect(summary.authentication).toEqual(email.data!.data.authentication)
  return email.data!.data
}

describe("DKIM", () => {
  it("a message signed with the published key passes, aligned with its From; DMARC passes under p=reject", async () => {
    const box = await mailbox()
    const subject = fresh("signed")
    await send({ from: `Alice <alice@${SIGNED}>`, to: box.address, subject, text: "Signed and sealed." }, true)
    const email = await received(box, subject)
    expect(email.authentication).toEqual({
      spf: { result: "pass", domain: SIGNED, aligned: true },
      dkim: [{ result: "pass", domain: SIGNED, selector: SELECTOR, aligned: true }],
      dmarc: { result: "pass", domain: SIGNED, policy: "reject" },
      arc: { result: "none", domain: null }
    })
    expect(email.authentication_results).toBe(
      `mx.agents.localhost; spf=pass smtp.mailfrom=${SIGNED}; dkim=pass header.d=${SIGNED} header.s=${SELECTOR}; ` +
        `dmarc=pass (p=reject) header.from=${SIGNED}; arc=none`
    )
    expect(email.labels).not.toContain("unauthenticated")
    // Both the DNS server and the key were asked through DNS_SERVERS.
    expect(names.questions()).toContain(`TXT ${SELECTOR}._domainkey.${SIGNED} udp`)
  })

  it("a body changed after signing fails; the raw message is stored as it was sent, without our verdict", async () => {
    const box = await mailbox()
    const subject = fresh("tampered")
    const signed = await signedBytes({ from: `alice@${SIGNED}`, to: box.address, subject, text: "Pay 10 EUR to account A." })
    const tampered = Buffer.from(signed.toString("latin1").replace("Pay 10 EUR", "Pay 9999 EUR"), "latin1")
    expect(tampered.equals(signed)).toBe(false)
    // From another envelope domain, so SPF cannot rescue DMARC either. signed.test asks for p=reject,
    // but without DMARC_ENFORCE a verdict only labels: accepted, failing, labelled.
    await sendRaw(tampered, `bounces@${SPF_SOFT}`, box.address)
    const forged = await received(box, subject)
    expect(forged.authentication?.dkim).toEqual([{ result: "fail", domain: SIGNED, selector: SELECTOR, aligned: true }])
    expect(forged.authentication?.dmarc).toEqual({ result: "fail", domain: SIGNED, policy: "reject" })
    expect(forged.labels).toContain("unauthenticated")
    // Same tampering with the From on another domain: the signature does not even align.
    const laxSubject = fresh("tampered-lax")
    const laxSigned = await signedBytes({ from: `alice@${LAX}`, to: box.address, subject: laxSubject, text: "Pay 10 EUR to account A." })
    const laxTampered = Buffer.from(laxSigned.toString("latin1").replace("Pay 10 EUR", "Pay 9999 EUR"), "latin1")
    await sendRaw(laxTampered, `bounces@${SPF_SOFT}`, box.address)
    const email = await received(box, laxSubject)
    expect(email.authentication?.dkim).toEqual([{ result: "fail", domain: SIGNED, selector: SELECTOR, aligned: false }])
    expect(email.authentication?.dmarc).toEqual({ result: "fail", domain: LAX, policy: "none" })
    expect(email.labels).toContain("unauthenticated")
    const raw = await withKey(suite.url, box.user).GET("/v1/api/emails/{emailId}/raw", { params: { path: { emailId: email.email_id } }, parseAs: "arrayBuffer" })
    expect(raw.response.status).toBe(200)
    const bytes = Buffer.from(raw.data!)
    expect(bytes.toString("latin1").replace(/\r\n/g, "\n")).toBe(laxTampered.toString("latin1").replace(/\r\n/g, "\n"))
    expect(bytes.toString("latin1")).not.toContain("Authentication-Results")
  })

  it("an unsigned message has no DKIM verdicts; an aligned SPF pass alone passes DMARC", async () => {
    const box = await mailbox()
    const subject = fresh("unsigned")
    await send({ from: `alice@${SIGNED}`, to: box.address, subject, text: "No signature." })
    const email = await received(box, subject)
    expect(email.authentication?.dkim).toEqual([])
    // SPF passes for signed.test's own address: DMARC passes on SPF alone.
    expect(email.authentication?.dmarc.result).toBe("pass")
    expect(email.authentication_results).toContain("dkim=none")
  })
})

describe("SPF for 127.0.0.1", () => {
  it.each([
    [SIGNED, "pass"],
    [SPF_FAIL, "fail"],
    [SPF_SOFT, "softfail"]
  ])("MAIL FROM at %s: %s", async (domain, result) => {
    const box = await mailbox()
    const subject = fresh("spf")
    await send({ from: `carol@${domain}`, to: box.address, subject, text: "SPF only.", envelope: { from: `carol@${domain}`, to: box.address } })
    const email = await received(box, subject)
    expect(email.authentication?.spf).toEqual({ result, domain, aligned: true })
    expect(email.authentication_results).toContain(`spf=${result} smtp.mailfrom=${domain}`)
    // No DMARC record for the SPF-only domains: only an aligned pass keeps the mail authenticated.
    expect(email.labels.includes("unauthenticated")).toBe(result !== "pass")
  })
})

describe("behind a load balancer (PROXY_PROTOCOL)", () => {
  /** A connection from the balancer's address, opened with `header` (none: without one). */
  const throughBalancer = (header: string | undefined) =>
    nodemailer.createTransport({
      ...transportOptions(),
      getSocket: (_options, callback) => {
        const socket = net.connect({ host: "127.0.0.1", port: suite.server.smtpPort, localAddress: BALANCER }, () => {
          if (header !== undefined) socket.write(`${header}\r\n`)
          callback(null, { connection: socket })
        })
        socket.once("error", (error) => callback(error))
      }
    })

  it("checks SPF for the client its PROXY header names; mail from that client straight to us is not", async () => {
    const box = await mailbox()
    const subject = fresh("proxied")
    const mail = { from: `dave@${PROXIED}`, to: box.address, text: "Through the balancer." }
    const transport = throughBalancer(`PROXY TCP4 198.51.100.7 127.0.0.1 40000 ${suite.server.smtpPort}`)
    try {
      await transport.sendMail({ ...mail, subject })
    } finally {
      transport.close()
    }
    expect((await received(box, subject)).authentication?.spf).toEqual({ result: "pass", domain: PROXIED, aligned: true })

    const straight = fresh("straight")
    await send({ ...mail, subject: straight })
    expect((await received(box, straight)).authentication?.spf).toEqual({ result: "fail", domain: PROXIED, aligned: true })
  })

  it("closes a connection from the balancer that does not begin with a PROXY header, without a word", async () => {
    const socket = net.connect({ host: "127.0.0.1", port: suite.server.smtpPort, localAddress: BALANCER })
    socket.write("EHLO client.test\r\n")
    const heard = await new Promise<string>((resolve, reject) => {
      let text = ""
      socket.on("data", (chunk) => (text += chunk))
      socket.once("close", () => resolve(text))
      socket.once("error", reject)
    })
    expect(heard).toBe("")
  })
})

describe("DMARC", () => {
  it("fails under p=none: accepted, labelled unauthenticated, and the email.received payload carries the verdicts", async () => {
    const user = await withApiKey(suite.url)
    const box = await newBox(suite.url, { user, localPart: fresh("trust") })
    const path = `/received-${box.mailboxId}`
    const hook = await withKey(suite.url, user).POST("/v1/api/webhooks", { body: { url: `${hooks.url}${path}`, events: ["email.received"] } })
    expect(hook.response.status, JSON.stringify(hook.error)).toBe(201)
    const subject = fresh("lax")
    await send({ from: `Your Bank <security@${LAX}>`, to: box.address, subject, text: "Confirm your password." })
    const email = await received(box, subject)
    expect(email.authentication).toEqual({
      spf: { result: "fail", domain: LAX, aligned: true },
      dkim: [],
      dmarc: { result: "fail", domain: LAX, policy: "none" },
      arc: { result: "none", domain: null }
    })
    expect(email.labels).toEqual(expect.arrayContaining(["inbound", "unread", "unauthenticated"]))
    const [delivery] = await hooks.waitFor(path, 1)
    const payload = JSON.parse(delivery!.body)
    expect(payload.data.authentication).toEqual(email.authentication)
    expect(payload.data.authentication_results).toBe(email.authentication_results)
    expect(payload.data.labels).toContain("unauthenticated")
  })

  it("fails under p=reject without DMARC_ENFORCE: accepted, checked after the 250, labelled", async () => {
    const box = await mailbox()
    const subject = fresh("strict")
    const sent = await send({ from: `ceo@${STRICT}`, to: box.address, subject, text: "Wire the money." })
    expect(sent.response).toMatch(/^250 /)
    const email = await received(box, subject)
    expect(email.authentication?.dmarc).toEqual({ result: "fail", domain: STRICT, policy: "reject" })
    expect(email.labels).toContain("unauthenticated")
  })

  it("a From of two authors aligns with nothing, whatever its signatures say: DMARC permerror, labelled unauthenticated", async () => {
    const box = await mailbox()
    const subject = fresh("two-authors")
    await sendRaw(await twoAuthors(box.address, subject), `bounces@${SIGNED}`, box.address)
    const email = await received(box, subject)
    expect(email.authentication).toMatchObject({
      spf: { result: "pass", domain: SIGNED, aligned: false },
      dkim: [{ result: "pass", domain: SIGNED, aligned: false }],
      dmarc: { result: "permerror", domain: null, policy: null }
    })
    expect(email.labels).toContain("unauthenticated")
  })

  it("a bounce (empty MAIL FROM) is checked for the HELO name its connection gave", async () => {
    const box = await mailbox()
    const subject = fresh("bounce")
    await send({ from: `postmaster@${SIGNED}`, to: box.address, subject, text: "Undeliverable.", envelope: { from: "", to: box.address } })
    const email = await received(box, subject)
    // nodemailer says EHLO client.test (transportOptions), which publishes nothing.
    expect(email.authentication?.spf).toEqual({ result: "none", domain: "client.test", aligned: false })
  })
})

describe("with DMARC_ENFORCE=true: checked before the 250", () => {
  let enforcing: SuiteServer
  useSuiteServer((s) => {
    enforcing = s
  }, {
    get DNS_SERVERS() {
      return names.address
    },
    DMARC_ENFORCE: "true"
  } as Record<string, string>)

  it("a DMARC failure under p=reject is refused 550 5.7.1 at DATA, a forged signature too; nothing stored", async () => {
    const box = await mailbox(enforcing)
    const refused = await send({ from: `ceo@${STRICT}`, to: box.address, subject: fresh("strict"), text: "Wire the money." }, false, enforcing).then(
      () => undefined,
      (error: { responseCode?: number; response?: string }) => error
    )
    expect(refused?.responseCode).toBe(550)
    expect(refused?.response).toMatch(/^550 5\.7\.1 /)
    const signed = await signedBytes({ from: `alice@${SIGNED}`, to: box.address, subject: fresh("tampered"), text: "Pay 10 EUR to account A." })
    const tampered = Buffer.from(signed.toString("latin1").replace("Pay 10 EUR", "Pay 9999 EUR"), "latin1")
    await expect(sendRaw(tampered, `bounces@${SPF_SOFT}`, box.address, enforcing)).rejects.toMatchObject({ responseCode: 550 })
    // Two authors, one of them signed for: refused as RFC 7489 §6.6.1 says.
    await expect(sendRaw(await twoAuthors(box.address, fresh("two-authors")), `bounces@${SIGNED}`, box.address, enforcing)).rejects
      .toMatchObject({ responseCode: 550, response: "550 5.7.1 Message refused: its From must name exactly one author for DMARC to be checked" })
    const list = await withKey(enforcing.url, box.user).GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
    expect(list.response.status).toBe(200)
    expect(list.data?.meta.total).toBe(0)
  })

  it("what passes is stored with the verdicts the SMTP node found", async () => {
    const box = await mailbox(enforcing)
    const subject = fresh("signed")
    await send({ from: `Alice <alice@${SIGNED}>`, to: box.address, subject, text: "Signed and sealed." }, true, enforcing)
    const email = await received(box, subject, enforcing)
    expect(email.authentication).toEqual({
      spf: { result: "pass", domain: SIGNED, aligned: true },
      dkim: [{ result: "pass", domain: SIGNED, selector: SELECTOR, aligned: true }],
      dmarc: { result: "pass", domain: SIGNED, policy: "reject" },
      arc: { result: "none", domain: null }
    })
    expect(email.labels).not.toContain("unauthenticated")
  })
})

describe("ARC", () => {
  it("a message a list sealed (ARC) passes ARC, naming the list that vouches for it", async () => {
    const box = await mailbox()
    const subject = fresh("sealed")
    const signed = await signedBytes({ from: `alice@${SIGNED}`, to: box.address, subject, text: "Relayed by the list." })
    const seal = await sealMessage(signed, {
      signingDomain: LIST,
      selector: SELECTOR,
      privateKey,
      authResults: `mx.${LIST}; spf=pass smtp.mailfrom=${SIGNED}; dkim=pass header.d=${SIGNED}; dmarc=pass header.from=${SIGNED}`,
      cv: "none"
      // The declarations leave out what createSeal reads: the list's own verdicts and the chain's state so far.
    } as Parameters<typeof sealMessage>[1])
    await sendRaw(Buffer.concat([seal, signed]), `alice@${SIGNED}`, box.address)
    const email = await received(box, subject)
    expect(email.authentication?.arc).toEqual({ result: "pass", domain: LIST })
    expect(email.authentication_results).toMatch(/; arc=pass/)
  })
})
