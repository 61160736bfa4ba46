/**
 * Headless Chromium from Debian's `chromium` package, driven by playwright-core (no browser
 * download). Every page opened through `openPage` records what the dashboard must never do: a
 * console error, an uncaught exception, a request answered 4xx/5xx or failing outright.
 */
import * as fs from "node:fs"
import { type Browser, chromium, type Page } from "playwright-core"

export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"

export const chromiumAvailable = () => fs.existsSync(CHROMIUM)

export const launchBrowser = (): Promise<Browser> =>
  chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox", "--disable-dev-shm-usage"] })

export interface WatchedPage {
  readonly page: Page
  /** Console errors, page errors and failed requests seen so far, one line each. */
  readonly problems: Array<string>
}

export const openPage = async (browser: Browser, baseUrl: string, viewport = { width: 1280, height: 800 }): Promise<WatchedPage> => {
  const context = await browser.newContext({ viewport, baseURL: baseUrl })
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: baseUrl })
  const page = await context.newPage()
  const problems: Array<string> = []
  page.on("console", (message) => {
    if (message.type() === "error") problems.push(`console: ${message.text()}`)
  })
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`))
  page.on("response", (response) => {
    if (response.status() >= 400) problems.push(`${response.status()} ${response.request().method()} ${response.url()}`)
  })
  page.on("requestfailed", (request) => {
    // An EventSource the page closes, or a request it drops (both at sign-out), ends as aborted: the
    // page's own doing, not a failure; so does a fetch of the browser's own ("other": the page's icon,
    // which Chromium fetches after the page has loaded and cancels when it likes, at a reload say).
    const dropped = ["eventsource", "fetch", "other"].includes(request.resourceType()) && request.failure()?.errorText === "net::ERR_ABORTED"
    if (!page.isClosed() && !dropped) problems.push(`failed ${request.method()} ${request.url()}: ${request.failure()?.errorText}`)
  })
  return { page, problems }
}

/**
 * The failed requests seen so far that match `pattern` (refusals a test provoked on purpose), taken
 * off the page's record with the console line the browser writes for each ("Failed to load
 * resource: … status of 422"), so that what remains are the problems no test asked for.
 */
export const takeRefusals = (watched: WatchedPage, pattern: RegExp): Array<string> => {
  const matching = watched.problems.filter((p) => pattern.test(p))
  let rest = watched.problems.filter((p) => !pattern.test(p))
  for (const refusal of matching) {
    const status = refusal.split(" ")[0]
    const line = rest.findIndex((p) => p.startsWith("console: Failed to load resource") && p.includes(`status of ${status} `))
    if (line >= 0) rest = [...rest.slice(0, line), ...rest.slice(line + 1)]
  }
  watched.problems.splice(0, watched.problems.length, ...rest)
  return matching
}

/**
 * What the dashboard's longer walks start with: sign up as `name` at `email`, move to the enterprise
 * plan (a walk makes more requests a minute than the free plan allows), and create the mailbox
 * `localPart` (whose address is `address`), ending on the mailboxes page with its link shown.
 */
export const signUpWithMailbox = async (
  page: Page,
  account: { readonly name: string; readonly email: string; readonly localPart: string; readonly address: string }
): Promise<void> => {
  await page.goto("/")
  await page.getByRole("link", { name: "Create an account" }).click()
  await page.getByLabel("Name").fill(account.name)
  await page.getByLabel("Email").fill(account.email)
  await page.getByLabel("Password").fill("correct horse battery")
  await page.getByRole("button", { name: "Sign up" }).click()
  await page.getByRole("heading", { name: "Mailboxes" }).waitFor()
  await page.getByRole("link", { name: "Billing" }).click()
  await page.getByRole("button", { name: "Upgrade to Enterprise" }).click()
  await page.getByRole("button", { name: "Confirm and pay" }).click()
  await page.getByRole("heading", { name: "Plan: Enterprise" }).waitFor()
  await page.getByRole("link", { name: "Mailboxes" }).click()
  await page.getByLabel("New mailbox address").fill(account.localPart)
  await page.getByText("is available").waitFor()
  await page.getByRole("button", { name: "Create mailbox" }).click()
  await page.getByRole("link", { name: account.address }).waitFor()
}

/**
 * Signs up with a mailbox as `signUpWithMailbox` does, then opens that mailbox's page (shown once
 * its Meetings link is) and answers the mailbox's id, read from the page's address
 * (`#/mailboxes/<id>/…`).
 */
export const signUpAndOpenMailbox = async (
  page: Page,
  account: { readonly name: string; readonly email: string; readonly localPart: string; readonly address: string }
): Promise<string> => {
  await signUpWithMailbox(page, account)
  await page.getByRole("link", { name: account.address }).click()
  await page.getByRole("link", { name: "Meetings" }).waitFor()
  return new URL(page.url()).hash.split("/")[2]!
}

/**
 * A dashboard suite's teardown (its afterAll): closes the browser (its context and watched page go
 * with it), stops the suite's server, disposes of its backend (data directory, or database and
 * streams), then closes the suite's own servers (`others`: an MX, a DNS server, a recorder) in the
 * order given. What the suite's beforeAll never got to start is passed over; the first part that
 * fails to close ends the teardown and fails the suite.
 */
export const closeDashboardSuite = async (
  started: {
    readonly browser: Browser | undefined
    readonly server: { readonly stop: () => Promise<unknown> } | undefined
    readonly backend: { readonly dispose: () => Promise<unknown> } | undefined
  },
  ...others: ReadonlyArray<{ readonly close: () => Promise<unknown> } | undefined>
): Promise<void> => {
  await started.browser?.close()
  await started.server?.stop()
  await started.backend?.dispose()
  for (const other of others) await other?.close()
}
