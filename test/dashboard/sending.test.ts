/**
 * The dashboard's writing side in a real browser (issue 21): composing and replying, the drafts an
 * agent wrote reviewed, edited, approved or rejected by a person, labels edited on an email, a
 * conversation read whole, and a custom domain's mailboxes migrated after a dry run. Outbound mail
 * goes to a receiving SMTP server this suite runs (OUTBOUND_SMTP_PORT), found through a DNS server it
 * runs (DNS_SERVERS), which also publishes the custom domain's ownership record. Every result is
 * checked through the API as well as on the page; every refusal the page shows is the server's own,
 * and it is the only failed request of the suite.
 */
import { simpleParser } from "mailparser"
import type { Browser, Page } from "playwright-core"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { createClient, type operations } from "../../packages/client/src/fetch-client.ts"
import { signUp } from "../support/accounts.ts"
import { chromiumAvailable, CHROMIUM, closeDashboardSuite, launchBrowser, openPage, signUpWithMailbox, takeRefusals, type WatchedPage } from "../support/browser.ts"
import { tellOnFailure } from "../support/tell-on-failure.ts"
import { type DnsServer, startDnsServer } from "../support/dns-server.ts"
import { fresh } from "../support/mailboxes.ts"
import { deliveredWithSubject, type MxServer, recipientsWithSubject, startMxServer } from "../support/mx-server.ts"
import { feedbackReport } from "../support/reports.ts"
import { makePdf } from "../support/pdf.ts"
import { sendMail } from "../support/send-mail.ts"
import { createBackend, freePort, type Backend, type Server, startServer } from "../support/server.ts"
import { withKey } from "../support/typed-client.ts"
import { sleep, until } from "../support/wait.ts"

const runnable = chromiumAvailable() || Boolean(process.env.CI)
if (!runnable) console.warn(`Skipping the dashboard sending suite: ${CHROMIUM} is absent (install Debian's chromium; CI always runs it)`)

const SHARED = "agents.localhost"

describe.skipIf(!runnable)("the dashboard: sending, drafts, labels, conversations, migration", () => {
  let backend: Backend
  let server: Server
  let browser: Browser
  let mx: MxServer
  let names: DnsServer
  let watched: WatchedPage
  let page: Page
  const localPart = fresh("desk")
  const address = `${localPart}@${SHARED}`
  let mailboxId = ""
  let inboundId = ""
  /** Sent emails whose pages show a Delivery table (one delivered, one bounced with the MX's long answer). */
  const sentIds: Array<string> = []

  /** A request made by the page itself, with its session (its cookie, its origin): the page records what is refused. */
  const fetchInPage = async (input: string | URL | Request, init?: RequestInit) => {
    const request = new Request(input, init)
    const url = new URL(request.url)
    const body = request.body === null ? undefined : await request.text()
    const answer = await page.evaluate(async ([path, method, headers, body]) => {
      const response = await fetch(path, { method, headers, ...(body === undefined ? {} : { body }) })
      return { status: response.status, headers: [...response.headers], text: await response.text() }
    }, [`${url.pathname}${url.search}`, request.method, Object.fromEntries(request.headers), body] as const)
    return new Response(answer.text === "" ? null : answer.text, { status: answer.status, headers: answer.headers })
  }
  /** The typed client on the page's session. */
  const dashboard = () => createClient({ baseUrl: server.url, fetch: fetchInPage })
  const emailOf = (emailId: string) => dashboard().GET("/api/emails/{emailId}", { params: { path: { emailId } } })
  /**
   * The suite's own waits (mail arriving, a delivery's state changing) read with an API key of their
   * own: a key counts against its own limit, not the person's session, whose walk here comes near
   * Enterprise's 500 requests a minute by itself (a CI run's session saw a 429, and a page went without its mailboxes).
   */
  let probeKey: { readonly apiKey: string } | undefined
  const probe = async () => {
    probeKey ??= (await dashboard().POST("/api/api-keys", { body: { name: "the suite's waits" } })).data!.data
    return withKey(server.url, probeKey)
  }
  const inbox = async (query: { limit?: number } = {}) =>
    (await (await probe()).GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId }, query } })).data?.data
  const probedEmail = async (emailId: string) =>
    (await (await probe()).GET("/v1/api/emails/{emailId}", { params: { path: { emailId } } })).data?.data
  const mailboxesOf = async () => (await dashboard().GET("/api/mailboxes")).data!.mailboxes
  const domainsOf = async () => (await dashboard().GET("/api/domains")).data!.data

  /** What the session's answers said is left of its rate limit's window, and when that window resets (Unix seconds). */
  let budget: { limit: number; remaining: number; reset: number } | undefined
  /** The refusals a test provoked on purpose, taken off the page's record of problems. */
  const refusals = (pattern: RegExp) => takeRefusals(watched, pattern)
  /** The message the MX took whose subject is `subject`. */
  const delivered = (subject: string) => deliveredWithSubject(mx, subject)
  /**
   * The mailbox list, shown: so that the page gone to next mounts afresh (two hash changes in a row
   * may render only the last).
   */
  const toMailboxList = async () => {
    await page.goto("/#/")
    await page.getByRole("heading", { level: 1, name: "Mailboxes" }).waitFor()
  }

  /** The page's event stream (live.js), closed or opened as signing out and in do. */
  const stream = (action: "connect" | "disconnect") =>
    page.evaluate(`import(document.querySelector("script[type=module]").src.replace(/main\\.js$/, "live.js")).then((live) => live.${action}())`)
  /** What has the keyboard: its accessible name (aria-label) or its id. */
  const focused = () => page.evaluate("document.activeElement?.getAttribute('aria-label') || document.activeElement?.id || document.activeElement?.tagName")

  beforeAll(async () => {
    mx = await startMxServer()
    names = await startDnsServer()
    names.set("partner.test", { MX: [{ preference: 10, exchange: "mx.partner.test" }] })
    names.set("mx.partner.test", { A: ["127.0.0.1"] })
    backend = await createBackend()
    const port = await freePort()
    server = await startServer({
      ...backend.env,
      PORT: String(port),
      APP_URL: `http://127.0.0.1:${port}`,
      DNS_SERVERS: names.address,
      OUTBOUND_SMTP_PORT: String(mx.port),
      // The receiving server is on 127.0.0.1, which the mta refuses by default.
      OUTBOUND_ALLOW_PRIVATE: "true",
      OUTBOUND_RETRY_DELAYS: "300ms,600ms"
    })
    browser = await launchBrowser()
    watched = await openPage(browser, server.url)
    page = watched.page
    page.on("response", (response) => {
      const headers = response.headers()
      const [limit, remaining, reset] = ["limit", "remaining", "reset"].map((name) => Number(headers[`x-ratelimit-${name}`])) as [number, number, number]
      if (!new URL(response.url()).pathname.startsWith("/api/") || ![limit, remaining, reset].every(Number.isFinite)) return
      // A new window, or a new plan's limit (the upgrade to Enterprise), starts the count afresh.
      if (budget === undefined || reset > budget.reset || limit !== budget.limit) budget = { limit, remaining, reset }
      else if (reset === budget.reset) budget = { limit, remaining: Math.min(remaining, budget.remaining), reset }
    })
  })

  /**
   * The walk is a robot's: on a fast machine it asks more of the session in a minute than Enterprise's
   * 500 requests (a CI run's page went without its mailboxes, refused 429). Like a client honouring the
   * X-RateLimit headers, each test starts with at least a test's worth left (the most any asks is 44),
   * or waits for the window to reset.
   */
  beforeEach(async () => {
    if (budget !== undefined && budget.remaining < 60 && budget.reset * 1000 > Date.now()) await sleep(budget.reset * 1000 - Date.now() + 250)
  })

  tellOnFailure(() => server, () => watched)

  afterAll(() => closeDashboardSuite({ browser, server, backend }, mx, names))

  it("signs up, moves to the enterprise plan (the walk makes many requests a minute) and makes a mailbox", async () => {
    await signUpWithMailbox(page, { name: "Grace Reviewer", email: `${fresh("grace")}@example.com`, localPart, address })
    const listed = await mailboxesOf()
    mailboxId = listed.find((m) => m.email_address === address)!.mailbox_id
    expect(mailboxId).toMatch(/^mbx_/)
  })

  it("offers no plan below enterprise as an upgrade, only the billing portal", async () => {
    await page.getByRole("link", { name: "Billing" }).click()
    await page.getByRole("heading", { name: "Plan: Enterprise" }).waitFor()
    await page.getByRole("button", { name: "Manage in the billing portal" }).waitFor()
    await expect(page.getByRole("button", { name: /^Upgrade to/ }).count()).resolves.toBe(0)
    expect((await dashboard().GET("/api/billing/subscription")).data?.data.plan).toBe("enterprise")
    await page.getByRole("link", { name: "Mailboxes" }).click()
    await page.getByRole("link", { name: address }).waitFor()
  })

  it("composes a new email and sends it: the MX receives it, the reader shows it delivered", async () => {
    await page.getByRole("link", { name: address }).click()
    await page.getByRole("link", { name: "New email" }).click()
    await page.getByRole("heading", { name: "New email" }).waitFor()
    await page.getByText(`From ${address}`).waitFor()
    await page.getByLabel("To").fill("Ada Lovelace <ada@partner.test>")
    await page.getByLabel("Subject").fill("Your order has shipped")
    await page.getByLabel("Message").fill("Hello Ada,\nyour order left the warehouse today.")
    await page.getByRole("button", { name: "Send", exact: true }).click()

    await page.getByRole("heading", { name: "Your order has shipped" }).waitFor()
    const { message, parsed } = await delivered("Your order has shipped")
    expect(message.rcptTo).toEqual(["ada@partner.test"])
    expect(parsed.from?.text).toBe(address)
    expect(parsed.to).toMatchObject({ value: [{ name: "Ada Lovelace", address: "ada@partner.test" }] })
    expect(parsed.text?.trim()).toBe("Hello Ada,\nyour order left the warehouse today.")
    // The page asks again until the mta has an answer for every recipient.
    const row = page.getByRole("table", { name: "Delivery" }).getByRole("row", { name: /ada@partner\.test/ })
    await row.getByText("sent", { exact: true }).waitFor({ timeout: 15_000 })

    const emailId = new URL(page.url()).hash.split("/").pop()!
    sentIds.push(emailId)
    const email = await emailOf(emailId)
    expect(email.data?.data).toMatchObject({
      direction: "outbound",
      mailbox_id: mailboxId,
      subject: "Your order has shipped",
      labels: ["sent"],
      delivery: [{ recipient: "ada@partner.test", status: "sent" }]
    })

    // The mailbox's page counts it: sent, its recipient reached, nothing bounced.
    await page.getByRole("link", { name: "Mailboxes" }).click()
    await page.getByRole("link", { name: address }).click()
    await page.getByTestId("stats").getByText("Last 30 days: 0 received · 1 email sent · 1 recipient reached · 0 bounced (0%)").waitFor()

  })

  it("shows a spam complaint: by the recipient's delivery in the reader, and counted with a warning on the mailbox's page", async () => {
    const to = "grumpy@partner.test"
    const sent = await dashboard().POST("/api/mailboxes/{mailboxId}/send", { params: { path: { mailboxId } }, body: { to: [to], subject: "Our offer", text: "Buy now." } })
    const emailId = sent.data!.data.email_id
    await until("the offer delivered", async () => (await probedEmail(emailId))?.delivery?.[0]?.status === "sent" || undefined)
    // The recipient's provider reports that they marked it as spam (ARF, to the email's bounce address).
    const bounceAddress = mx.delivered().find((m) => m.raw.includes(`Message-ID: <${emailId}@`))!.mailFrom
    await sendMail(server.smtpPort, { envelope: { from: "", to: [bounceAddress] }, raw: feedbackReport(emailId, "abuse") })
    await until("the complaint applied", async () => (await probedEmail(emailId))?.delivery?.[0]?.complained_at ?? undefined)

    await page.goto(`/#/emails/${emailId}`)
    const row = page.getByRole("table", { name: "Delivery" }).getByRole("row", { name: new RegExp(to.replace(/\./g, "\\.")) })
    await row.getByText("reported as spam").waitFor()
    await page.goto(`/#/mailboxes/${mailboxId}`)
    await page.getByTestId("stats").getByText("Last 30 days: 0 received · 2 emails sent · 2 recipients reached · 0 bounced (0%) · 1 spam complaint (50%)").waitFor()
    await page.getByTestId("stats").getByText(/More than 0\.3% of recipients reported its mail as spam/).waitFor()
    // Lifted again: the suite's later checks of the suppression list start from the bounce they make.
    expect((await dashboard().DELETE("/api/suppressions/{address}", { params: { path: { address: to } } })).response.status).toBe(200)
  })

  it("names the mailbox: the server's refusal shows by the field, compose shows the name, sent mail carries it; cleared, the From is bare", async () => {
    await page.getByRole("link", { name: "Mailboxes" }).click()
    const nameField = page.getByLabel("Name shown to recipients (optional)").last()
    await page.getByRole("button", { name: `Set the name of ${address}` }).click()
    await nameField.fill("x".repeat(101))
    await page.getByText("At most 100 characters").waitFor()
    await expect(page.getByRole("button", { name: "Save name" }).isDisabled()).resolves.toBe(true)
    // A direction override reads differently from how it is written: the server refuses it, by the field.
    await nameField.fill("Pay\u202Eliaven")
    await page.getByRole("button", { name: "Save name" }).click()
    await page.getByText("must not hold line breaks, control characters or direction overrides").first().waitFor()
    expect(refusals(/^400 PATCH /)).toEqual([`400 PATCH ${server.url}/api/mailboxes/${mailboxId}`])

    await nameField.fill("Grace's Agent")
    await page.getByRole("button", { name: "Save name" }).click()
    await page.getByText("(Grace's Agent)").waitFor()
    expect((await mailboxesOf()).find((m) => m.mailbox_id === mailboxId)?.display_name).toBe("Grace's Agent")

    await page.getByRole("link", { name: address }).click()
    await page.getByRole("link", { name: "New email" }).click()
    await page.getByText(`From Grace's Agent <${address}>`).waitFor()
    await page.getByLabel("To").fill("ada@partner.test")
    await page.getByLabel("Bcc").fill("Boss <boss@partner.test>")
    await page.getByLabel("Subject").fill("From a named mailbox")
    await page.getByLabel("Message").fill("Hello again.")
    await page.getByRole("button", { name: "Send", exact: true }).click()
    await page.getByRole("heading", { name: "From a named mailbox" }).waitFor()
    const named = await delivered("From a named mailbox")
    expect(named.parsed.from?.value).toEqual([{ name: "Grace's Agent", address }])
    // The Bcc recipient gets it too (in the same delivery or one of its own), and no header says so.
    const copies = await until("a copy for each recipient", async () => {
      const received = await Promise.all(mx.delivered().map(async (message) => ({ message, parsed: await simpleParser(message.raw) })))
      const ours = received.filter(({ parsed }) => parsed.subject === "From a named mailbox")
      return ours.flatMap(({ message }) => message.rcptTo).length === 2 ? ours : undefined
    })
    expect(copies.flatMap(({ message }) => message.rcptTo).sort()).toEqual(["ada@partner.test", "boss@partner.test"])
    for (const { parsed } of copies) expect(parsed.headers.has("bcc")).toBe(false)
    sentIds.push(new URL(page.url()).hash.split("/").pop()!)

    await page.getByRole("link", { name: "Mailboxes" }).click()
    await page.getByRole("button", { name: `Set the name of ${address}` }).click()
    await nameField.fill("")
    await page.getByRole("button", { name: "Save name" }).click()
    await page.getByText("(Grace's Agent)").waitFor({ state: "detached" })
    expect((await mailboxesOf()).find((m) => m.mailbox_id === mailboxId)?.display_name).toBeNull()
  })

  it("shows a refused send: a malformed address by its field, a suppressed recipient by the server's reason; nothing is sent", async () => {
    const before = mx.delivered().length
    await page.goto(`/#/mailboxes/${mailboxId}/compose`)
    await page.getByLabel("To").fill("ada@partner.test, not an address")
    await page.getByLabel("Subject").fill("Never sent")
    await page.getByLabel("Message").fill("This should not leave.")
    await page.getByRole("button", { name: "Send", exact: true }).click()
    // By its field: the note under To names the address and says what is wrong; the alert below the
    // form says it by the form's labels, not the request's ("to.1").
    await page.getByText("“not an address” must be an email address such as name@example.com", { exact: true }).waitFor()
    await page.getByRole("alert").getByText("To, item 2: must be an email address such as name@example.com", { exact: true }).waitFor()
    await expect(page.getByLabel("To").getAttribute("aria-invalid")).resolves.toBe("true")
    // The keyboard is at what to fix, not dropped on the page.
    await expect.poll(focused).toBe("compose-to")
    expect(refusals(/\/send$/)).toEqual([`400 POST ${server.url}/api/mailboxes/${mailboxId}/send`])

    // An address that bounces for good is suppressed; the next send to it is refused before it is stored.
    const gone = `${fresh("gone")}@partner.test`
    mx.script(gone, [550])
    await page.getByLabel("To").fill(gone)
    await page.getByLabel("Subject").fill("Anyone there?")
    await page.getByRole("button", { name: "Send", exact: true }).click()
    await page.getByRole("heading", { name: "Anyone there?" }).waitFor()
    await page.getByRole("table", { name: "Delivery" }).getByText("bounced", { exact: true }).waitFor({ timeout: 15_000 })
    await page.getByText("550 5.1.1 No such user here").waitFor()
    sentIds.push(new URL(page.url()).hash.split("/").pop()!)

    await page.goto(`/#/mailboxes/${mailboxId}/compose`)
    await page.getByLabel("To").fill(gone)
    await page.getByLabel("Subject").fill("Second try")
    await page.getByLabel("Message").fill("Still there?")
    await page.getByRole("button", { name: "Send", exact: true }).click()
    await expect(page.getByRole("alert").textContent()).resolves.toBe(`Not sent: ${gone} bounced before and is suppressed`)
    expect(refusals(/\/send$/)).toEqual([`422 POST ${server.url}/api/mailboxes/${mailboxId}/send`])
    // The page stays where it was, with what was written.
    await expect(page.getByLabel("Message").inputValue()).resolves.toBe("Still there?")

    const suppressed = await dashboard().GET("/api/suppressions")
    expect(suppressed.data?.data.map((s) => s.address)).toEqual([gone])
    const sent = await dashboard().GET("/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId }, query: { direction: "outbound" } } })
    expect(sent.data?.data.map((e) => e.subject).sort()).toEqual(["Anyone there?", "From a named mailbox", "Our offer", "Your order has shipped"])
    expect(mx.delivered().length).toBe(before)
  })

  it("manages senders: the account's block list (a malformed entry refused by its field), a mailbox's allow list, a suppression lifted", async () => {
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Senders" }).click()
    await page.getByRole("heading", { name: "Senders", exact: true }).waitFor()
    const blockField = page.getByLabel("Address or domain to add to the block list")
    await blockField.fill("not a domain")
    await page.getByRole("form", { name: "Add to the block list" }).getByRole("button", { name: "Add" }).click()
    await page.locator("#block-entry-note").getByText(/\S/).waitFor()
    await expect(blockField.getAttribute("aria-invalid")).resolves.toBe("true")
    expect(refusals(/\/lists\/block$/)).toEqual([`400 POST ${server.url}/api/lists/block`])
    await blockField.fill("*.Spam.example")
    await page.getByRole("form", { name: "Add to the block list" }).getByRole("button", { name: "Add" }).click()
    const blocked = page.getByRole("list", { name: "Block list" })
    await blocked.getByText("*.spam.example").waitFor()
    expect((await dashboard().GET("/api/lists/{list}", { params: { path: { list: "block" } } })).data?.data.map((e) => [e.entry, e.type]))
      .toEqual([["*.spam.example", "subdomains"]])
    await page.getByRole("button", { name: "Remove *.spam.example from the block list" }).click()
    await blocked.waitFor({ state: "detached" })
    expect((await dashboard().GET("/api/lists/{list}", { params: { path: { list: "block" } } })).data?.data).toEqual([])

    // The address suppressed by the bounce above: lifted, sending to it is allowed again.
    const [suppressed] = (await dashboard().GET("/api/suppressions")).data!.data
    await page.getByRole("list", { name: "Suppressed recipients" }).getByText(suppressed!.address).waitFor()
    await page.getByRole("button", { name: `Send to ${suppressed!.address} again` }).click()
    await page.getByRole("list", { name: "Suppressed recipients" }).waitFor({ state: "detached" })
    expect((await dashboard().GET("/api/suppressions")).data?.data).toEqual([])

    // A person asked not to be written to: suppressed by hand (an address the browser takes but Mailroom
    // does not is refused by its field), then lifted.
    const suppressField = page.getByLabel("Address to stop sending to")
    await suppressField.fill("ada@localhost")
    await page.getByRole("form", { name: "Suppress an address" }).getByRole("button", { name: "Suppress" }).click()
    await page.locator("#suppress-address-note").getByText(/\S/).waitFor()
    await expect(suppressField.getAttribute("aria-invalid")).resolves.toBe("true")
    expect(refusals(/\/suppressions$/)).toEqual([`400 POST ${server.url}/api/suppressions`])
    await suppressField.fill("Asked@Partner.test")
    await page.getByRole("form", { name: "Suppress an address" }).getByRole("button", { name: "Suppress" }).click()
    await page.getByRole("list", { name: "Suppressed recipients" }).getByText("added by you").waitFor()
    expect((await dashboard().GET("/api/suppressions")).data?.data.map((s) => [s.address, s.reason])).toEqual([["asked@partner.test", "manual"]])
    await page.getByRole("button", { name: "Send to asked@partner.test again" }).click()
    await page.getByRole("list", { name: "Suppressed recipients" }).waitFor({ state: "detached" })

    // The mailbox's own allow list, from its inbox.
    await page.goto(`/#/mailboxes/${mailboxId}`)
    await page.getByRole("main").getByRole("link", { name: "Senders" }).click()
    await page.getByRole("heading", { name: `Senders of ${address}` }).waitFor()
    await page.getByLabel("Address or domain to add to the allow list").fill("partner.test")
    await page.getByRole("form", { name: "Add to the allow list" }).getByRole("button", { name: "Add" }).click()
    await page.getByRole("list", { name: "Allow list" }).getByText("partner.test").waitFor()
    const allowed = await dashboard().GET("/api/mailboxes/{mailboxId}/lists/{list}", { params: { path: { mailboxId, list: "allow" } } })
    expect(allowed.data?.data.map((e) => [e.entry, e.mailbox_id])).toEqual([["partner.test", mailboxId]])
    // Taken off again: the suite's later mail comes from other senders too.
    await page.getByRole("button", { name: "Remove partner.test from the allow list" }).click()
    await page.getByRole("list", { name: "Allow list" }).waitFor({ state: "detached" })
  })

  it("forwards the mailbox's mail: its own address refused by the field, a person asked by mail and agreeing on the link's page, the copy shown in the reader", async () => {
    await page.goto(`/#/mailboxes/${mailboxId}`)
    await page.getByRole("main").getByRole("link", { name: "Forwarding" }).click()
    await page.getByRole("heading", { name: `Forwarding of ${address}` }).waitFor()
    await page.getByText("Not forwarded anywhere.").waitFor()
    const field = page.getByLabel("Address to forward to")
    await field.fill(address)
    await page.getByRole("form", { name: "Forward to an address" }).getByRole("button", { name: "Forward" }).click()
    await page.locator("#forward-address-note").getByText("is this mailbox's own address").waitFor()
    await expect(field.getAttribute("aria-invalid")).resolves.toBe("true")
    expect(refusals(/\/forwarding$/)).toEqual([`400 POST ${server.url}/api/mailboxes/${mailboxId}/forwarding`])

    const person = `${fresh("reader")}@partner.test`
    await field.fill(person)
    await page.getByRole("form", { name: "Forward to an address" }).getByRole("button", { name: "Forward" }).click()
    await page.getByRole("status").getByText(`A link to confirm was mailed to ${person}`).waitFor()
    await page.getByRole("list", { name: "Forwarding addresses" }).getByText("waiting for confirmation").waitFor()

    // The person opens the link mailed to them and agrees.
    const { parsed } = await delivered(`Confirm forwarding from ${address}`)
    const link = /https?:\/\/\S+\/forwarding\/mrf_[A-Za-z0-9_-]+/.exec(parsed.text ?? "")![0]
    await page.goto(link)
    await page.getByRole("button", { name: "Forward mail to me" }).click()
    await page.getByRole("heading", { name: "Forwarding is on" }).waitFor()
    await page.goto(`/#/mailboxes/${mailboxId}/forwarding`)
    await page.getByRole("list", { name: "Forwarding addresses" }).getByText("forwarding", { exact: true }).waitFor()

    await sendMail(server.smtpPort, { from: "Carol <carol@partner.test>", to: address, subject: "Pass this on", text: "For the person reading along." })
    const copy = await delivered("Pass this on")
    expect(copy.message.rcptTo).toEqual([person])
    const received = await until("the email stored", async () =>
      (await inbox())?.find((e) => e.subject === "Pass this on"))
    await page.goto(`/#/emails/${received.email_id}`)
    const table = page.getByRole("table", { name: "Forwarded to" })
    await table.getByText(person).waitFor()
    await table.getByText("sent", { exact: true }).waitFor()

    // Stopped from the account's side; the email is taken away again (later steps count the inbox).
    await page.goto(`/#/mailboxes/${mailboxId}/forwarding`)
    await page.getByRole("button", { name: `Stop forwarding to ${person}` }).click()
    await page.getByRole("list", { name: "Forwarding addresses" }).waitFor({ state: "detached" })
    expect((await dashboard().GET("/api/mailboxes/{mailboxId}/forwarding", { params: { path: { mailboxId } } })).data?.data).toEqual([])
    expect((await dashboard().DELETE("/api/emails/{emailId}", { params: { path: { emailId: received.email_id } } })).response.status).toBe(200)
  })

  it("turns on an automatic reply (a bad interval refused by its field) that answers a sender as a reply, and off again", async () => {
    await page.goto(`/#/mailboxes/${mailboxId}`)
    await page.getByRole("main").getByRole("link", { name: "Automatic reply" }).click()
    await page.getByRole("heading", { name: `Automatic reply of ${address}` }).waitFor()
    await page.getByRole("status").getByText("Off: received mail is not answered.").waitFor()
    await page.getByLabel("Message").fill("Thanks for writing; the desk reads mail again on Monday.")
    const days = page.getByLabel("Days before answering a sender again")
    await days.fill("0")
    await page.getByRole("button", { name: "Turn on" }).click()
    await page.locator("#auto-reply-days-note").getByText("must be a number between 1 and 30").waitFor()
    expect(refusals(/\/auto-reply$/)).toEqual([`400 PUT ${server.url}/api/mailboxes/${mailboxId}/auto-reply`])
    await days.fill("7")
    await page.getByRole("button", { name: "Turn on" }).click()
    await page.getByRole("status").getByText("On: mail received now is answered.").waitFor()

    await sendMail(server.smtpPort, { from: "Dora <dora@partner.test>", to: address, subject: "Are you there?", text: "Ping." })
    const { message, parsed } = await delivered("Re: Are you there?")
    expect(message.rcptTo).toEqual(["dora@partner.test"])
    expect(parsed.headers.get("auto-submitted")).toBe("auto-replied")
    expect(parsed.text).toContain("the desk reads mail again on Monday")

    await page.getByRole("button", { name: "Turn off" }).click()
    await page.getByRole("status").getByText("Off: received mail is not answered.").waitFor()
    expect((await dashboard().GET("/api/mailboxes/{mailboxId}/auto-reply", { params: { path: { mailboxId } } })).data?.data).toBeNull()
    // Both emails taken away again (later steps count the mailbox's mail).
    const listed = await dashboard().GET("/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId } } })
    for (const email of listed.data!.data.filter((e) => e.subject === "Are you there?" || e.subject === "Re: Are you there?")) {
      expect((await dashboard().DELETE("/api/emails/{emailId}", { params: { path: { emailId: email.email_id } } })).response.status).toBe(200)
    }
  })

  it("replies from the reader: the reply goes to the sender, threaded, and the conversation shows both", async () => {
    await sendMail(server.smtpPort, {
      from: "Bob Buyer <bob@partner.test>",
      to: address,
      subject: "Where is my parcel?",
      text: "Hi, I ordered on Monday and nothing has come yet."
    })
    await page.getByRole("link", { name: "Inbox", exact: true }).click()
    await page.getByRole("link", { name: /Where is my parcel\?/ }).click()
    await page.getByRole("heading", { name: "Where is my parcel?" }).waitFor()
    inboundId = new URL(page.url()).hash.split("/").pop()!

    await page.getByRole("button", { name: "Reply", exact: true }).click()
    await page.getByLabel("Your reply").fill("It left today; you will have it tomorrow.")
    await page.getByRole("button", { name: "Send reply" }).click()
    await page.getByRole("heading", { name: "Re: Where is my parcel?" }).waitFor()
    const { message, parsed } = await delivered("Re: Where is my parcel?")
    expect(message.rcptTo).toEqual(["bob@partner.test"])
    const original = await emailOf(inboundId)
    expect(parsed.inReplyTo).toBe(original.data?.data.message_id)
    const replyId = new URL(page.url()).hash.split("/").pop()!
    const reply = await emailOf(replyId)
    expect(reply.data?.data.thread_id).toBe(original.data?.data.thread_id)
    // The reader's list of the thread names senders as the inbox does.
    await page.getByRole("link", { name: "Bob Buyer · Where is my parcel?" }).waitFor()

    // The conversation, whole: both messages, oldest first, each with its text.
    await page.getByRole("link", { name: "Read the whole conversation" }).click()
    const messages = page.getByRole("list", { name: "Messages" }).getByRole("listitem")
    await messages.nth(1).waitFor()
    await expect(messages.count()).resolves.toBe(2)
    await messages.nth(0).getByText("Hi, I ordered on Monday and nothing has come yet.").waitFor()
    await messages.nth(1).getByText("It left today; you will have it tomorrow.").waitFor()
    await expect(messages.nth(1).getByText("sent", { exact: true }).count()).resolves.toBe(1)

    // The inbox grouped by conversation: the exchange is one line of two messages, unread again here.
    const unread = await dashboard().PATCH("/api/emails/{emailId}", { params: { path: { emailId: inboundId } }, body: { add_labels: ["unread"] } })
    expect(unread.response.status).toBe(200)
    // Opened from All mail, the conversation's Back link returns there; the mailbox's own list is grouped below.
    await page.getByRole("link", { name: "Back to the inbox" }).click()
    await expect.poll(() => new URL(page.url()).hash).toBe("#/inbox")
    // A sent email's row names whom it went to, as a Sent folder does (all of them on hover); a received one its sender.
    const sentRow = page.getByRole("link", { name: /^To bob@partner\.test Re: Where is my parcel\?/ })
    await expect(sentRow.locator(".from").getAttribute("title")).resolves.toBe("bob@partner.test")
    await page.getByRole("link", { name: /^Unread Bob Buyer Where is my parcel\?/ }).waitFor()
    // Show: Sent lists sent mail alone, Received the rest (the API's direction filter), kept in the page's address.
    const rows = () => page.getByRole("list", { name: "Emails" }).getByRole("link").allTextContents()
    const allRows = async (sent: boolean) => {
      const names = await rows()
      return names.length > 0 && names.every((name) => name.startsWith("To ") === sent)
    }
    await page.getByLabel("Show").selectOption("Sent")
    await expect.poll(() => new URL(page.url()).hash).toBe("#/inbox?show=sent")
    await expect.poll(() => allRows(true)).toBe(true)
    await page.getByLabel("Show").selectOption("Received")
    await expect.poll(() => allRows(false)).toBe(true)
    await page.getByLabel("Show").selectOption("All mail")
    await expect.poll(() => new URL(page.url()).hash).toBe("#/inbox")
    // A sender typed: Bob's mail alone, kept in the page's address; since tomorrow, none, and said so.
    await page.getByLabel("From", { exact: true }).fill("bob@partner.test")
    await page.getByRole("button", { name: "Filter" }).click()
    await expect.poll(() => new URL(page.url()).hash).toBe("#/inbox?from=bob%40partner.test")
    await expect.poll(() => allRows(false)).toBe(true)
    const tomorrow = new Date(Date.now() + 86_400_000).toLocaleDateString("sv")
    await page.getByLabel("Since").fill(tomorrow)
    await page.getByText(`Nothing from bob@partner.test since ${tomorrow} here.`).waitFor()
    await page.getByLabel("Since").fill("")
    await page.getByRole("button", { name: "Every sender's mail" }).click()
    await expect.poll(() => new URL(page.url()).hash).toBe("#/inbox")
    await page.goto(`/#/mailboxes/${mailboxId}`)
    await page.getByLabel("Group by conversation").check()
    const conversations = page.getByRole("list", { name: "Conversations" })
    await conversations.getByLabel("2 messages").waitFor()
    await conversations.getByLabel("1 unread").waitFor()
    // Counted and paged as conversations (the API's thread list), ordered by their newest message.
    await page.getByText(/^\d+ conversations?$/).waitFor()
    await expect(page.getByLabel("Sort").locator("option").allTextContents()).resolves.toEqual(["Newest first", "Oldest first"])
    await conversations.getByRole("link", { name: /Where is my parcel\?/ }).click()
    await page.getByRole("heading", { name: "Where is my parcel?" }).waitFor()
    await page.getByRole("list", { name: "Messages" }).getByRole("listitem").nth(1).waitFor()
    await expect(page.getByRole("list", { name: "Messages" }).getByRole("listitem").count()).resolves.toBe(2)
    // Opened, the conversation is read.
    expect((await emailOf(inboundId)).data?.data.labels).not.toContain("unread")
  })

  it("shows what an attachment says on asking: a PDF's pages; why a file of no known kind has none; no offer for an image", async () => {
    await sendMail(server.smtpPort, {
      from: "Accounts <accounts@partner.test>",
      to: address,
      subject: "Your statement",
      text: "Attached.",
      attachments: [
        { filename: "statement.pdf", content: Buffer.from(makePdf(["Statement for March", "Balance due: 75 EUR"])), contentType: "application/pdf" },
        { filename: "ledger.bin", content: Buffer.from([0, 1, 2, 3]), contentType: "application/octet-stream" },
        { filename: "logo.png", content: Buffer.from([0x89, 0x50, 0x4e, 0x47]), contentType: "image/png" }
      ]
    })
    await page.getByRole("link", { name: "Inbox", exact: true }).click()
    await page.getByRole("link", { name: /Your statement/ }).click()
    await page.getByRole("heading", { name: "Your statement" }).waitFor()
    const items = page.locator("ul.attachments > li")
    await items.nth(2).waitFor()
    await items.nth(0).getByRole("button", { name: "Show text" }).click()
    await expect(page.getByLabel("Text of statement.pdf").textContent()).resolves.toBe("Statement for March\n\nBalance due: 75 EUR")
    await items.nth(0).getByText("PDF, 2 pages · 40 characters").waitFor()
    await items.nth(0).getByRole("button", { name: "Hide text" }).click()
    await expect(page.getByLabel("Text of statement.pdf").count()).resolves.toBe(0)
    await items.nth(1).getByRole("button", { name: "Show text" }).click()
    await items.nth(1).getByText("Attachments of type application/octet-stream have no text to read (text, HTML, PDF and Word documents do)").waitFor()
    await expect(items.nth(2).getByRole("button").count()).resolves.toBe(0)
    expect(refusals(/^422 GET .*\/attachments\/att_\w+\/text$/)).toHaveLength(1)
  })

  it("edits an email's labels: adds and removes its own, and shows why a label is refused", async () => {
    await page.goto(`/#/emails/${inboundId}`)
    await page.getByRole("heading", { name: "Where is my parcel?" }).waitFor()
    const labels = page.getByRole("list", { name: "Labels" })
    // What the inbound checks set (an unsigned sender is `unauthenticated`) stays as it is.
    const labelsOf = async () => (await emailOf(inboundId)).data!.data.labels
    const before = await labelsOf()
    expect(before).toContain("inbound")
    expect(before).not.toContain("follow-up")
    await page.getByLabel("New label").fill("follow-up")
    await page.getByRole("button", { name: "Add label" }).click()
    await labels.getByText("follow-up").waitFor()
    await expect(page.getByLabel("New label").inputValue()).resolves.toBe("")
    expect((await labelsOf())).toEqual([...before, "follow-up"])
    // Facts are not removable.
    await expect(page.getByRole("button", { name: "Remove label inbound" }).count()).resolves.toBe(0)

    await page.getByLabel("New label").fill("a,b")
    await page.getByRole("button", { name: "Add label" }).click()
    await expect(page.getByRole("alert").textContent()).resolves.toMatch(/must not contain a comma/)
    expect(refusals(/PATCH/)).toEqual([`400 PATCH ${server.url}/api/emails/${inboundId}`])
    await page.getByLabel("New label").fill("inbound")
    await page.getByRole("button", { name: "Add label" }).click()
    await expect(page.getByRole("alert").textContent()).resolves.toMatch(/inbound/)
    const fact = refusals(/PATCH/)
    expect(fact).toHaveLength(1)
    expect(fact[0]).toMatch(new RegExp(`^4\\d\\d PATCH ${server.url}/api/emails/${inboundId}$`))
    expect((await labelsOf())).toEqual([...before, "follow-up"])

    for (const name of ["first", "second"]) {
      await page.getByLabel("New label").fill(name)
      await page.getByRole("button", { name: "Add label" }).click()
      await labels.getByText(name).waitFor()
    }
    // Each removal leaves the keyboard on the next label's ×; the last one's on the × before it (or the new label's field).
    const removableBefore = before.filter((name) => !["inbound", "sent"].includes(name))
    for (const [name, next] of <Array<[string, string]>>[["follow-up", "Remove label first"], ["first", "Remove label second"], ["second", removableBefore.length > 0 ? `Remove label ${removableBefore.at(-1)}` : "new-label"]]) {
      await page.getByRole("button", { name: `Remove label ${name}` }).click()
      await labels.getByText(name, { exact: true }).waitFor({ state: "detached" })
      await expect.poll(focused).toBe(next)
    }
    await expect(page.getByRole("alert").count()).resolves.toBe(0)
    expect((await labelsOf())).toEqual(before)
  })

  it("reviews an agent's drafts: edits and approves one, refuses to send an incomplete one until it is fixed, rejects another", async () => {
    // The agent writes with an API key of the account.
    const key = (await dashboard().POST("/api/api-keys", { body: { name: "drafting agent" } })).data!.data
    type DraftInput = NonNullable<operations["outbound.createDraft"]["requestBody"]>["content"]["application/json"]
    const agent = async (body: DraftInput) => {
      const created = await withKey(server.url, key).POST("/v1/api/mailboxes/{mailboxId}/drafts", { params: { path: { mailboxId } }, body })
      expect(created.response.status).toBe(201)
      return created.data!.data.draft_id
    }
    const offer = await agent({
      to: ["carol@partner.test"],
      subject: "Offer: 10% off",
      text: "Dear Carol, an offer for you.",
      html: "<p>Dear Carol, an <b>offer</b> for you.</p>",
      list_unsubscribe: true
    })
    const reply = await agent({ in_reply_to: inboundId, bcc: ["audit@partner.test"], text: "Draft reply nobody should send." })
    const incomplete = await agent({ subject: "Meeting notes", text: "Notes from today's meeting." })
    const draftOf = (draftId: string) => dashboard().GET("/api/mailboxes/{mailboxId}/drafts/{draftId}", { params: { path: { mailboxId, draftId } } })

    await page.getByRole("link", { name: "Drafts", exact: true }).click()
    await page.getByRole("heading", { name: "Awaiting approval (3)" }).waitFor()
    const waiting = page.getByRole("list", { name: "Drafts awaiting approval" })
    const item = (title: string) => waiting.getByRole("listitem", { name: `Draft: ${title}` })
    await item("Offer: 10% off").getByText(`From ${address}`).waitFor()
    await item("Offer: 10% off").getByText("With an unsubscribe link").waitFor()
    // The person sees every recipient, the hidden ones too, and the HTML version mail programs will show.
    // A reply's recipients and subject are filled from the email it answers: the person sees whom it goes to.
    await item("Re: Where is my parcel?").getByText("To Bob Buyer <bob@partner.test> · Bcc audit@partner.test", { exact: false }).waitFor()
    const shown = item("Offer: 10% off").frameLocator("iframe[title='HTML version of Offer: 10% off']")
    await expect(shown.locator("b").textContent()).resolves.toBe("offer")

    // Edit, then approve: what is sent is the edited draft. Editing takes the keyboard to the form.
    await item("Offer: 10% off").getByRole("button", { name: "Edit" }).click()
    await expect.poll(focused).toBe(`draft-to-${offer}`)
    await item("Offer: 10% off").getByLabel("Subject").fill("Offer: 15% off")
    await item("Offer: 10% off").getByText("changing the message removes it", { exact: false }).waitFor()
    await item("Offer: 10% off").getByLabel("Message").fill("Dear Carol, a better offer for you.")
    await item("Offer: 10% off").getByRole("button", { name: "Save draft" }).click()
    await item("Offer: 15% off").waitFor()
    const saved = (await draftOf(offer)).data!.data
    expect(saved).toMatchObject({ status: "draft", subject: "Offer: 15% off", text: "Dear Carol, a better offer for you." })
    // The agent's HTML went with the edit: it no longer says what the person approved.
    expect(saved.html).toBeNull()
    await item("Offer: 15% off").getByRole("button", { name: "Approve and send" }).click()
    const sentList = page.getByRole("list", { name: "Sent drafts" })
    await sentList.getByRole("listitem", { name: "Draft: Offer: 15% off" }).waitFor()
    await page.getByRole("heading", { name: "Awaiting approval (2)" }).waitFor()
    const { message, parsed } = await delivered("Offer: 15% off")
    expect(message.rcptTo).toEqual(["carol@partner.test"])
    expect(parsed.text?.trim()).toBe("Dear Carol, a better offer for you.")
    expect(parsed.html).toBe(false)
    // The person's edit kept what they did not touch: the unsubscribe link.
    expect(message.raw.toString("latin1")).toMatch(/^List-Unsubscribe-Post: List-Unsubscribe=One-Click\r$/m)
    const approved = (await draftOf(offer)).data!.data
    expect(approved).toMatchObject({ status: "sent", email_id: expect.stringMatching(/^eml_/) })
    await expect(sentList.getByRole("link", { name: "Open the sent email" }).getAttribute("href")).resolves.toBe(`#/emails/${approved.email_id}`)

    // Approving a draft with no recipient is refused by the server; the draft stays, the reason shown with it.
    await item("Meeting notes").getByRole("button", { name: "Approve and send" }).click()
    await expect(item("Meeting notes").getByRole("alert").textContent()).resolves.toMatch(/at least one recipient/)
    expect(refusals(/\/send$/)).toEqual([`400 POST ${server.url}/api/mailboxes/${mailboxId}/drafts/${incomplete}/send`])
    expect((await draftOf(incomplete)).data?.data).toMatchObject({ status: "draft", email_id: null })
    await item("Meeting notes").getByRole("button", { name: "Edit" }).click()
    await item("Meeting notes").getByLabel("To").fill("dave@partner.test")
    await item("Meeting notes").getByRole("button", { name: "Save draft" }).click()
    await item("Meeting notes").getByText("To dave@partner.test", { exact: false }).waitFor()
    // A triple click approves once: the buttons are off while the request runs.
    const sends: Array<string> = []
    const countSends = (request: { method: () => string; url: () => string }) => {
      if (request.method() === "POST" && request.url().endsWith(`/drafts/${incomplete}/send`)) sends.push(request.url())
    }
    page.on("request", countSends)
    await item("Meeting notes").getByRole("button", { name: "Approve and send" }).click({ clickCount: 3 })
    await sentList.getByRole("listitem", { name: "Draft: Meeting notes" }).waitFor()
    page.off("request", countSends)
    expect(sends).toHaveLength(1)
    expect((await delivered("Meeting notes")).message.rcptTo).toEqual(["dave@partner.test"])

    // Reject: asked first, then gone for good.
    page.once("dialog", (dialog) => dialog.accept())
    await item("Re: Where is my parcel?").getByRole("button", { name: "Reject" }).click()
    await page.getByRole("heading", { name: "Awaiting approval (0)" }).waitFor()
    const rejected = await draftOf(reply)
    expect(rejected.response.status).toBe(404)
    expect(rejected.error?.error).toMatchObject({ code: "NOT_FOUND", details: { draft_id: reply } })
    expect(refusals(new RegExp(`404 GET .*${reply}$`))).toHaveLength(1)
    // Nothing was sent to Bob from the rejected draft: his only mail is the reply sent from the reader.
    const toBob = []
    for (const m of mx.delivered()) if (m.rcptTo.includes("bob@partner.test")) toBob.push(m)
    expect(toBob).toHaveLength(1)
  })

  it("saves a reply as a draft from the reader and finds it in the mailbox's drafts", async () => {
    await page.goto(`/#/emails/${inboundId}`)
    await page.getByRole("button", { name: "Reply", exact: true }).click()
    await page.getByLabel("Your reply").fill("Let me check with the warehouse.")
    await page.getByRole("button", { name: "Save as draft" }).click()
    await page.getByRole("heading", { name: `Drafts of ${address}` }).waitFor()
    await page.getByRole("list", { name: "Drafts awaiting approval" }).getByText("Let me check with the warehouse.").waitFor()
    const drafts = await dashboard().GET("/api/mailboxes/{mailboxId}/drafts", { params: { path: { mailboxId } } })
    expect(drafts.data?.data.filter((d) => d.status === "draft")).toEqual([
      expect.objectContaining({ in_reply_to: inboundId, reply_all: false, text: "Let me check with the warehouse." })
    ])
  })

  it("replies to all from the reader: the form says whom it goes to (not the mailbox itself) under one Re:, the cursor in the reply", async () => {
    await sendMail(server.smtpPort, {
      from: "Bob Buyer <bob@partner.test>",
      to: [address, "Dana <dana@partner.test>"],
      cc: "carol@partner.test",
      subject: "Re: Delivery window",
      text: "Can we move it to Thursday?"
    })
    await page.getByRole("link", { name: "Inbox", exact: true }).click()
    await page.getByRole("link", { name: /Delivery window/ }).click()
    await page.getByRole("heading", { name: "Re: Delivery window" }).waitFor()
    await page.getByRole("button", { name: "Reply all" }).click()
    const recipients = page.getByRole("form", { name: "Reply to all" }).getByLabel("Reply recipients")
    await expect.poll(async () => (await recipients.innerText()).replace(/\s+/g, " "))
      .toBe("To bob@partner.test Cc dana@partner.test, carol@partner.test Subject Re: Delivery window")
    await expect.poll(() => page.evaluate("document.activeElement?.id")).toBe("reply-text")
    await page.keyboard.type("Thursday works.")
    await page.getByRole("button", { name: "Send reply" }).click()
    await page.getByRole("heading", { name: "Re: Delivery window" }).nth(0).waitFor()
    await expect.poll(() => page.getByText("Thursday works.").count()).toBe(1)
    expect(await recipientsWithSubject(mx, "Re: Delivery window", 3)).toEqual(["bob@partner.test", "carol@partner.test", "dana@partner.test"])
  })

  it("clears a draft's To, Cc, Subject and Message when the person empties them: approving then mails nobody", async () => {
    const key = (await dashboard().POST("/api/api-keys", { body: { name: "second drafting agent" } })).data!.data
    const created = await withKey(server.url, key).POST("/v1/api/mailboxes/{mailboxId}/drafts", {
      params: { path: { mailboxId } },
      body: {
        to: ["erin@partner.test"],
        cc: [{ name: "Frank, Purchasing", address: "frank@partner.test" }],
        subject: "Price list",
        text: "Erin, our prices attached."
      }
    })
    const draftId = created.data!.data.draft_id
    const draftOf = async () => (await dashboard().GET("/api/mailboxes/{mailboxId}/drafts/{draftId}", { params: { path: { mailboxId, draftId } } })).data!.data

    await page.getByRole("link", { name: "Drafts", exact: true }).click()
    const waiting = page.getByRole("list", { name: "Drafts awaiting approval" })
    const before = waiting.getByRole("listitem", { name: "Draft: Price list" })
    // A name with a comma is one person, shown quoted, and saved back as it was.
    await before.getByText('Cc "Frank, Purchasing" <frank@partner.test>', { exact: false }).waitFor()
    await before.getByRole("button", { name: "Edit" }).click()
    await before.getByLabel("Message", { exact: true }).fill("Erin, our prices are attached.")
    await before.getByRole("button", { name: "Save draft" }).click()
    await before.getByText("our prices are attached", { exact: false }).waitFor()
    expect(await draftOf()).toMatchObject({ cc: [{ name: "Frank, Purchasing", address: "frank@partner.test" }] })
    await before.getByRole("button", { name: "Edit" }).click()
    for (const field of ["To", "Cc", "Subject", "Message"]) await before.getByLabel(field, { exact: true }).fill("")
    await before.getByRole("button", { name: "Save draft" }).click()
    const after = waiting.getByRole("listitem", { name: "Draft: (no subject)" })
    await after.getByText("To nobody yet", { exact: false }).waitFor()
    expect(await draftOf()).toMatchObject({ status: "draft", to: [], cc: [], subject: "", text: "" })

    // What the person removed is not mailed: the server refuses a draft with no recipient.
    const sentBefore = mx.delivered().length
    await after.getByRole("button", { name: "Approve and send" }).click()
    await expect(after.getByRole("alert").textContent()).resolves.toMatch(/at least one recipient/)
    expect(refusals(/\/send$/)).toEqual([`400 POST ${server.url}/api/mailboxes/${mailboxId}/drafts/${draftId}/send`])
    expect(await draftOf()).toMatchObject({ status: "draft", email_id: null })
    expect(mx.delivered().length).toBe(sentBefore)

    page.once("dialog", (dialog) => dialog.accept())
    await after.getByRole("button", { name: "Reject" }).click()
    await after.waitFor({ state: "detached" })
    expect((await dashboard().GET("/api/mailboxes/{mailboxId}/drafts/{draftId}", { params: { path: { mailboxId, draftId } } })).response.status).toBe(404)
    expect(refusals(new RegExp(`404 GET .*${draftId}$`))).toHaveLength(1)
  })

  it("says a draft rejected after it was sent went out, with a link to the email; a draft sent while the page is open moves to Sent", async () => {
    const key = (await dashboard().POST("/api/api-keys", { body: { name: "late agent" } })).data!.data
    const agent = withKey(server.url, key)
    const draft = async (subject: string) =>
      (await agent.POST("/v1/api/mailboxes/{mailboxId}/drafts", { params: { path: { mailboxId } }, body: { to: ["gina@partner.test"], subject, text: `${subject}.` } })).data!.data.draft_id
    const sendByAgent = (draftId: string) => agent.POST("/v1/api/mailboxes/{mailboxId}/drafts/{draftId}/send", { params: { path: { mailboxId, draftId } } })
    const late = await draft("Too late to stop")
    const live = await draft("Sent while watched")
    const withdrawn = await draft("Withdrawn by the agent")

    await toMailboxList()
    await page.goto(`/#/mailboxes/${mailboxId}/drafts`)
    const waiting = page.getByRole("list", { name: "Drafts awaiting approval" })
    const sentList = page.getByRole("list", { name: "Sent drafts" })
    await waiting.getByRole("listitem", { name: "Draft: Sent while watched" }).waitFor()
    // Unheard by the page (its stream down), the agent sends one: the page still offers to reject it.
    await stream("disconnect")
    const sent = (await sendByAgent(late)).data!.data
    await delivered("Too late to stop")
    page.once("dialog", (dialog) => dialog.accept())
    await waiting.getByRole("listitem", { name: "Draft: Too late to stop" }).getByRole("button", { name: "Reject" }).click()
    const note = page.getByRole("status").filter({ hasText: "had already been sent" })
    await expect(note.textContent()).resolves.toMatch(/^The draft “Too late to stop” had already been sent at .+ when you rejected it: the email went out, and only the draft was deleted\. Open the sent email$/)
    await expect(note.getByRole("link", { name: "Open the sent email" }).getAttribute("href")).resolves.toBe(`#/emails/${sent.email_id}`)
    await waiting.getByRole("listitem", { name: "Draft: Too late to stop" }).waitFor({ state: "detached" })
    // The agent deletes one unheard: approving it sends nothing, and the page says why its card went.
    await agent.DELETE("/v1/api/mailboxes/{mailboxId}/drafts/{draftId}", { params: { path: { mailboxId, draftId: withdrawn } } })
    await waiting.getByRole("listitem", { name: "Draft: Withdrawn by the agent" }).getByRole("button", { name: "Approve and send" }).click()
    await page.getByRole("status").getByText(
      "The draft “Withdrawn by the agent” had been deleted, by its agent or elsewhere, before you acted on it: nothing was sent."
    ).waitFor()
    await waiting.getByRole("listitem", { name: "Draft: Withdrawn by the agent" }).waitFor({ state: "detached" })
    expect(refusals(/\/send$/)).toEqual([`404 POST ${server.url}/api/mailboxes/${mailboxId}/drafts/${withdrawn}/send`])

    // Heard: a draft the agent sends moves from awaiting approval to Sent without a reload.
    const opened = page.waitForResponse((response) => response.url().includes("/api/events?"))
    await stream("connect")
    await opened
    await sendByAgent(live)
    await sentList.getByRole("listitem", { name: "Draft: Sent while watched" }).waitFor()
    await waiting.getByRole("listitem", { name: "Draft: Sent while watched" }).waitFor({ state: "detached" })
  })

  it("approves and saves only the version shown: an agent's change meanwhile is refused, shown and then followed live; a scheduled draft says it leaves by itself, and loses its schedule by an edit", async () => {
    const key = (await dashboard().POST("/api/api-keys", { body: { name: "changing agent" } })).data!.data
    const agent = withKey(server.url, key)
    const draftId = (await agent.POST("/v1/api/mailboxes/{mailboxId}/drafts", {
      params: { path: { mailboxId } },
      body: { to: ["bob@partner.test"], subject: "Hello Bob", text: "Original" }
    })).data!.data.draft_id
    const change = async (body: { to?: Array<string>; text?: string }) =>
      expect((await agent.PATCH("/v1/api/mailboxes/{mailboxId}/drafts/{draftId}", { params: { path: { mailboxId, draftId } }, body })).response.status).toBe(200)
    const draftOf = async (id = draftId) => (await dashboard().GET("/api/mailboxes/{mailboxId}/drafts/{draftId}", { params: { path: { mailboxId, draftId: id } } })).data!.data
    const toMx = async (subject: string) => {
      const found = []
      for (const message of mx.delivered()) if ((await simpleParser(message.raw)).subject === subject) found.push(message)
      return found
    }

    await toMailboxList()
    await page.goto(`/#/mailboxes/${mailboxId}/drafts`)
    const card = page.getByRole("list", { name: "Drafts awaiting approval" }).getByRole("listitem", { name: "Draft: Hello Bob" })
    await card.getByText("Original", { exact: true }).waitFor()
    // Unheard by the page (its stream and its watch of the drafts off), the agent adds a recipient and changes the words.
    await stream("disconnect")
    await change({ to: ["bob@partner.test", "mallory@partner.test"], text: "Pay Mallory instead" })
    await card.getByText("Original", { exact: true }).waitFor()
    // Approving what the page shows is refused: nothing goes, and the page shows the draft as it is now.
    await card.getByRole("button", { name: "Approve and send" }).click()
    await card.getByRole("status").getByText(
      "This draft was changed (by its agent, or elsewhere) after it was shown to you: nothing was sent. It now reads as below: review it, then approve it again."
    ).waitFor()
    await card.getByText("To bob@partner.test, mallory@partner.test", { exact: false }).waitFor()
    await card.getByText("Pay Mallory instead", { exact: true }).waitFor()
    expect(refusals(/\/send$/)).toEqual([`409 POST ${server.url}/api/mailboxes/${mailboxId}/drafts/${draftId}/send`])
    expect(await draftOf()).toMatchObject({ status: "draft", email_id: null, to: ["bob@partner.test", "mallory@partner.test"] })

    // The person edits it; the agent changes it again meanwhile: the save is refused, the person's words stay
    // in the form, and the draft as it is now shows beside it. Saving again puts the person's version in its place.
    await card.getByRole("button", { name: "Edit" }).click()
    await card.getByLabel("To").fill("bob@partner.test")
    await card.getByLabel("Message").fill("Hello Bob, see you Monday.")
    await change({ text: "Pay Mallory today" })
    await card.getByRole("button", { name: "Save draft" }).click()
    await card.getByRole("status").getByText("Not saved: this draft was changed (by its agent, or elsewhere) while you edited it.", { exact: false }).waitFor()
    await expect(card.getByLabel("The draft as it is now").textContent()).resolves.toBe("Pay Mallory today")
    await expect(card.getByLabel("Message").inputValue()).resolves.toBe("Hello Bob, see you Monday.")
    expect(refusals(/PATCH/)).toEqual([`409 PATCH ${server.url}/api/mailboxes/${mailboxId}/drafts/${draftId}`])
    expect(await draftOf()).toMatchObject({ to: ["bob@partner.test", "mallory@partner.test"], text: "Pay Mallory today" })
    await card.getByRole("button", { name: "Save draft" }).click()
    await card.getByRole("button", { name: "Approve and send" }).waitFor()
    expect(await draftOf()).toMatchObject({ status: "draft", to: ["bob@partner.test"], text: "Hello Bob, see you Monday." })

    // Heard again, the page follows the agent's next edit without a reload, and says it changed.
    await change({ text: "Hello Bob, see you Tuesday." })
    const opened = page.waitForResponse((response) => response.url().includes("/api/events?"))
    await stream("connect")
    await opened
    await card.getByText("Hello Bob, see you Tuesday.", { exact: true }).waitFor()
    await card.getByRole("status").getByText("This draft was changed (by its agent, or elsewhere) while it was shown", { exact: false }).waitFor()
    // Approved as shown, it goes as shown: to Bob alone, Mallory never.
    await card.getByRole("button", { name: "Approve and send" }).click()
    const { message, parsed } = await delivered("Hello Bob")
    expect(message.rcptTo).toEqual(["bob@partner.test"])
    expect(parsed.text?.trim()).toBe("Hello Bob, see you Tuesday.")
    expect(await toMx("Hello Bob")).toHaveLength(1)

    // A scheduled draft says it leaves by itself unless rejected or unscheduled, and is sent now rather than approved.
    const sendAt = new Date(Date.now() + 3_600_000)
    const scheduled = (await agent.POST("/v1/api/mailboxes/{mailboxId}/drafts", {
      params: { path: { mailboxId } },
      body: { to: ["bob@partner.test"], subject: "Quarterly report", text: "Attached.", send_at: sendAt.toISOString() }
    })).data!.data.draft_id
    const later = page.getByRole("list", { name: "Drafts awaiting approval" }).getByRole("listitem", { name: "Draft: Quarterly report" })
    await later.waitFor()
    const at = await page.evaluate((iso) => new Date(iso).toLocaleString(), sendAt.toISOString())
    await later.getByText(`Scheduled: it will be sent by itself at ${at}, without approval, unless you reject it or remove the schedule (Edit).`).waitFor()
    await later.getByText("scheduled", { exact: true }).waitFor()
    await expect(later.getByText("awaiting approval", { exact: true }).count()).resolves.toBe(0)
    await expect(later.getByRole("button", { name: "Approve and send" }).count()).resolves.toBe(0)
    await later.getByRole("button", { name: "Send now" }).waitFor()
    // Unticking its time in the edit form removes the schedule: it then waits for approval.
    await later.getByRole("button", { name: "Edit" }).click()
    await later.getByLabel(`Send it by itself at ${at}`, { exact: false }).uncheck()
    await later.getByRole("button", { name: "Save draft" }).click()
    await later.getByRole("button", { name: "Approve and send" }).waitFor()
    await later.getByText("awaiting approval", { exact: true }).waitFor()
    expect(await draftOf(scheduled)).toMatchObject({ status: "draft", send_at: null, text: "Attached." })
    page.once("dialog", (dialog) => dialog.accept())
    await later.getByRole("button", { name: "Reject" }).click()
    await later.waitFor({ state: "detached" })
  })

  it("says when it stops hearing the server (its event stream refused), tries again and catches up on what came meanwhile", async () => {
    await page.goto(`/#/mailboxes/${mailboxId}`)
    await page.getByRole("heading", { name: address }).waitFor()
    // A server stopping answers the stream 503: EventSource gives up for good on an answer that is not a stream.
    const refused: Array<string> = []
    await page.route("**/api/events?**", (route) => (refused.push(route.request().url()), route.fulfill({ status: 503, body: "" })))
    await stream("disconnect")
    await stream("connect")
    const notice = page.getByRole("status").filter({ hasText: "Not connected to the server" })
    await notice.waitFor()
    await sendMail(server.smtpPort, { from: "Bob Buyer <bob@partner.test>", to: address, subject: "Sent while the page was not listening", text: "Hello?" })
    await until("the email stored", async () => (await inbox())?.find((e) => e.subject === "Sent while the page was not listening"))
    expect(refused.length).toBeGreaterThanOrEqual(2)
    await page.unroute("**/api/events?**")
    await page.getByRole("link", { name: /Sent while the page was not listening/ }).waitFor({ timeout: 15_000 })
    await notice.waitFor({ state: "detached" })
    refusals(/\/api\/events\?/)
  })

  it("shows a forward draft with what it forwards (the original's block and text, its HTML, its attachments' names): what is approved is what is sent", async () => {
    await sendMail(server.smtpPort, {
      from: '"Hal, Accounts" <hal@partner.test>',
      to: address,
      subject: "Code for the portal",
      text: "Your code is 482913.",
      html: "<p>Your code is <b>482913</b>.</p>",
      attachments: [{ filename: "notes.txt", content: "Portal notes.", contentType: "text/plain" }]
    })
    const originalId = await until("the forwarded email stored", async () =>
      (await inbox())?.find((e) => e.subject === "Code for the portal")?.email_id)
    const key = (await dashboard().POST("/api/api-keys", { body: { name: "forwarding agent" } })).data!.data
    const created = await withKey(server.url, key).POST("/v1/api/mailboxes/{mailboxId}/drafts", {
      params: { path: { mailboxId } },
      body: { forward_of: originalId, to: ["kim@partner.test"], text: "FYI, see below." }
    })
    expect(created.response.status).toBe(201)

    await toMailboxList()
    await page.goto(`/#/mailboxes/${mailboxId}/drafts`)
    const item = page.getByRole("list", { name: "Drafts awaiting approval" }).getByRole("listitem", { name: "Draft: Fwd: Code for the portal" })
    const forwarded = item.getByRole("region", { name: "Forwarded email" })
    await forwarded.getByText("Forwards “Code for the portal” from Hal, Accounts <hal@partner.test>, with 1 attachment (notes.txt).", { exact: false }).waitFor()
    const shownText = (await forwarded.getByLabel("Forwarded text").textContent())!
    expect(shownText).toMatch(/^---------- Forwarded message ---------\nFrom: "Hal, Accounts" <hal@partner.test>\nDate: .+\nSubject: Code for the portal\nTo: .+\n\nYour code is 482913\.\n?$/)
    await forwarded.getByText("The forwarded email's HTML version", { exact: false }).click()
    await expect(forwarded.frameLocator("iframe[title='HTML version of the forwarded email']").locator("b").textContent()).resolves.toBe("482913")

    await item.getByRole("button", { name: "Approve and send" }).click()
    const { parsed } = await delivered("Fwd: Code for the portal")
    // The text part is the note, then exactly what the card showed.
    expect(parsed.text?.replace(/\r\n/g, "\n").trimEnd()).toBe(`FYI, see below.\n\n${shownText}`.trimEnd())
    expect(parsed.html).toContain("<b>482913</b>")
    expect(parsed.attachments.map((a) => a.filename)).toEqual(["notes.txt"])
  })

  it("migrates a custom domain's mailboxes after a dry run that shows each address before and after", async () => {
    const own = `${fresh("shop")}.example.org`
    const other = `${fresh("spare")}.example.org`
    await page.getByRole("link", { name: "Domains" }).click()
    for (const name of [own, other]) {
      await page.getByLabel("Domain", { exact: true }).fill(name)
      await page.getByRole("button", { name: "Add domain" }).click()
      await page.getByRole("button", { name: "Done" }).click()
      await page.getByRole("button", { name: `Migrate mailboxes of ${name}` }).waitFor()
    }
    // The owner publishes the ownership record of `own` only.
    const domains = await domainsOf()
    const ownDomain = domains.find((d) => d.domain_name === own)!
    names.set(own, { TXT: [[ownDomain.verification_token]] })
    const ownItem = page.getByRole("listitem").filter({ hasText: own }).filter({ has: page.getByRole("button", { name: `Delete ${own}` }) })
    await ownItem.getByRole("button", { name: "Verify" }).click()
    await ownItem.getByText("Verified.").waitFor()

    // Its catch-all: mail to any address of it goes to this suite's mailbox, until it is refused again.
    const catchAll = ownItem.getByLabel(`Mail to other addresses of ${own}`)
    await catchAll.selectOption({ label: `goes to ${address}` })
    await until("the catch-all set", async () => (await domainsOf()).find((d) => d.domain_name === own)?.catch_all_mailbox_id === mailboxId || undefined)
    await sendMail(server.smtpPort, { from: "Dora <dora@partner.test>", to: `hello@${own}`, subject: "Through the catch-all", text: "Anyone there?" })
    const caught = await until("the caught email", async () =>
      (await inbox())?.find((e) => e.subject === "Through the catch-all"))
    expect(caught.to).toEqual([`hello@${own}`])
    await catchAll.selectOption({ label: "is refused" })
    await until("the catch-all off", async () => (await domainsOf()).find((d) => d.domain_name === own)?.catch_all_mailbox_id === null || undefined)
    // Taken away again: later steps count the inbox.
    expect((await dashboard().DELETE("/api/emails/{emailId}", { params: { path: { emailId: caught.email_id } } })).response.status).toBe(200)

    // Two mailboxes on it; one's name is taken on the shared domain (this suite's own mailbox).
    await page.getByRole("link", { name: "Mailboxes" }).click()
    for (const local of [localPart, fresh("sales")]) {
      await page.getByLabel("New mailbox address").fill(local)
      await page.locator("#new-domain").selectOption(own)
      await page.getByText("is available").waitFor()
      await page.getByRole("button", { name: "Create mailbox" }).click()
      await page.getByRole("link", { name: `${local}@${own}` }).waitFor()
    }
    const mailboxesBefore = await mailboxesOf()
    const onOwn = mailboxesBefore.filter((m) => m.email_address.endsWith(`@${own}`))
    expect(onOwn).toHaveLength(2)

    await page.getByRole("link", { name: "Domains" }).click()
    await ownItem.getByRole("button", { name: `Migrate mailboxes of ${own}` }).click()
    const form = page.getByRole("form", { name: `Migrate mailboxes of ${own}` })

    // A target the account may not use: the server's refusal, shown; nothing moves.
    await form.getByLabel(`Move every mailbox of ${own} to`).selectOption(other)
    await form.getByRole("button", { name: "Preview" }).click()
    await expect(form.getByRole("alert").textContent()).resolves.toBe(`The domain ${other} is not available to this account`)
    expect(refusals(/migrate-mailboxes$/)).toEqual([`422 POST ${server.url}/api/domains/${ownDomain.domain_id}/migrate-mailboxes`])

    // The dry run: each address before and after, the taken one renamed with a suffix; nothing changed yet.
    await form.getByLabel(`Move every mailbox of ${own} to`).selectOption(SHARED)
    await form.getByRole("button", { name: "Preview" }).click()
    await form.getByText("Dry run: 2 mailboxes would move, 1 renamed. Nothing has changed yet.").waitFor()
    const preview = form.getByRole("table", { name: "Migration preview" })
    const renamedRow = preview.getByRole("row", { name: new RegExp(`^${localPart}@${own.replace(/\./g, "\\.")}`) })
    await expect(renamedRow.textContent()).resolves.toMatch(new RegExp(`${localPart}\\.[0-9a-f]{6}@${SHARED}renamed$`))
    const unchanged = await mailboxesOf()
    expect(unchanged.filter((m) => m.email_address.endsWith(`@${own}`))).toHaveLength(2)

    await form.getByRole("button", { name: "Migrate 2 mailboxes" }).click()
    await form.getByText(`Migrated 2 mailboxes to ${SHARED}, 1 renamed.`).waitFor()
    const migrated = form.getByRole("table", { name: "Migrated mailboxes" })
    const previewed = await migrated.getByRole("row").allTextContents()
    const after = await mailboxesOf()
    for (const mailbox of onOwn) {
      const now = after.find((m) => m.mailbox_id === mailbox.mailbox_id)!
      expect(now.email_address.endsWith(`@${SHARED}`)).toBe(true)
      expect(previewed.some((row) => row.startsWith(mailbox.email_address + now.email_address))).toBe(true)
    }
    // With no mailbox left on it, the domain can go.
    page.once("dialog", (dialog) => dialog.accept())
    await page.getByRole("button", { name: `Delete ${own}` }).click()
    await page.getByRole("button", { name: `Delete ${own}` }).waitFor({ state: "detached" })
    expect((await domainsOf()).map((d) => d.domain_name)).toEqual([other])
  })

  it("lists every mailbox past the first 100 (enterprise has no limit), and reads every mailbox's drafts in one request", async () => {
    // More than a page of mailboxes; the suite's own, the oldest, is on the last page of the list.
    const key = (await dashboard().POST("/api/api-keys", { body: { name: "provisioning agent" } })).data!.data
    const agent = withKey(server.url, key)
    for (let batch = 0; batch < 10; batch++) {
      await Promise.all(Array.from({ length: 10 }, async () => {
        const made = await agent.POST("/v1/api/mailboxes", { body: { local_part: fresh("fleet"), domain: SHARED } })
        expect(made.response.status).toBe(201)
      }))
    }
    const listed = await dashboard().GET("/api/mailboxes", { params: { query: { limit: 1 } } })
    const total = listed.data!.meta.total
    expect(total).toBeGreaterThan(100)

    await page.getByRole("link", { name: "Mailboxes" }).click()
    await page.getByRole("link", { name: address, exact: true }).waitFor()
    await expect(page.getByRole("list", { name: "Mailboxes" }).getByRole("listitem").count()).resolves.toBe(total)

    // Its pages know it: the inbox's heading, the From line of a new email.
    await page.goto(`/#/mailboxes/${mailboxId}/compose`)
    await page.getByText(`From ${address}`).waitFor()
    await page.goto(`/#/mailboxes/${mailboxId}`)
    await page.getByRole("heading", { name: address }).waitFor()

    // All drafts: one request for the drafts, one per 100 mailboxes for their addresses; none per mailbox.
    const asked: Array<string> = []
    // The drafts' watch (live.js: their newest change, one draft, read at once and every 15 s) is no list.
    const record = (request: { url: () => string }) => {
      const url = new URL(request.url())
      if (!(url.pathname === "/api/drafts" && url.searchParams.get("sort") === "updated_at:desc" && url.searchParams.get("limit") === "1")) asked.push(url.pathname)
    }
    page.on("request", record)
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Drafts" }).click()
    const waiting = page.getByRole("list", { name: "Drafts awaiting approval" })
    await waiting.getByText("Let me check with the warehouse.").waitFor()
    await waiting.getByText(`From ${address}`).waitFor()
    page.off("request", record)
    // Only the lists are counted: the event stream may reconnect meanwhile.
    const lists = (paths: ReadonlyArray<string>) => paths.filter((path) => /^\/api\/(drafts|mailboxes|emails)$/.test(path))
    // Awaiting approval and recently sent, asked apart; the addresses, a page of 100 at a time.
    expect(lists(asked)).toEqual(["/api/drafts", "/api/drafts", ...Array(Math.ceil(total / 100)).fill("/api/mailboxes")])

    // The inbox of every mailbox: one request, however many mailboxes there are.
    asked.length = 0
    page.on("request", record)
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Inbox", exact: true }).click()
    await page.getByRole("link", { name: /Where is my parcel\?/ }).first().waitFor()
    page.off("request", record)
    expect(lists(asked)).toEqual(["/api/emails"])

    // More than a page of drafts: the older ones are a press of Older away.
    const fleet = (await dashboard().GET("/api/mailboxes", { params: { query: { limit: 1 } } })).data!.mailboxes[0]!
    for (let batch = 0; batch < 10; batch++) {
      await Promise.all(Array.from({ length: 10 }, async (_, i) => {
        const made = await agent.POST("/v1/api/mailboxes/{mailboxId}/drafts", {
          params: { path: { mailboxId: fleet.mailbox_id } },
          body: { to: ["grace@partner.test"], subject: `Routine note ${batch * 10 + i}`, text: "Nothing urgent." }
        })
        expect(made.response.status).toBe(201)
      }))
    }
    const drafts = (await dashboard().GET("/api/drafts", { params: { query: { limit: 1, status: "draft" } } })).data!.meta.total
    expect(drafts).toBeGreaterThan(100)
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Mailboxes" }).click()
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Drafts" }).click()
    const pages = page.getByRole("navigation", { name: "Pages" })
    await pages.getByText(`1–100 of ${drafts} drafts awaiting approval`).waitFor()
    await waiting.getByText(`From ${fleet.email_address}`).first().waitFor()
    await expect(waiting.getByText("Let me check with the warehouse.").count()).resolves.toBe(0)
    await pages.getByRole("button", { name: "Older" }).click()
    await waiting.getByText("Let me check with the warehouse.").waitFor()
    await pages.getByText(`101–${drafts} of ${drafts} drafts awaiting approval`).waitFor()
    await expect(pages.getByRole("button", { name: "Older" }).isDisabled()).resolves.toBe(true)
  })

  it("offers to unsubscribe from a list's email: a list's own page is linked for the person; for an unauthenticated sender it says why not", async () => {
    await sendMail(server.smtpPort, { from: "digest@partner.test", to: address, subject: "Weekly digest", text: "News.", headers: { "List-Unsubscribe": "<https://partner.test/preferences?u=7>" } })
    await sendMail(server.smtpPort, { from: "offers@partner.test", to: address, subject: "Special offers", text: "Buy.", headers: { "List-Unsubscribe": "<mailto:leave@partner.test>" } })
    const listed = await until("both lists' emails listed", async () => {
      const mail = await inbox({ limit: 100 })
      const found = ["Weekly digest", "Special offers"].map((subject) => mail?.find((e) => e.subject === subject))
      return found.every(Boolean) ? found.map((e) => e!) : undefined
    })
    await page.goto(`/#/emails/${listed[0]!.email_id}`)
    await page.getByRole("heading", { name: "Weekly digest" }).waitFor()
    // Only a page: linked at once, no button the server would refuse.
    const open = page.getByRole("link", { name: "unsubscribe there" })
    await open.waitFor()
    await expect(open.getAttribute("href")).resolves.toBe("https://partner.test/preferences?u=7")
    await expect(open.getAttribute("rel")).resolves.toBe("noopener noreferrer")
    expect(await page.getByRole("button", { name: "Unsubscribe" }).count()).toBe(0)

    // A list address the server could write to, but the sender is not authenticated: why not, up front.
    await page.goto(`/#/emails/${listed[1]!.email_id}`)
    await page.getByRole("heading", { name: "Special offers" }).waitFor()
    await page.getByText(/^No Unsubscribe: the sender is not authenticated/).waitFor()
    expect(await page.getByRole("button", { name: "Unsubscribe" }).count()).toBe(0)
    expect(refusals(/\/unsubscribe$/)).toEqual([])
    // Mail without a list offers nothing of the kind.
    await page.goto(`/#/emails/${inboundId}`)
    await page.getByRole("button", { name: "Reply all" }).waitFor()
    expect(await page.getByRole("button", { name: "Unsubscribe" }).count()).toBe(0)
  })

  it("deletes an email from its page once no draft answers it (the refusal says why), and a conversation from its page", async () => {
    await sendMail(server.smtpPort, { from: "news@partner.test", to: address, subject: "Old newsletter", text: "Nothing new." })
    await sendMail(server.smtpPort, { from: "carol@partner.test", to: address, subject: "Old thread", text: "Shall we close this?" })
    const listed = await until("both emails listed", async () => {
      const mail = await inbox({ limit: 100 })
      const found = ["Old newsletter", "Old thread"].map((subject) => mail?.find((e) => e.subject === subject))
      return found.every(Boolean) ? found.map((e) => e!) : undefined
    })
    const [newsletter, old] = listed as [(typeof listed)[0], (typeof listed)[0]]
    const draft = await dashboard().POST("/api/mailboxes/{mailboxId}/drafts", {
      params: { path: { mailboxId } },
      body: { in_reply_to: newsletter.email_id, text: "Unsubscribe me." }
    })
    expect(draft.response.status).toBe(201)

    await page.goto(`/#/emails/${newsletter.email_id}`)
    await page.getByRole("heading", { name: "Old newsletter" }).waitFor()
    await page.getByRole("button", { name: "Delete email" }).click()
    await page.getByText("The email, its attachments and its search data go for good. This cannot be undone.").waitFor()
    await page.getByRole("button", { name: "Delete for good" }).click()
    await page.getByText("An unsent draft replies to or forwards this mail: delete or change the draft first").waitFor()
    expect(refusals(/^409 DELETE /)).toEqual([`409 DELETE ${server.url}/api/emails/${newsletter.email_id}`])
    await dashboard().DELETE("/api/mailboxes/{mailboxId}/drafts/{draftId}", { params: { path: { mailboxId, draftId: draft.data!.data.draft_id } } })
    await page.getByRole("button", { name: "Delete for good" }).click()
    await page.waitForURL(`**/#/mailboxes/${mailboxId}`)
    expect((await emailOf(newsletter.email_id)).response.status).toBe(404)
    expect(refusals(/^404 GET /)).toEqual([`404 GET ${server.url}/api/emails/${newsletter.email_id}`])

    await page.goto(`/#/threads/${old.thread_id}`)
    await page.getByRole("heading", { name: "Old thread" }).waitFor()
    await page.getByRole("button", { name: "Delete conversation" }).click()
    await page.getByText("Its one message goes for good. This cannot be undone.").waitFor()
    await page.getByRole("button", { name: "Keep it" }).click()
    await page.getByRole("button", { name: "Delete conversation" }).click()
    await page.getByRole("button", { name: "Delete for good" }).click()
    await page.waitForURL(`**/#/mailboxes/${mailboxId}`)
    expect((await dashboard().GET("/api/threads/{threadId}", { params: { path: { threadId: old.thread_id } } })).response.status).toBe(404)
    expect(refusals(/^404 GET /)).toEqual([`404 GET ${server.url}/api/threads/${old.thread_id}`])

    // Mail an agent deletes leaves the open inbox without a reload (the event stream's email.deleted).
    await sendMail(server.smtpPort, { from: "spam@partner.test", to: address, subject: "Cheap watches", text: "Buy now." })
    const spam = page.getByRole("link", { name: /Cheap watches/ })
    await spam.waitFor()
    const spamId = (await until("the spam listed", async () => {
      return (await inbox())?.find((e) => e.subject === "Cheap watches")
    })).email_id
    await dashboard().DELETE("/api/emails/{emailId}", { params: { path: { emailId: spamId } } })
    await spam.waitFor({ state: "detached" })
  })

  it("acts on emails chosen in the inbox: marks them read and unread, deletes them (a refusal says why and changes nothing)", async () => {
    const subjects = ["Bulk one", "Bulk two", "Bulk three"]
    for (const subject of subjects) await sendMail(server.smtpPort, { from: "bulk@partner.test", to: address, subject, text: `About ${subject}.` })
    const listed = await until("the three emails listed", async () => {
      const mail = await inbox({ limit: 100 })
      const found = subjects.map((subject) => mail?.find((e) => e.subject === subject))
      return found.every(Boolean) ? found.map((e) => e!.email_id) : undefined
    })
    const [one, two, three] = listed as [string, string, string]
    const unreadOf = async (emailId: string) => (await emailOf(emailId)).data!.data.labels.includes("unread")
    const draft = await dashboard().POST("/api/mailboxes/{mailboxId}/drafts", { params: { path: { mailboxId } }, body: { in_reply_to: three, text: "On it." } })
    expect(draft.response.status).toBe(201)

    await page.goto(`/#/mailboxes/${mailboxId}`)
    const box = (subject: string) => page.getByRole("checkbox", { name: new RegExp(`^Choose "${subject}"`) })
    await box("Bulk three").waitFor()
    // Every email on the page, then none.
    await page.getByRole("checkbox", { name: "Choose every email on this page" }).check()
    const onPage = await page.getByRole("list", { name: "Emails" }).getByRole("checkbox").count()
    await page.getByText(`${onPage} chosen`).waitFor()
    await page.getByRole("checkbox", { name: "Choose every email on this page" }).uncheck()
    await page.getByRole("group", { name: "Chosen emails" }).waitFor({ state: "detached" })

    await box("Bulk one").check()
    await box("Bulk two").check()
    await page.getByText("2 chosen").waitFor()
    await page.getByRole("button", { name: "Mark read" }).click()
    await page.getByRole("status").getByText("2 emails marked read").waitFor()
    expect([await unreadOf(one), await unreadOf(two), await unreadOf(three)]).toEqual([false, false, true])
    expect(await box("Bulk one").isChecked()).toBe(false)
    await box("Bulk two").check()
    await page.getByRole("button", { name: "Mark unread" }).click()
    await page.getByRole("status").getByText("1 email marked unread").waitFor()
    expect([await unreadOf(one), await unreadOf(two)]).toEqual([false, true])

    // All three: the draft answering one refuses the whole batch, and none is deleted.
    for (const subject of subjects) await box(subject).check()
    await page.getByRole("button", { name: "Delete 3 emails" }).click()
    await page.getByText("These 3 emails go for good, with their attachments and search data. This cannot be undone.").waitFor()
    await page.getByRole("button", { name: "Delete for good" }).click()
    await page.getByText("An unsent draft replies to or forwards this mail: delete or change the draft first").waitFor()
    expect(refusals(/^409 POST /)).toEqual([`409 POST ${server.url}/api/emails/batch-delete`])
    for (const id of listed) expect((await emailOf(id)).response.status).toBe(200)
    // The other two go.
    await box("Bulk three").uncheck()
    await page.getByRole("button", { name: "Delete 2 emails" }).click()
    await page.getByRole("button", { name: "Delete for good" }).click()
    await page.getByRole("status").getByText("2 emails deleted").waitFor()
    await page.getByRole("link", { name: /Bulk one/ }).waitFor({ state: "detached" })
    await page.getByRole("link", { name: /Bulk two/ }).waitFor({ state: "detached" })
    expect(await box("Bulk three").isChecked()).toBe(false)
    expect([(await emailOf(one)).response.status, (await emailOf(two)).response.status, (await emailOf(three)).response.status]).toEqual([404, 404, 200])
    expect(refusals(/^404 GET /)).toHaveLength(2)
    await dashboard().DELETE("/api/mailboxes/{mailboxId}/drafts/{draftId}", { params: { path: { mailboxId, draftId: draft.data!.data.draft_id } } })
  })

  it("acts on conversations chosen in the grouped inbox: marks them read, deletes them whole", async () => {
    const from = "threads@partner.test"
    await sendMail(server.smtpPort, { from, to: address, subject: "Venue", text: "Which venue?", messageId: "<venue-1@partner.test>" })
    await sendMail(server.smtpPort, { from, to: address, subject: "Re: Venue", text: "The hall.", inReplyTo: "<venue-1@partner.test>", references: ["<venue-1@partner.test>"] })
    await sendMail(server.smtpPort, { from, to: address, subject: "Catering", text: "Menus attached soon." })
    const threads = await until("both conversations listed", async () => {
      const { data } = await dashboard().GET("/api/mailboxes/{mailboxId}/threads", { params: { path: { mailboxId }, query: { limit: 100 } } })
      const venue = data?.data.find((t) => t.subject === "Venue" && t.message_count === 2)
      const catering = data?.data.find((t) => t.subject === "Catering")
      return venue && catering ? { venue: venue.thread_id, catering: catering.thread_id } : undefined
    })
    const unreadIn = async (threadId: string) => {
      const { data } = await dashboard().GET("/api/threads/{threadId}", { params: { path: { threadId } } })
      return data!.data.emails.filter((e) => e.labels.includes("unread")).length
    }

    // From All mail, an email's Back link returns to All mail, not to the email's mailbox.
    await page.goto("/#/inbox")
    await page.locator("a.mail-link").first().click()
    await page.getByRole("button", { name: "Reply all" }).waitFor()
    await page.getByRole("link", { name: "← Back to the inbox" }).click()
    await expect.poll(() => new URL(page.url()).hash).toBe("#/inbox")

    await toMailboxList()
    await page.goto(`/#/mailboxes/${mailboxId}`)
    // Oldest first, then grouped: the order chosen stays.
    await page.getByLabel("Sort").selectOption("received_at:asc")
    await page.getByRole("checkbox", { name: "Group by conversation" }).check()
    const grouped = `#/mailboxes/${mailboxId}?view=conversations&sort=last_received_at%3Aasc`
    await expect.poll(() => new URL(page.url()).hash).toBe(grouped)
    await expect(page.getByLabel("Sort").inputValue()).resolves.toBe("last_received_at:asc")
    // A conversation's Back link returns to the list as it was left, as the browser's Back does.
    await page.locator("a.mail-link", { hasText: "Venue" }).click()
    await page.getByRole("heading", { name: "Venue", level: 1 }).waitFor()
    await page.getByRole("link", { name: "← Back to the inbox" }).click()
    await expect.poll(() => new URL(page.url()).hash).toBe(grouped)
    await expect(page.getByLabel("Sort").inputValue()).resolves.toBe("last_received_at:asc")
    const box = (subject: string) => page.getByRole("checkbox", { name: new RegExp(`^Choose the conversation "${subject}"`) })
    await box("Venue").waitFor()
    await box("Venue").check()
    await box("Catering").check()
    await page.getByRole("group", { name: "Chosen conversations" }).getByText("2 chosen").waitFor()
    await page.getByRole("button", { name: "Mark read" }).click()
    await page.getByRole("status").getByText("2 conversations marked read").waitFor()
    expect([await unreadIn(threads.venue), await unreadIn(threads.catering)]).toEqual([0, 0])
    // Back from a conversation, the list is as it was left (the page's URL keeps it): grouped.
    await page.getByRole("link", { name: /Catering/ }).first().click()
    await page.getByRole("heading", { name: "Catering", level: 1 }).waitFor()
    await page.goBack()
    await box("Catering").waitFor()
    expect(await page.getByRole("checkbox", { name: "Group by conversation" }).isChecked()).toBe(true)

    await box("Venue").check()
    await page.getByRole("button", { name: "Delete 1 conversation" }).click()
    await page.getByText("The conversation goes for good: every message, with its attachments and search data. This cannot be undone.").waitFor()
    await page.getByRole("button", { name: "Delete for good" }).click()
    await page.getByRole("status").getByText("1 conversation deleted (2 emails)").waitFor()
    await box("Venue").waitFor({ state: "detached" })
    expect((await dashboard().GET("/api/threads/{threadId}", { params: { path: { threadId: threads.venue } } })).response.status).toBe(404)
    expect(refusals(/^404 GET /)).toEqual([`404 GET ${server.url}/api/threads/${threads.venue}`])
    expect(await unreadIn(threads.catering)).toBe(0)
    await page.getByRole("checkbox", { name: "Group by conversation" }).uncheck()
  })

  it("creates a webhook for one mailbox among many: chosen by its box, listed as that mailbox's only", async () => {
    await page.getByRole("link", { name: "Webhooks" }).click()
    // A public address as a literal: checked without DNS. No event it subscribes to happens later in this suite.
    await page.getByLabel("Endpoint URL").fill("https://93.184.216.34/mail")
    await page.getByRole("checkbox", { name: "email.received" }).uncheck()
    await page.getByRole("checkbox", { name: "email.deleted" }).check()
    await page.getByRole("checkbox", { name: address, exact: true }).check()
    await page.getByRole("button", { name: "Create webhook" }).click()
    await page.getByTestId("new-secret").waitFor()
    await page.getByRole("button", { name: "Done" }).click()
    await page.getByText(`email.deleted · only ${address} · secret`).waitFor()
    const hooks = await dashboard().GET("/api/webhooks")
    expect(hooks.data?.data.map((w) => [w.url, w.events, w.mailbox_ids])).toEqual([["https://93.184.216.34/mail", ["email.deleted"], [mailboxId]]])

    // One for labelled mail only: a label the server refuses shows by the field, with its place in the list.
    await page.getByLabel("Endpoint URL").fill("https://93.184.216.34/labelled")
    await page.getByRole("checkbox", { name: "email.received" }).uncheck()
    await page.getByRole("checkbox", { name: "email.deleted" }).check()
    const labels = page.getByLabel("Only mail labelled (optional)")
    await labels.fill(`billing, ${"x".repeat(65)}`)
    await page.getByRole("button", { name: "Create webhook" }).click()
    await page.locator("#webhook-labels-note").getByText("must be at most 64 characters (item 2)").waitFor()
    await expect(labels.getAttribute("aria-invalid")).resolves.toBe("true")
    expect(refusals(/\/api\/webhooks$/)).toEqual([`400 POST ${server.url}/api/webhooks`])
    await labels.fill("billing, urgent")
    await page.getByRole("button", { name: "Create webhook" }).click()
    await page.getByTestId("new-secret").waitFor()
    await page.getByRole("button", { name: "Done" }).click()
    await page.getByText("email.deleted · every mailbox · mail labelled billing or urgent · secret").waitFor()
    const labelled = (await dashboard().GET("/api/webhooks")).data?.data.find((w) => w.url === "https://93.184.216.34/labelled")
    expect(labelled?.labels).toEqual(["billing", "urgent"])
  })

  it("makes an agent's key for one mailbox among many: chosen by its box, listed as that mailbox's only, reaching no other until changed", async () => {
    await page.getByRole("link", { name: "API keys" }).click()
    await page.getByLabel("New key name").fill("desk agent")
    await page.getByRole("checkbox", { name: address, exact: true }).check()
    await page.getByRole("button", { name: "Create key" }).click()
    const key = (await page.getByTestId("new-key").textContent())!
    await page.getByRole("button", { name: "Done" }).click()
    await page.getByText(`Only ${address} · Created`).waitFor()
    const keys = await dashboard().GET("/api/api-keys")
    expect(keys.data?.data.find((k) => k.name === "desk agent")?.mailboxIds).toEqual([mailboxId])
    const agent = withKey(server.url, { apiKey: key })
    expect((await agent.GET("/v1/api/mailboxes")).data?.mailboxes.map((m) => m.email_address)).toEqual([address])
    const another = (await mailboxesOf()).find((m) => m.mailbox_id !== mailboxId)!
    const reaches = async () => (await agent.GET("/v1/api/mailboxes/{mailboxId}", { params: { path: { mailboxId: another.mailbox_id } } })).response.status
    expect(await reaches()).toBe(404)

    // Widened to a second mailbox in place: it applies to the key's next request.
    await page.getByRole("button", { name: "Change desk agent" }).click()
    const editor = page.getByRole("form", { name: "Change key desk agent" })
    await editor.getByRole("checkbox", { name: another.email_address, exact: true }).check()
    await editor.getByRole("button", { name: "Save" }).click()
    await page.getByText(`Only ${address}, ${another.email_address} · Created`).waitFor()
    expect(await reaches()).toBe(200)
  })

  it("searches one mailbox among many: chosen by its address, kept in the page's address", async () => {
    await page.getByRole("link", { name: "Search" }).click()
    await page.getByLabel(/Search your mail/).fill("where is my parcel")
    await page.getByRole("button", { name: "Search", exact: true }).click()
    const parcel = page.getByRole("list", { name: "Results" }).getByRole("link", { name: /Where is my parcel\?/ }).first()
    await parcel.waitFor()
    // Another mailbox of the account holds none of that mail.
    const another = (await mailboxesOf()).find((m) => m.mailbox_id !== mailboxId)!
    await page.getByLabel("In", { exact: true }).selectOption({ label: another.email_address })
    await page.getByText("Nothing found (weak matches left out).").waitFor()
    expect(new URL(page.url()).hash).toBe(`#/search?q=where+is+my+parcel&mailbox=${another.mailbox_id}`)
    await page.getByLabel("In", { exact: true }).selectOption({ label: address })
    await parcel.waitFor()
  })

  it("says a mailbox that is not the account's is not found, and nothing else", async () => {
    for (const path of ["", "/drafts", "/compose"]) {
      await page.goto(`/#/mailboxes/mbx_doesnotexist${path}`)
      await page.getByRole("heading", { name: "Mailbox not found" }).waitFor()
      await page.getByRole("link", { name: "Go to your mailboxes" }).waitFor()
      await expect(page.getByRole("heading", { level: 1 }).count(), path).resolves.toBe(1)
      for (const absent of ["Loading…", "0 emails", "New email", "Save as draft", "Awaiting approval"]) {
        await expect(page.getByText(absent).count(), `${path}: ${absent}`).resolves.toBe(0)
      }
    }
    // The inbox's mailbox and mail, the drafts (awaiting and sent) and the compose page's mailbox answer 404.
    expect(refusals(/mbx_doesnotexist/).sort()).toEqual([
      `404 GET ${server.url}/api/mailboxes/mbx_doesnotexist`,
      `404 GET ${server.url}/api/mailboxes/mbx_doesnotexist`,
      `404 GET ${server.url}/api/mailboxes/mbx_doesnotexist/drafts?status=draft&limit=100&offset=0`,
      `404 GET ${server.url}/api/mailboxes/mbx_doesnotexist/drafts?status=sent&limit=20`,
      `404 GET ${server.url}/api/mailboxes/mbx_doesnotexist/emails?limit=20&offset=0&sort=received_at%3Adesc`
    ])
  })

  /** The server's answer to a request past the session's rate limit, for a page's request refused on purpose. */
  const tooMany = {
    status: 429,
    contentType: "application/json",
    headers: { "retry-after": "42" },
    body: JSON.stringify({ success: false, error: { code: "RATE_LIMIT_EXCEEDED", message: "Rate limit of 500 requests per minute exceeded", details: { limit: 500, window: "minute", retry_after: 42 } } })
  }

  it("shows a failed load (a 429) with what to do instead of a spinner or stale results, and tries again", async () => {
    const refusedOnce = (pattern: string) => page.route(pattern, (route) => route.fulfill(tooMany), { times: 1 })
    const failedLoad = async () => {
      const alert = page.getByRole("alert")
      await expect(alert.textContent()).resolves.toMatch(/^Rate limit of 500 requests per minute exceeded\s*Too many requests this minute: try again in 42 s\.\s*Try again$/)
      await expect(page.getByText("Loading…").count()).resolves.toBe(0)
    }

    await refusedOnce("**/api/mailboxes/*/emails?*")
    await page.goto(`/#/mailboxes/${mailboxId}`)
    await failedLoad()
    await expect(page.getByText(/\d+ emails?$/).count()).resolves.toBe(0)
    await page.getByRole("button", { name: "Try again" }).click()
    await page.getByRole("link", { name: /^Bob Buyer Where is my parcel\?/ }).waitFor()
    await expect(page.getByRole("alert").count()).resolves.toBe(0)

    // The mailbox's own lookup refused: the mail it read stays listed; trying again brings the heading.
    await page.route(new RegExp(`/api/mailboxes/${mailboxId}$`), (route) => route.fulfill(tooMany), { times: 1 })
    await toMailboxList()
    await page.goto(`/#/mailboxes/${mailboxId}`)
    await page.getByRole("link", { name: /^Bob Buyer Where is my parcel\?/ }).waitFor()
    await failedLoad()
    await expect(page.getByRole("heading", { name: "Inbox" }).count()).resolves.toBe(1)
    await page.getByRole("button", { name: "Read the mailbox's details again" }).click()
    await page.getByRole("link", { name: "New email" }).waitFor()
    await expect(page.getByRole("alert").count()).resolves.toBe(0)

    await refusedOnce("**/api/drafts?*")
    await page.goto("/#/drafts")
    await failedLoad()
    await page.getByRole("button", { name: "Try again" }).click()
    await page.getByRole("list", { name: "Drafts awaiting approval" }).getByText("Routine note 99").waitFor()

    // The keys list refused just after a key is made: said with when to try again, the list last read kept, never "No keys yet."
    await page.goto("/#/keys")
    await page.getByRole("button", { name: "Change drafting agent" }).waitFor()
    await refusedOnce("**/api/api-keys?*")
    await page.getByLabel("New key name").fill("made at the limit")
    await page.getByRole("button", { name: "Create key" }).click()
    await page.getByTestId("new-key").waitFor()
    await failedLoad()
    await expect(page.getByText("No keys yet.").count()).resolves.toBe(0)
    await page.getByRole("button", { name: "Change drafting agent" }).waitFor()
    await page.getByRole("button", { name: "Read the keys again" }).click()
    await page.getByRole("button", { name: "Change made at the limit" }).waitFor()
    await expect(page.getByRole("alert").count()).resolves.toBe(0)

    // Search: a failed query takes the previous query's results off the page.
    await page.getByRole("link", { name: "Search" }).click()
    await page.getByLabel(/Search your mail/).fill("parcel")
    const results = page.getByRole("list", { name: "Results" })
    for (let tries = 0; tries < 30 && (await results.count()) === 0; tries++) {
      await page.getByRole("button", { name: "Search", exact: true }).click()
      await results.or(page.getByText("Nothing found")).waitFor()
      if ((await results.count()) === 0) await sleep(1000)
    }
    await results.waitFor({ timeout: 1000 })
    await refusedOnce("**/api/search")
    await page.getByLabel(/Search your mail/).fill("warehouse")
    await page.getByRole("button", { name: "Search", exact: true }).click()
    await failedLoad()
    await expect(results.count()).resolves.toBe(0)
    await page.getByRole("button", { name: "Try again" }).click()
    await results.or(page.getByText("Nothing found")).waitFor()
    await expect(page.getByRole("alert").count()).resolves.toBe(0)

    expect(refusals(/^429 /)).toEqual([
      expect.stringMatching(new RegExp(`^429 GET ${server.url}/api/mailboxes/${mailboxId}/emails\\?`)),
      `429 GET ${server.url}/api/mailboxes/${mailboxId}`,
      `429 GET ${server.url}/api/drafts?status=draft&limit=100&offset=0`,
      `429 GET ${server.url}/api/api-keys?limit=100`,
      `429 POST ${server.url}/api/search`
    ])
  })

  it("files mail with a filter: a bad sender refused by its field, mail already received checked then changed, new mail labelled, turned off, deleted", async () => {
    await sendMail(server.smtpPort, { from: "Letters <news@letters.test>", to: address, subject: "Weekly letter 1", text: "News. Unsubscribe here." })
    const first = await until("the first letter listed", async () => {
      return (await inbox())?.find((e) => e.subject === "Weekly letter 1")
    })
    // The mailboxes refused (the session's limit reached): said where the choice is, not an empty choice; read again on asking.
    await page.route("**/api/mailboxes?*", (route) => route.fulfill(tooMany), { times: 1 })
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Filters" }).click()
    await page.getByRole("heading", { name: "Filters", exact: true }).waitFor()
    await page.getByText("No filters yet.").waitFor()
    const form = page.getByRole("form", { name: "New filter" })
    const unread = form.getByRole("alert")
    await expect(unread.textContent()).resolves.toMatch(
      /^Your mailboxes could not be read, so none can be chosen here: Rate limit of 500 requests per minute exceeded\s*Too many requests this minute: try again in 42 s\.\s*Try again$/)
    await form.getByRole("button", { name: "Read your mailboxes again" }).click()
    await unread.waitFor({ state: "detached" })
    expect(refusals(/^429 /)).toEqual([`429 GET ${server.url}/api/mailboxes?limit=100&offset=0`])
    const fromField = page.getByLabel("From (ada@example.com, example.com or *.example.com)")
    await fromField.fill("letters.test, not a domain")
    await page.getByLabel("Labels to add (comma-separated)").fill("newsletters")
    await page.getByLabel("Mark as read").check()
    await page.getByLabel("Mailbox", { exact: true }).selectOption({ label: address })
    await form.getByRole("button", { name: "Create filter" }).click()
    await page.locator("#filter-from-note").getByText(/must not contain spaces.*\(item 2\)/).waitFor()
    await expect(fromField.getAttribute("aria-invalid")).resolves.toBe("true")
    expect(refusals(/\/api\/filters$/)).toEqual([`400 POST ${server.url}/api/filters`])
    await fromField.fill("letters.test")
    await form.getByRole("button", { name: "Create filter" }).click()
    const filters = page.getByRole("list", { name: "Filters" })
    await filters.getByText("When from letters.test: label newsletters, mark read.").waitFor()
    await filters.getByText(`${address} · 0 emails filtered`).waitFor()
    const [created] = (await dashboard().GET("/api/filters")).data!.data
    expect(created).toMatchObject({ mailbox_id: mailboxId, conditions: { from: ["letters.test"] }, actions: { add_labels: ["newsletters"], remove_labels: ["unread"] } })

    // The letter that came before: counted, then changed.
    await page.getByRole("button", { name: "Check received mail: from letters.test" }).click()
    await filters.getByText(/received, 1 match; 1 would change\.$/).waitFor()
    await page.getByRole("button", { name: /^Apply to \d+ emails?: from letters\.test$/ }).click()
    await filters.getByText(/^1 email changed/).waitFor()
    expect((await emailOf(first.email_id)).data?.data.labels).toEqual(["inbound", "unauthenticated", "newsletters"])

    // The next one arrives filed.
    await sendMail(server.smtpPort, { from: "news@letters.test", to: address, subject: "Weekly letter 2", text: "More news." })
    const second = await until("the second letter listed", async () => {
      return (await inbox())?.find((e) => e.subject === "Weekly letter 2")
    })
    expect(second.labels).toEqual(["inbound", "unauthenticated", "newsletters"])

    // Changed in the form it was made with: its fields as they are, then saved.
    await page.getByRole("button", { name: "Edit from letters.test" }).click()
    const editForm = page.getByRole("form", { name: "Edit filter" })
    await expect(editForm.getByLabel("From (ada@example.com, example.com or *.example.com)").inputValue()).resolves.toBe("letters.test")
    await expect(editForm.getByLabel("Mark as read").isChecked()).resolves.toBe(true)
    await editForm.getByLabel("Labels to add (comma-separated)").fill("newsletters, reading")
    await editForm.getByRole("button", { name: "Save filter" }).click()
    await filters.getByText("When from letters.test: label newsletters, label reading, mark read.").waitFor()
    await page.getByRole("form", { name: "New filter" }).waitFor()
    expect((await dashboard().GET("/api/filters")).data?.data[0]).toMatchObject({
      mailbox_id: mailboxId,
      actions: { add_labels: ["newsletters", "reading"], remove_labels: ["unread"] }
    })

    await page.getByRole("button", { name: "Turn off from letters.test" }).click()
    await filters.getByText("off", { exact: true }).waitFor()
    expect((await dashboard().GET("/api/filters")).data?.data[0]?.enabled).toBe(false)
    await page.getByRole("button", { name: "Delete from letters.test" }).click()
    await page.getByText("No filters yet.").waitFor()
    expect((await dashboard().GET("/api/filters")).data?.data).toEqual([])
  })

  it("fits a 375 px screen on the new pages, and had no console error or failed request besides the refusals above", async () => {
    await page.setViewportSize({ width: 375, height: 740 })
    const pages: Array<[string, string]> = [
      [`#/mailboxes/${mailboxId}/compose`, "Save as draft"],
      [`#/mailboxes/${mailboxId}/drafts`, "New email"],
      [`#/mailboxes/${mailboxId}/forwarding`, "Not forwarded anywhere."],
      [`#/mailboxes/${mailboxId}/auto-reply`, "Days before answering a sender again"],
      ["#/drafts", "Awaiting approval"],
      [`#/emails/${inboundId}`, "Read the whole conversation"],
      ...sentIds.map((id): [string, string] => [`#/emails/${id}`, "Last answer"]),
      ["#/domains", "Migrate mailboxes"],
      ["#/filters", "Your filters"],
      [`#/threads/${(await emailOf(inboundId)).data!.data.thread_id}`, "oldest first"]
    ]
    for (const [path, shown] of pages) {
      await page.goto(`/${path}`)
      // Once the page has its content: its heading, and what its content shows.
      await page.getByRole("heading", { level: 1 }).waitFor()
      await page.getByText(shown).first().waitFor()
      // The message names what sticks out, should anything.
      const wide = await page.evaluate(`[...document.querySelectorAll("main *")].filter((e) => e.getBoundingClientRect().right > 376)
        .map((e) => e.tagName + "." + e.className + " " + Math.round(e.getBoundingClientRect().right)).slice(-5).join("; ")`)
      expect(await page.evaluate("document.documentElement.scrollWidth"), `${path}: ${wide}`).toBeLessThanOrEqual(375)
      // A status pill ("bounced", "awaiting approval") is never broken across lines ("boun|ced").
      const split = await page.evaluate(`[...document.querySelectorAll("main .tag")].filter((t) => !t.closest(".tags"))
        .filter((t) => t.getBoundingClientRect().height > parseFloat(getComputedStyle(t).lineHeight) + 3).map((t) => t.textContent)`)
      expect(split, path).toEqual([])
    }
    await page.setViewportSize({ width: 1280, height: 800 })
    expect(watched.problems).toEqual([])
  })

  it("opens a page linked while signed out once signed in, and says a page that does not exist is not found", async () => {
    // Signed out first: the suite's account ends here.
    await page.getByRole("button", { name: "Sign out" }).click()
    await page.getByRole("heading", { name: "Sign in" }).waitFor()
    // The form shows at once and the URL follows when the logout is answered: a link opened before
    // then would be replaced by #/signin (a CI run's was, and the sign-in went to the mailboxes).
    await page.waitForURL(/#\/signin$/)
    const visitor = await signUp(server.url)
    await page.goto("/#/keys")
    await page.getByRole("heading", { name: "Sign in" }).waitFor()
    await page.getByLabel("Email").fill(visitor.email)
    await page.getByLabel("Password").fill("correct horse battery")
    await page.getByRole("button", { name: "Sign in" }).click()
    await page.getByRole("heading", { name: "API keys" }).waitFor()
    await page.goto("/#/no-such-page")
    await page.getByRole("heading", { name: "Page not found" }).waitFor()
    await page.getByRole("link", { name: "Go to your mailboxes" }).click()
    await page.getByRole("heading", { name: "Mailboxes" }).waitFor()
    await page.getByRole("button", { name: "Sign out" }).click()
    await page.getByRole("heading", { name: "Sign in" }).waitFor()
  })
})
