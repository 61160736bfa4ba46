/**
 * `npm run screenshots`: every dashboard page at desktop width (1280 px) and phone width (375 px),
 * into docs/screenshots/. Runs the product as users do (a fresh server on a throwaway DATA_DIR),
 * fills it with a little mail over SMTP, and drives Debian's chromium through playwright-core.
 */
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import { CHROMIUM, chromiumAvailable, launchBrowser, openPage, type WatchedPage } from "../test/support/browser.ts"
import { startDnsServer } from "../test/support/dns-server.ts"
import { startMxServer } from "../test/support/mx-server.ts"
import { freePort, repoRoot, startServer } from "../test/support/process.ts"
import { sendMail } from "../test/support/send-mail.ts"
import { createDataDir } from "../test/support/services.ts"

if (!chromiumAvailable()) {
  console.error(`${CHROMIUM} is absent: install Debian's chromium (or set CHROMIUM_PATH)`)
  process.exit(1)
}

const outDir = path.join(repoRoot, "docs/screenshots")
fs.mkdirSync(outDir, { recursive: true })
const dataDir = createDataDir()
const port = await freePort()
// Mail the walk sends goes to a receiving server of this script (example.com's MX, in a DNS server of
// its own), which also publishes the custom domain's ownership record.
const mx = await startMxServer()
const names = await startDnsServer()
names.set("example.com", { MX: [{ preference: 10, exchange: "mx.example.com" }] })
names.set("mx.example.com", { A: ["127.0.0.1"] })
// WEBHOOK_ALLOW_PRIVATE: the webhook page's receiver is this script's, on 127.0.0.1.
const server = await startServer({
  DATA_DIR: dataDir.dir,
  PORT: String(port),
  APP_URL: `http://127.0.0.1:${port}`,
  WEBHOOK_ALLOW_PRIVATE: "true",
  DNS_SERVERS: names.address,
  OUTBOUND_SMTP_PORT: String(mx.port),
  // The receiving server is on 127.0.0.1, which the mta refuses by default.
  OUTBOUND_ALLOW_PRIVATE: "true",
  // The API keys page then says how mail programs send with a key.
  SUBMISSION_PORT: String(await freePort())
})
const browser = await launchBrowser()

const viewports = { desktop: { width: 1280, height: 800 }, mobile: { width: 375, height: 740 } } as const

/** The walk's page, for what a failure shows. */
let walked: WatchedPage | undefined
try {
  walked = await openPage(browser, server.url, viewports.desktop)
  const { page, problems } = walked
  /** The page as it is now, at each width. */
  const shoot = async (name: string) => {
    for (const [viewport, size] of Object.entries(viewports)) {
      await page.setViewportSize(size)
      // Chromium does not paint a mail frame that is wholly below the fold, even in a full-page
      // picture: the page is scrolled to it (a full-page picture starts at the top all the same).
      await page.evaluate(`document.querySelector("iframe")?.scrollIntoView()`)
      await page.waitForTimeout(500)
      await page.screenshot({ path: path.join(outDir, `${name}-${viewport}.png`), fullPage: true })
    }
    await page.setViewportSize(viewports.desktop)
  }

  await page.goto("/")
  await page.getByRole("heading", { name: "Sign in" }).waitFor()
  await shoot("sign-in")
  await page.getByRole("link", { name: "Forgot your password?" }).click()
  await page.getByRole("heading", { name: "Forgot your password?" }).waitFor()
  await shoot("forgot-password")
  await page.getByRole("link", { name: "Sign in" }).click()
  await page.getByRole("link", { name: "Create an account" }).click()
  await page.getByRole("heading", { name: "Create your account" }).waitFor()
  await shoot("sign-up")
  await page.getByLabel("Name").fill("Ada Operator")
  await page.getByLabel("Email").fill("ada@example.com")
  await page.getByLabel("Password").fill("correct horse battery")
  await page.getByRole("button", { name: "Sign up" }).click()
  await page.getByRole("heading", { name: "Mailboxes" }).waitFor()

  for (const local of ["support-agent", "billing-bot"]) {
    await page.getByLabel("New mailbox address").fill(local)
    await page.getByText("is available").waitFor()
    await page.getByRole("button", { name: "Create mailbox" }).click()
    await page.getByRole("link", { name: new RegExp(`^${local}@`) }).waitFor()
  }
  await page.getByLabel("New mailbox address").fill("ops")
  await page.getByText(/at least 5/i).waitFor()
  await shoot("mailboxes")

  await page.getByRole("link", { name: "API keys" }).click()
  await page.getByLabel("New key name").fill("operations")
  await page.getByRole("button", { name: "Create key" }).click()
  const apiKey = (await page.getByTestId("new-key").textContent())!
  await page.getByRole("button", { name: "Done" }).click()
  // An agent's own key: limited to its mailbox.
  await page.getByLabel("New key name").fill("support agent")
  await page.getByRole("checkbox", { name: /^support-agent@/ }).check()
  await page.getByRole("button", { name: "Create key" }).click()
  await page.getByText(/^Only support-agent@/).waitFor()
  await shoot("api-keys")
  // Pro, through checkout as a customer upgrades: the walk sends and searches faster than a person.
  await page.getByRole("link", { name: "Billing" }).click()
  await page.getByRole("button", { name: "Upgrade to Pro" }).click()
  await page.getByRole("button", { name: "Confirm and pay" }).click()
  await page.getByRole("heading", { name: "Plan: Pro" }).waitFor()

  const address = "support-agent@agents.localhost"
  const mails = [
    { subject: "Refund request for order 1042", text: "Hello, the blender arrived broken. Could I get a refund?" },
    { subject: "Re: Onboarding call", text: "Thursday at 10 works for us.", attachments: [{ filename: "agenda.pdf", content: "%PDF-1.4 agenda" }] },
    {
      subject: "Your March invoice",
      text: "Invoice attached.",
      html: `<h2 style="color:#0b5">March invoice</h2><p>Total due: <strong>$129.00</strong></p>` +
        `<p><a href="https://example.com/pay">Pay online</a></p><img src="https://tracker.example/open.gif" alt="">`
    }
  ]
  for (const mail of mails) await sendMail(server.smtpPort, { to: address, from: "Customer <customer@example.com>", ...mail })

  await page.getByRole("link", { name: "Mailboxes" }).click()
  await page.getByRole("link", { name: address }).click()
  await page.getByRole("link", { name: /March invoice/ }).waitFor({ timeout: 15_000 })
  await shoot("inbox")
  // Two emails chosen, to act on together.
  await page.getByRole("checkbox", { name: /^Choose "Refund request/ }).check()
  await page.getByRole("checkbox", { name: /^Choose "Your March invoice"/ }).check()
  await page.getByRole("button", { name: "Delete 2 emails" }).click()
  await shoot("inbox-chosen")
  await page.getByRole("button", { name: "Keep it" }).click()
  await page.getByRole("checkbox", { name: "Choose every email on this page" }).uncheck()
  // Grouped by conversation, one chosen.
  await page.getByRole("checkbox", { name: "Group by conversation" }).check()
  await page.getByRole("checkbox", { name: /^Choose the conversation "Re: Onboarding call"/ }).check()
  await shoot("conversations-chosen")
  await page.getByRole("checkbox", { name: "Group by conversation" }).uncheck()
  await page.getByRole("link", { name: "Inbox", exact: true }).click()
  await page.getByRole("link", { name: /March invoice/ }).waitFor()
  await shoot("all-mail")
  await page.getByRole("link", { name: /March invoice/ }).click()
  await page.getByText("Remote images are blocked").waitFor()
  await page.getByLabel("New label").fill("accounts")
  await page.getByRole("button", { name: "Add label" }).click()
  await page.getByRole("button", { name: "Remove label accounts" }).waitFor()
  await shoot("email")

  // A reply from the reader, then the conversation it makes.
  await page.getByRole("link", { name: "Inbox", exact: true }).click()
  await page.getByRole("link", { name: /Refund request/ }).click()
  await page.getByRole("button", { name: "Reply", exact: true }).click()
  await page.getByLabel("Your reply").fill("Sorry to hear that! A refund of $49.00 is on its way; no need to send the blender back.")
  await shoot("reply")
  await page.getByRole("button", { name: "Send reply" }).click()
  await page.getByRole("table", { name: "Delivery" }).getByText("sent", { exact: true }).waitFor({ timeout: 15_000 })
  await shoot("sent-email")
  await page.getByRole("link", { name: "Read the whole conversation" }).click()
  await page.getByRole("list", { name: "Messages" }).getByRole("listitem").nth(1).waitFor()
  await page.getByText("A refund of $49.00").waitFor()
  await shoot("conversation")

  // (The page's "Back to the inbox" goes where the list was left, All mail too: the mailbox is asked for.)
  const mailboxList = await fetch(`${server.url}/v1/api/mailboxes?limit=100`, { headers: { "x-api-key": apiKey } })
  const { mailboxes } = (await mailboxList.json()) as { mailboxes: Array<{ mailbox_id: string; email_address: string }> }
  const mailboxId = mailboxes.find((mailbox) => mailbox.email_address === address)!.mailbox_id
  await page.goto(`/#/mailboxes/${mailboxId}/compose`)
  await page.getByLabel("To").fill("Grace Hopper <grace@example.com>")
  await page.getByLabel("Subject").fill("Your onboarding call")
  await page.getByLabel("Message").fill("Hi Grace,\n\nThursday at 10 works for us. The agenda is attached to the invitation.\n\nSupport agent")
  await shoot("compose")

  // Drafts an agent wrote for a person to approve.
  const draft = async (body: unknown) => {
    const response = await fetch(`${server.url}/v1/api/mailboxes/${mailboxId}/drafts`, {
      method: "POST",
      headers: { "x-api-key": apiKey, "content-type": "application/json" },
      body: JSON.stringify(body)
    })
    if (response.status !== 201) throw new Error(`Creating a draft: ${response.status} ${await response.text()}`)
  }
  await draft({ to: ["finance@example.com"], subject: "Refund approval: order 1042", text: "Please approve a refund of $49.00 for order 1042 (item arrived broken)." })
  await draft({ to: [{ name: "Customer", address: "customer@example.com" }], subject: "Re: Your March invoice", text: "Thanks, the invoice is paid. Receipt attached to your account." })
  await page.getByRole("link", { name: "Drafts", exact: true }).click()
  await page.getByRole("heading", { name: "Awaiting approval (2)" }).waitFor()
  await page.getByRole("listitem", { name: "Draft: Refund approval: order 1042" }).getByRole("button", { name: "Edit" }).click()
  await shoot("drafts")

  await page.getByRole("link", { name: "Search" }).click()
  // A question the March invoice answers strongly enough to be shown (weak matches, below 0.30, are left out).
  await page.getByLabel(/Search your mail/).fill("how much is the March invoice")
  const hit = page.getByRole("list", { name: "Results" }).getByRole("link").first()
  for (let tries = 0; tries < 30 && (await hit.count()) === 0; tries++) {
    await page.getByRole("button", { name: "Search", exact: true }).click()
    await page.getByRole("list", { name: "Results" }).or(page.getByText("Nothing found")).waitFor()
    if ((await hit.count()) === 0) await page.waitForTimeout(1000)
  }
  await hit.waitFor({ timeout: 1000 })
  await shoot("search")

  // The account's senders: a domain blocked, a partner allowed.
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Senders" }).click()
  for (const [list, entry] of [["block", "*.spam.example"], ["allow", "example.com"]] as const) {
    await page.getByLabel(`Address or domain to add to the ${list} list`).fill(entry)
    await page.getByRole("form", { name: `Add to the ${list} list` }).getByRole("button", { name: "Add" }).click()
    await page.getByRole("list", { name: `${list[0]!.toUpperCase()}${list.slice(1)} list` }).getByText(entry).waitFor()
  }
  await shoot("senders")
  // Taken off again: the walk's later mail comes from other senders too.
  await page.getByRole("button", { name: "Remove example.com from the allow list" }).click()
  await page.getByRole("list", { name: "Allow list" }).waitFor({ state: "detached" })

  // The support mailbox's mail forwarded: to the account's billing mailbox at once, to a person once they agree.
  await page.goto(`/#/mailboxes/${mailboxId}/forwarding`)
  for (const to of ["billing-bot@agents.localhost", "team-lead@example.com"]) {
    await page.getByLabel("Address to forward to").fill(to)
    await page.getByRole("form", { name: "Forward to an address" }).getByRole("button", { name: "Forward" }).click()
    await page.getByRole("list", { name: "Forwarding addresses" }).getByText(to).waitFor()
  }
  await shoot("forwarding")
  // Stopped again: the webhook's delivery log below shows one email's event.
  await page.getByRole("button", { name: "Stop forwarding to billing-bot@agents.localhost" }).click()
  await page.getByRole("list", { name: "Forwarding addresses" }).getByText("billing-bot@agents.localhost").waitFor({ state: "detached" })

  // The support mailbox's automatic reply over the holidays (turned off again: later mail is the walk's own).
  await page.goto(`/#/mailboxes/${mailboxId}/auto-reply`)
  await page.getByLabel("Subject (empty: Re: and the subject answered)").fill("Support is closed until January 2")
  await page.getByLabel("Message").fill("Thanks for writing. Our support desk is closed over the holidays; your message will be answered on January 2.")
  await page.getByLabel("From (empty: now)").fill("2026-12-24T00:00")
  await page.getByLabel("Until (empty: until turned off)").fill("2027-01-02T09:00")
  await page.getByRole("button", { name: "Turn on" }).click()
  await page.getByRole("status").getByText(/^Scheduled:/).waitFor()
  await shoot("auto-reply")
  await page.getByRole("button", { name: "Turn off" }).click()
  await page.getByRole("status").getByText(/^Off:/).waitFor()

  // A receiver that takes every delivery, so the log has a success to show.
  let delivered = 0
  const receiver = http.createServer((_request, response) => (delivered++, response.writeHead(204).end()))
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve))
  await page.getByRole("link", { name: "Webhooks" }).click()
  await page.getByLabel("Endpoint URL").fill(`http://127.0.0.1:${(receiver.address() as AddressInfo).port}/mailroom`)
  await page.getByRole("button", { name: "Create webhook" }).click()
  await page.getByTestId("new-secret").waitFor()
  await sendMail(server.smtpPort, { to: address, from: "Customer <customer@example.com>", subject: "Thanks!", text: "All sorted." })
  // The log is read when opened: opened once the receiver has taken the delivery.
  for (let waited = 0; delivered === 0 && waited < 30_000; waited += 100) await new Promise((resolve) => setTimeout(resolve, 100))
  await page.getByRole("button", { name: "Deliveries" }).click()
  await page.getByRole("row", { name: /email\.received/ }).waitFor()
  await shoot("webhooks")
  receiver.close()

  await page.getByRole("link", { name: "Domains" }).click()
  await page.getByLabel("Domain", { exact: true }).fill("mail.acme-robots.com")
  await page.getByRole("button", { name: "Add domain" }).click()
  await page.getByRole("table", { name: "DNS records of mail.acme-robots.com" }).waitFor()
  await shoot("domains")

  // The domain verified, a mailbox on it, and its migration to the shared domain previewed.
  const listed = (await page.evaluate(() => fetch("/api/domains").then((r) => r.json()))) as {
    data: Array<{ domain_name: string; verification_token: string }>
  }
  names.set("mail.acme-robots.com", { TXT: [[listed.data[0]!.verification_token]] })
  await page.getByRole("button", { name: "Done" }).click()
  await page.getByRole("button", { name: "Verify" }).click()
  await page.getByText("Verified.").waitFor()
  await page.getByRole("link", { name: "Mailboxes" }).click()
  for (const local of ["support-agent", "orders"]) {
    await page.getByLabel("New mailbox address").fill(local)
    await page.locator("#new-domain").selectOption("mail.acme-robots.com")
    await page.getByText("is available").waitFor()
    await page.getByRole("button", { name: "Create mailbox" }).click()
    await page.getByRole("link", { name: `${local}@mail.acme-robots.com` }).waitFor()
  }
  await page.getByRole("link", { name: "Domains" }).click()
  await page.getByRole("button", { name: "Migrate mailboxes of mail.acme-robots.com" }).click()
  await page.getByRole("button", { name: "Preview" }).click()
  await page.getByRole("table", { name: "Migration preview" }).waitFor()
  await shoot("domain-migration")

  await page.getByRole("link", { name: "Billing" }).click()
  await page.getByRole("progressbar", { name: "Storage" }).waitFor()
  await shoot("billing")

  // The account page with a password change done, and the account's activity shown.
  await page.locator(".who a").click()
  await page.getByLabel("Current password").fill("correct horse battery")
  await page.getByLabel("New password", { exact: true }).fill("a better passphrase")
  await page.getByLabel("New password, again").fill("a better passphrase")
  await page.getByRole("button", { name: "Change password" }).click()
  await page.getByText(/^Password changed\./).waitFor()
  await page.getByRole("button", { name: "Show activity" }).click()
  await page.getByRole("list", { name: "Activity" }).waitFor()
  await shoot("account")

  // Two-factor sign-in being turned on: the secret as a QR code and as text, and the code asked.
  const twoFactor = page.getByRole("region", { name: "Two-factor sign-in" })
  await twoFactor.getByRole("button", { name: "Turn on…" }).click()
  await twoFactor.getByLabel("Password").fill("a better passphrase")
  await twoFactor.getByRole("button", { name: "Continue" }).click()
  await twoFactor.getByRole("img", { name: "QR code of the authenticator app's secret" }).waitFor()
  await shoot("two-factor")

  if (problems.length > 0) console.warn("The walk saw problems:\n" + problems.join("\n"))
  console.log(`Screenshots in ${path.relative(repoRoot, outDir)}/`)
} catch (failure) {
  // A step that waited in vain says only what it waited for: the page as it was, and what it saw.
  if (walked !== undefined) {
    const picture = path.join(os.tmpdir(), "mailroom-screenshots-failure.png")
    await walked.page.screenshot({ path: picture, fullPage: true }).catch(() => undefined)
    console.error(`The walk failed at ${walked.page.url()} (${picture}); it saw:\n${walked.problems.join("\n") || "(no problems)"}`)
  }
  throw failure
} finally {
  await browser.close()
  await server.stop()
  await mx.close()
  await names.close()
  dataDir.remove()
}
