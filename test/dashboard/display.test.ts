/**
 * How the dashboard lays out what people wrote, in a real browser: right-to-left text (Hebrew) runs
 * right to left wherever it shows (its punctuation at its end, on the left), internationalized domains
 * show in Unicode (the stored A-label on hover), a search follows its page's URL when that changes
 * under it (typed in the address bar, Back and Forward), and a very long subject is cut to one line in
 * a list (whole on hover) and wrapped, whole, on the email's page. A suite of its own (its own server
 * and account).
 */
import { domainToUnicode } from "node:url"
import type { Browser, Locator, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { chromiumAvailable, closeDashboardSuite, launchBrowser, openPage, signUpAndOpenMailbox, type WatchedPage } from "../support/browser.ts"
import { emailWithSubject, type SessionApi, sessionApi } from "../support/session-api.ts"
import { fresh } from "../support/mailboxes.ts"
import { sendMail } from "../support/send-mail.ts"
import { tellOnFailure } from "../support/tell-on-failure.ts"
import { createBackend, freePort, type Backend, type Server, startServer } from "../support/server.ts"
import { until } from "../support/wait.ts"

const runnable = chromiumAvailable() || Boolean(process.env.CI)

// What the functions run in the page use of it (this project's types have no DOM).
declare const document: any, NodeFilter: any, getComputedStyle: (element: unknown) => any, innerWidth: number, location: { hash: string }

const IDN_DOMAIN = "xn--mnchen-3ya.localhost"
const HEBREW_SUBJECT = "שלום, מה שלומך?"
const HEBREW_LINE = "הפגישה ב-10:30, חדר 5."
/** 1,150 characters, most of them one unbroken token (a tracking link), as a reviewer's sample had. */
const LONG_SUBJECT = `Re: Link https://example.com/track?id=${"a1b2c3d4".repeat(140)}`.slice(0, 1150)

/**
 * Where the character at `index` of `text` (found in `locator`'s text) is drawn, left to right: its
 * box's left edge in the viewport.
 */
const xOf = (locator: Locator, text: string, index: number): Promise<number> =>
  locator.evaluate((element, [text, index]) => {
    const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT)
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const at: number = node.textContent.indexOf(text)
      if (at < 0) continue
      const range = document.createRange()
      range.setStart(node, at + index)
      range.setEnd(node, at + index + 1)
      return range.getBoundingClientRect().left
    }
    throw new Error(`no text ${text}`)
  }, [text, index] as const)

/** A property of `locator`'s computed style. */
const styleOf = (locator: Locator, property: string): Promise<string> =>
  locator.evaluate((element, property) => getComputedStyle(element)[property], property)

/** Whether the page scrolls sideways (something wider than the window). */
const scrollsSideways = (page: Page): Promise<boolean> => page.evaluate(() => document.documentElement.scrollWidth > innerWidth)

/** Whether `text`, in `locator`, is laid out right to left: its last character (the "?" or ".") left of its first. */
const readsRightToLeft = async (locator: Locator, text: string) => (await xOf(locator, text, text.length - 1)) < (await xOf(locator, text, 0))

describe.runIf(runnable)("the dashboard: how people's text is laid out", () => {
  let backend: Backend
  let server: Server
  let browser: Browser
  let watched: WatchedPage
  let page: Page
  const localPart = fresh("desk")
  const address = `${localPart}@agents.localhost`
  const idnLocal = fresh("idn")
  let mailboxId = ""

  /** The session's API, as the page calls it. */
  const api: SessionApi = (method, path, body) => sessionApi(page, server.url)(method, path, body)
  /** The mailbox's email whose subject is `subject`, once it is stored. */
  const withSubject = (subject: string) => emailWithSubject(api, mailboxId, subject)

  beforeAll(async () => {
    backend = await createBackend()
    const port = await freePort()
    server = await startServer({
      ...backend.env,
      PORT: String(port),
      APP_URL: `http://127.0.0.1:${port}`,
      SHARED_DOMAINS: `agents.localhost,${IDN_DOMAIN}`
    })
    browser = await launchBrowser()
    watched = await openPage(browser, server.url)
    page = watched.page
  })

  tellOnFailure(() => server, () => watched)

  afterAll(() => closeDashboardSuite({ browser, server, backend }))

  it("signs up and receives a Hebrew email, a long-subject one and two to search for", async () => {
    mailboxId = await signUpAndOpenMailbox(page, { name: "Dana Display", email: `${fresh("dana")}@example.com`, localPart, address })
    await sendMail(server.smtpPort, {
      from: { name: "יוסף כהן", address: "yosef@example.co.il" },
      to: address,
      subject: HEBREW_SUBJECT,
      text: `${HEBREW_SUBJECT}\n${HEBREW_LINE}\n`
    })
    await sendMail(server.smtpPort, {
      to: address,
      subject: "Mixed lines",
      text: `The meeting moved, the note says:\n${HEBREW_SUBJECT}\n`
    })
    await sendMail(server.smtpPort, { to: address, subject: LONG_SUBJECT, text: "A long subject." })
    await sendMail(server.smtpPort, { to: address, subject: "Harbour crane inspection", text: "The harbour crane passed its inspection." })
    await sendMail(server.smtpPort, { to: address, subject: "Orchard apricot harvest", text: "The orchard apricot harvest starts on Monday." })
    for (const subject of [HEBREW_SUBJECT, "Mixed lines", LONG_SUBJECT]) await withSubject(subject)
  })

  it("lays right-to-left text out right to left: in the list, on the email's page, line by line in a mixed text", async () => {
    await page.goto(`/#/mailboxes/${mailboxId}`)
    const row = page.getByRole("list", { name: "Emails" }).getByRole("link").filter({ hasText: "יוסף כהן" })
    await row.waitFor()
    expect(await readsRightToLeft(row.locator(".subject"), HEBREW_SUBJECT)).toBe(true)
    expect(await readsRightToLeft(row.locator(".snippet"), HEBREW_LINE)).toBe(true)

    await row.click()
    const heading = page.getByRole("heading", { level: 1, name: HEBREW_SUBJECT })
    await heading.waitFor()
    expect(await readsRightToLeft(heading, HEBREW_SUBJECT)).toBe(true)
    const body = page.locator("pre.mail-text")
    expect(await readsRightToLeft(body, HEBREW_LINE)).toBe(true)

    // A text whose first line is English: its Hebrew line still runs right to left, its "?" on the left.
    await page.goto(`/#/emails/${await withSubject("Mixed lines")}`)
    await page.getByRole("heading", { level: 1, name: "Mixed lines" }).waitFor()
    const mixed = page.locator("pre.mail-text")
    expect(await readsRightToLeft(mixed, "The meeting moved")).toBe(false)
    expect(await readsRightToLeft(mixed, HEBREW_SUBJECT)).toBe(true)

    // What a person types takes its own direction too: a Hebrew subject in the new email's form.
    await page.goto(`/#/mailboxes/${mailboxId}/compose`)
    await page.getByLabel("Subject").fill(HEBREW_SUBJECT)
    await expect(styleOf(page.getByLabel("Subject"), "direction")).resolves.toBe("rtl")
    await page.getByLabel("Message").fill(`${HEBREW_SUBJECT}\n${HEBREW_LINE}`)
    await expect(styleOf(page.getByLabel("Message"), "direction")).resolves.toBe("rtl")
  })

  it("shows an internationalized domain in Unicode, as Node's domainToUnicode reads it, with the A-label on hover", async () => {
    const unicode = `${idnLocal}@${domainToUnicode(IDN_DOMAIN)}`
    const stored = `${idnLocal}@${IDN_DOMAIN}`
    expect(unicode).toBe(`${idnLocal}@münchen.localhost`)
    await page.goto("/#/")
    await page.getByLabel("New mailbox address").fill(idnLocal)
    await page.getByLabel("Domain").first().selectOption({ label: "@münchen.localhost" })
    await page.getByText(`${unicode} is available`).waitFor()
    await page.getByRole("button", { name: "Create mailbox" }).click()
    const link = page.getByRole("list", { name: "Mailboxes" }).getByRole("link", { name: unicode })
    await link.waitFor()
    await expect(link.getAttribute("title")).resolves.toBe(stored)
    await expect(page.getByText(stored, { exact: true }).count()).resolves.toBe(0)
    await link.click()
    await page.getByRole("heading", { level: 1, name: unicode }).waitFor()
    await expect(page.getByRole("heading", { level: 1 }).getAttribute("title")).resolves.toBe(stored)
    // The API's own addresses are the A-label: what the dashboard shows is only the display.
    const { mailboxes }: { mailboxes: Array<{ email_address: string }> } = await page.request.get("/api/mailboxes?limit=100").then((r) => r.json())
    expect(mailboxes.map((m) => m.email_address)).toContain(stored)
  })

  it("searches again when the page's URL names another search: typed in the address bar, Back, Forward", async () => {
    await until("both emails indexed", async () => {
      const found = await Promise.all(["harbour crane", "orchard apricot"].map(async (query) => {
        const results: Array<{ subject: string }> = await api("POST", "/api/search", { query, limit: 5 })
        return results.map((r) => r.subject)
      }))
      return found[0]!.includes("Harbour crane inspection") && found[1]!.includes("Orchard apricot harvest") ? true : undefined
    }, 60_000, 250)
    const results = page.getByRole("list", { name: "Results" })
    const first = (name: string) => results.getByRole("link").first().filter({ hasText: name })
    await page.goto("/#/search?q=harbour+crane")
    await first("Harbour crane inspection").waitFor()
    // The address bar edited: a hash change, no reload.
    await page.evaluate(() => void (location.hash = "#/search?q=orchard+apricot"))
    await first("Orchard apricot harvest").waitFor()
    await expect(page.getByLabel(/Search your mail/).inputValue()).resolves.toBe("orchard apricot")
    await page.goBack()
    await first("Harbour crane inspection").waitFor()
    await expect(page.getByLabel(/Search your mail/).inputValue()).resolves.toBe("harbour crane")
    await page.goForward()
    await first("Orchard apricot harvest").waitFor()
    await expect(page.getByLabel(/Search your mail/).inputValue()).resolves.toBe("orchard apricot")
  })

  it("cuts a long subject to one line in the list (whole on hover) and wraps it whole on the email's page", async () => {
    for (const width of [1280, 375]) {
      await page.setViewportSize({ width, height: 800 })
      await page.goto(`/#/mailboxes/${mailboxId}`)
      const subject = page.getByRole("list", { name: "Emails" }).getByTitle(LONG_SUBJECT, { exact: true })
      await subject.waitFor()
      const box = await subject.evaluate((element: any) => ({
        height: element.getBoundingClientRect().height as number,
        lineHeight: parseFloat(getComputedStyle(element).lineHeight),
        cut: element.scrollWidth > element.clientWidth,
        ellipsis: getComputedStyle(element).textOverflow as string
      }))
      expect(box, `at ${width} px`).toMatchObject({ cut: true, ellipsis: "ellipsis" })
      expect(box.height, `at ${width} px`).toBeLessThan(box.lineHeight * 1.5)
      // The page does not scroll sideways for it.
      await expect(scrollsSideways(page)).resolves.toBe(false)
    }
    await page.setViewportSize({ width: 1280, height: 800 })
    await page.goto(`/#/emails/${await withSubject(LONG_SUBJECT)}`)
    const heading = page.getByRole("heading", { level: 1 })
    await expect(heading.textContent()).resolves.toBe(LONG_SUBJECT)
    await expect(heading.evaluate((element: any) => element.scrollWidth <= element.clientWidth && element.getBoundingClientRect().height > 100)).resolves.toBe(true)
    await expect(scrollsSideways(page)).resolves.toBe(false)
  })
})
