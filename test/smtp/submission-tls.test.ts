/**
 * The submission port keeps API keys off the network in the clear (src/smtp/submission.ts): with a
 * certificate (SMTP_TLS_CERT / SMTP_TLS_KEY) AUTH needs STARTTLS, and without one a listener on a
 * host other than loopback refuses every AUTH. What is sent once signed in is test/outbound's.
 */
import nodemailer from "nodemailer"
import { beforeAll, describe, expect, it } from "vitest"
import { withApiKey } from "../support/accounts.ts"
import { useCertificate } from "../support/certificate.ts"
import { newBox } from "../support/mailboxes.ts"
import { freePort, type SuiteServer, useSuiteServer } from "../support/server.ts"
import { connectSmtp } from "../support/smtp-client.ts"

const plain = (apiKey: string) => `AUTH PLAIN ${Buffer.from(`\0agent\0${apiKey}`).toString("base64")}`

describe("submission with a certificate", () => {
  const certificate = useCertificate("submission-tls")
  let port: number
  let implicitPort: number
  let suite: SuiteServer
  // Registered before the server's hook, so the port exists when it starts.
  beforeAll(async () => {
    port = await freePort()
    implicitPort = await freePort()
  })
  useSuiteServer((s) => {
    suite = s
  }, {
    ...certificate.env,
    get SUBMISSION_PORT() {
      return String(port)
    },
    get SUBMISSIONS_PORT() {
      return String(implicitPort)
    }
  } as Record<string, string>)

  it("offers and takes AUTH only after STARTTLS, and a client requiring TLS signs in and sends", async () => {
    const box = await newBox(suite.url, { user: await withApiKey(suite.url) })
    const session = await connectSmtp(port)
    const ehlo = await session.command("EHLO client.test")
    // Not offered before (RFC 4954 §4): a client that sees no AUTH sends no key in the clear.
    expect(ehlo.text.split("\n")).toContain("STARTTLS")
    expect(ehlo.text).not.toMatch(/AUTH/)
    expect(await session.command(plain(box.user.apiKey))).toMatchObject({ code: 500 })
    expect(await session.command(`MAIL FROM:<${box.address}>`)).toEqual({ code: 530, text: "5.7.0 Authentication required: STARTTLS, then AUTH" })
    await session.close()

    const sent = await nodemailer.createTransport({
      host: "127.0.0.1",
      port,
      requireTLS: true,
      tls: { rejectUnauthorized: false },
      auth: { user: "agent", pass: box.user.apiKey }
    }).sendMail({ from: box.address, to: box.address, subject: "Over TLS", text: "To myself." })
    expect(sent.response).toMatch(/^250 2\.0\.0 Ok: queued as eml_\w+$/)
  })

  it("takes TLS from the first byte on SUBMISSIONS_PORT (what mail programs call SSL/TLS)", async () => {
    const box = await newBox(suite.url, { user: await withApiKey(suite.url) })
    const sent = await nodemailer.createTransport({
      host: "127.0.0.1",
      port: implicitPort,
      secure: true,
      tls: { rejectUnauthorized: false },
      auth: { user: "agent", pass: box.user.apiKey }
    }).sendMail({ from: box.address, to: box.address, subject: "Over implicit TLS", text: "To myself." })
    expect(sent.response).toMatch(/^250 2\.0\.0 Ok: queued as eml_\w+$/)
  })
})

describe("submission without a certificate on a host other than loopback", () => {
  let port: number
  let suite: SuiteServer
  beforeAll(async () => {
    port = await freePort()
  })
  useSuiteServer((s) => {
    suite = s
  }, {
    SUBMISSION_HOST: "0.0.0.0",
    get SUBMISSION_PORT() {
      return String(port)
    }
  } as Record<string, string>)

  it("refuses every AUTH, so that no key crosses the network in the clear", async () => {
    const user = await withApiKey(suite.url)
    const session = await connectSmtp(port)
    await session.command("EHLO client.test")
    expect(await session.command(plain(user.apiKey))).toEqual({ code: 538, text: "5.7.11 Encryption required: this server takes API keys over TLS only" })
    await session.close()
  })
})
