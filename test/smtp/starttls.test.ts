/**
 * STARTTLS: offered only when SMTP_TLS_CERT and SMTP_TLS_KEY are set, and then a client that requires
 * TLS delivers over it.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import nodemailer from "nodemailer"
import { afterAll, expect, it } from "vitest"
import { client, withApiKey } from "../support/http.ts"
import { type Server, useSuiteServer } from "../support/server.ts"
import { connectSmtp } from "../support/smtp-client.ts"

const certDir = fs.mkdtempSync(path.join(os.tmpdir(), "mailroom-tls-"))
const cert = path.join(certDir, "cert.pem")
const key = path.join(certDir, "key.pem")
execFileSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-days", "1", "-keyout", key, "-out", cert], {
  stdio: "ignore"
})
afterAll(() => fs.rmSync(certDir, { recursive: true, force: true }))

let server: Server
useSuiteServer((suite) => (server = suite.server), { SMTP_TLS_CERT: cert, SMTP_TLS_KEY: key })

it("offers STARTTLS and delivers to a client that requires it", async () => {
  const session = await connectSmtp(server.smtpPort)
  const ehlo = await session.command("EHLO client.test")
  await session.close()
  expect(ehlo.text.split("\n")).toContain("STARTTLS")

  const api = client(server.url)
  const user = await withApiKey(api)
  const created = await api.post("/v1/api/mailboxes", { apiKey: user.apiKey, body: { local_part: `secure${Date.now()}`, domain: "agents.localhost" } })
  const mailbox = created.body.mailbox
  // requireTLS: nodemailer refuses to send unless STARTTLS succeeds.
  const mailer = nodemailer.createTransport({
    host: "127.0.0.1",
    port: server.smtpPort,
    secure: false,
    requireTLS: true,
    tls: { rejectUnauthorized: false }
  })
  const info = await mailer.sendMail({ from: "sender@example.com", to: mailbox.email_address, subject: "Over TLS", text: "encrypted in transit" })
  mailer.close()
  expect(info.response).toMatch(/^250 /)

  const deadline = Date.now() + 30_000
  for (;;) {
    const list = await api.get(`/v1/api/mailboxes/${mailbox.mailbox_id}/emails`, { apiKey: user.apiKey })
    if (list.body.meta?.total === 1) {
      expect(list.body.data[0].subject).toBe("Over TLS")
      break
    }
    if (Date.now() > deadline) throw new Error("the message sent over TLS never arrived")
    await new Promise((resolve) => setTimeout(resolve, 500))
  }
})
