/**
 * Calendars in the dashboard, in a real browser: an email carrying an invitation shows it as a card
 * answered with Accept (the organizer's MX gets the calendar reply), and a mailbox's Meetings page
 * shows what is coming up (that invitation, answered), schedules a meeting (a refusal shown by its
 * field), shows the attendees' answers and cancels it. Whole days show their last day, not iCalendar's
 * end (the day after); an invitation an update replaced, or its organizer cancelled, says so. Times are
 * days from now, so the page's next two weeks hold them whenever the suite runs.
 * Outbound mail goes to a receiving SMTP server this suite runs, found through a DNS server it runs.
 * A suite of its own (its own server and account), beside sending.test.ts's long walk.
 */
import type { Browser, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { chromiumAvailable, closeDashboardSuite, launchBrowser, openPage, signUpAndOpenMailbox, takeRefusals, type WatchedPage } from "../support/browser.ts"
import { emailWithSubject, type SessionApi, sessionApi } from "../support/session-api.ts"
import { type DnsServer, startDnsServer } from "../support/dns-server.ts"
import { fresh } from "../support/mailboxes.ts"
import { deliveredWithSubject, type MxServer, recipientsWithSubject, startMxServer } from "../support/mx-server.ts"
import { sendMail } from "../support/send-mail.ts"
import { createBackend, freePort, type Backend, type Server, startServer } from "../support/server.ts"

const runnable = chromiumAvailable() || Boolean(process.env.CI)

/** Midnight UTC `days` from today, as YYYY-MM-DD. */
const daysAhead = (days: number) => new Date(Date.now() + days * 86_400_000).toISOString().slice(0, 10)
/** The same day as iCalendar writes a date (YYYYMMDD). */
const icalDay = (days: number) => daysAhead(days).replaceAll("-", "")

describe.runIf(runnable)("the dashboard: invitations and meetings", () => {
  let backend: Backend
  let server: Server
  let browser: Browser
  let mx: MxServer
  let names: DnsServer
  let watched: WatchedPage
  let page: Page
  const localPart = fresh("desk")
  const address = `${localPart}@agents.localhost`
  let mailboxId = ""

  /** The refusals a test provoked on purpose, taken off the page's record of problems. */
  const refusals = (pattern: RegExp) => takeRefusals(watched, pattern)
  /** The message the MX took whose subject is `subject`. */
  const delivered = (subject: string) => deliveredWithSubject(mx, subject)
  /** A day (YYYY-MM-DD) as the page's browser writes it with `style` (its locale and zone are the page's). */
  const dayInPage = (date: string, style: Intl.DateTimeFormatOptions) =>
    page.evaluate(([d, s]) => new Date(`${d}T00:00:00`).toLocaleDateString([], s), [date, style] as const)
  /** The session's API, as the page calls it. */
  const api: SessionApi = (method, path, body) => sessionApi(page, server.url)(method, path, body)
  /** The mailbox's email whose subject is `subject`, once it is stored. */
  const withSubject = (subject: string) => emailWithSubject(api, mailboxId, subject)
  /** Until the mailbox's schedule holds the event `uid` as `email_id` brought it, with `status`. */
  const scheduled = async (uid: string, emailId: string, status = "confirmed") => {
    const range = `from=${daysAhead(-1)}T00:00:00Z&to=${daysAhead(13)}T00:00:00Z&include_cancelled=true`
    for (let tries = 0; tries < 200; tries++) {
      const items: Array<{ uid: string; email_id: string; status: string }> = await api("GET", `/api/mailboxes/${mailboxId}/schedule?${range}`)
      if (items.some((o) => o.uid === uid && o.email_id === emailId && o.status === status)) return
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    throw new Error(`${uid} never was ${status} from ${emailId} on the schedule`)
  }

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
      OUTBOUND_ALLOW_PRIVATE: "true"
    })
    browser = await launchBrowser()
    watched = await openPage(browser, server.url)
    page = watched.page
  })

  afterAll(() => closeDashboardSuite({ browser, server, backend }, mx, names))

  it("signs up on the enterprise plan and makes a mailbox", async () => {
    mailboxId = await signUpAndOpenMailbox(page, { name: "Grace Scheduler", email: `${fresh("grace")}@example.com`, localPart, address })
    expect(mailboxId).toMatch(/^mbx_/)
  })

  it("shows a calendar invitation and answers it: the organizer's MX gets the calendar reply, and the answer shows", async () => {
    const ics = [
      "BEGIN:VCALENDAR", "VERSION:2.0", "METHOD:REQUEST", "BEGIN:VEVENT", "UID:review-7@partner.test", "SEQUENCE:0",
      `DTSTART;TZID=Europe/Paris:${daysAhead(3).replaceAll("-", "")}T150000`, `DTEND;TZID=Europe/Paris:${daysAhead(3).replaceAll("-", "")}T154500`,
      "SUMMARY:Contract review",
      "LOCATION:Room 4", "ORGANIZER;CN=Ada Lovelace:mailto:ada@partner.test", `ATTENDEE;PARTSTAT=NEEDS-ACTION;RSVP=TRUE:mailto:${address}`,
      "ATTENDEE;PARTSTAT=ACCEPTED:mailto:ada@partner.test", "END:VEVENT", "END:VCALENDAR", ""
    ].join("\r\n")
    await sendMail(server.smtpPort, {
      from: "Ada Lovelace <ada@partner.test>",
      to: address,
      subject: "Invitation: Contract review",
      text: "You are invited.",
      icalEvent: { method: "REQUEST", content: ics }
    })
    await page.getByRole("link", { name: "Inbox", exact: true }).click()
    await page.getByRole("link", { name: /Invitation: Contract review/ }).click()
    const card = page.getByRole("region", { name: "Invitation" })
    await card.getByRole("heading", { name: "Contract review" }).waitFor()
    await card.getByText("Room 4").waitFor()
    await card.getByText("Ada Lovelace <ada@partner.test>").waitFor()
    await card.getByText("2 invited, 1 going").waitFor()
    await card.getByLabel("Note to the organizer").fill("See you there")
    await card.getByRole("button", { name: "Accept" }).click()
    await card.getByText(/^You accepted on /).waitFor()
    await card.getByText("2 invited, 2 going").waitFor()
    await expect(card.getByRole("button", { name: "Accept" }).getAttribute("aria-pressed")).resolves.toBe("true")
    const { message, parsed } = await delivered("Accepted: Contract review")
    expect(message.rcptTo).toEqual(["ada@partner.test"])
    expect(parsed.text).toContain("See you there")
    expect(message.raw.toString()).toContain(`ATTENDEE;PARTSTAT=ACCEPTED:mailto:${address}`)
  })

  it("schedules a meeting (an end before the start refused by its field), shows the attendee's answer so far, and cancels it", async () => {
    await page.goto(`/#/mailboxes/${mailboxId}`)
    await page.getByRole("link", { name: "Meetings" }).click()
    await page.getByRole("heading", { name: `Meetings of ${address}` }).waitFor()
    // Coming up: the invitation accepted above, as its organizer's.
    const upcoming = page.getByRole("list", { name: "Coming up" })
    const invited = upcoming.getByRole("listitem").filter({ hasText: "Contract review" })
    await invited.getByText("from Ada Lovelace").waitFor()
    await invited.getByText("accepted").waitFor()
    await page.getByText("No meetings yet").waitFor()
    const form = page.getByRole("form", { name: "Schedule a meeting" })
    await form.getByLabel("Title").fill("Budget review")
    await form.getByLabel("Starts").fill(`${daysAhead(5)}T15:00`)
    await form.getByLabel("Ends").fill(`${daysAhead(5)}T14:00`)
    await form.getByLabel("Attendees (addresses, separated by commas)").fill("ada@partner.test, grace@partner.test")
    await form.getByLabel("Where (optional)").fill("Room 4")
    await form.getByRole("button", { name: "Send invitations" }).click()
    await form.getByText("must be after start").waitFor()
    expect(refusals(/^400 POST .*\/meetings$/)).toHaveLength(1)
    await form.getByLabel("Ends").fill(`${daysAhead(5)}T16:00`)
    await form.getByRole("button", { name: "Send invitations" }).click()
    const answers = page.getByRole("list", { name: "Answers to Budget review" })
    await answers.getByText("ada@partner.test: no answer yet").waitFor()
    await answers.getByText("grace@partner.test: no answer yet").waitFor()
    // Coming up too, after the invitation two days before it, as this mailbox's own.
    await upcoming.getByRole("listitem").filter({ hasText: "Budget review" }).getByText("yours").waitFor()
    expect(await upcoming.getByRole("listitem").evaluateAll((items) => items.map((li) => li.querySelector(".what")?.textContent?.split(" ·")[0])))
      .toEqual(["Contract review", "Budget review"])
    await expect(form.getByLabel("Title").inputValue()).resolves.toBe("")
    expect(await recipientsWithSubject(mx, "Invitation: Budget review", 2)).toEqual(["ada@partner.test", "grace@partner.test"])
    const invitation = await delivered("Invitation: Budget review")
    expect(invitation.message.raw.toString()).toContain("METHOD:REQUEST")

    const card = page.getByRole("listitem", { name: "Budget review" })
    // Each meeting's button names it: a screen reader's list of buttons is not "Cancel…" again and again.
    await card.getByRole("button", { name: "Cancel Budget review…", exact: true }).click()
    await card.getByRole("button", { name: "Cancel the meeting" }).click()
    await card.getByText("cancelled", { exact: true }).waitFor()
    // Called off: no longer coming up.
    await upcoming.getByRole("listitem").filter({ hasText: "Budget review" }).waitFor({ state: "detached" })
    expect((await delivered("Cancelled: Budget review")).message.raw.toString()).toContain("METHOD:CANCEL")
  })

  it("shows whole-day meetings with their last day, not iCalendar's end (the day after it)", async () => {
    // One day (the end is the next day, as RFC 5545 writes it) and two days.
    for (const [summary, first, end] of [["Offsite day", 6, 7], ["Offsite", 8, 10]] as const) {
      await api("POST", `/api/mailboxes/${mailboxId}/meetings`, {
        summary,
        start: { date: daysAhead(first) },
        end: { date: daysAhead(end) },
        attendees: ["ada@partner.test"]
      })
    }
    // Read again: the page is the meetings page already.
    await page.goto(`/#/mailboxes/${mailboxId}/meetings`)
    await page.reload()
    const medium = { dateStyle: "medium" } as const
    const oneDay = page.getByRole("listitem", { name: "Offsite day", exact: true })
    await expect(oneDay.locator("p.muted").first().textContent()).resolves.toBe(await dayInPage(daysAhead(6), medium))
    const twoDays = page.getByRole("listitem", { name: "Offsite", exact: true })
    await expect(twoDays.locator("p.muted").first().textContent())
      .resolves.toBe(`${await dayInPage(daysAhead(8), medium)} – ${await dayInPage(daysAhead(9), medium)}`)
    // Coming up says the same days.
    const short = { weekday: "short", month: "short", day: "numeric" } as const
    const upcoming = page.getByRole("list", { name: "Coming up" })
    await expect(upcoming.getByRole("listitem").filter({ hasText: "Offsite day" }).locator("time").textContent())
      .resolves.toBe(await dayInPage(daysAhead(6), short))
    await expect(upcoming.getByRole("listitem").filter({ hasText: "Offsite" }).filter({ hasNotText: "Offsite day" }).locator("time").textContent())
      .resolves.toBe(`${await dayInPage(daysAhead(8), short)} – ${await dayInPage(daysAhead(9), short)}`)
  })

  it("shows a whole-day invitation (Google's DTSTART;VALUE=DATE) as its one day", async () => {
    const ics = [
      "BEGIN:VCALENDAR", "VERSION:2.0", "METHOD:REQUEST", "BEGIN:VEVENT", "UID:holiday-1@partner.test", "SEQUENCE:0",
      `DTSTART;VALUE=DATE:${icalDay(4)}`, `DTEND;VALUE=DATE:${icalDay(5)}`, "SUMMARY:Company holiday",
      "ORGANIZER;CN=Ada Lovelace:mailto:ada@partner.test", `ATTENDEE;PARTSTAT=NEEDS-ACTION;RSVP=TRUE:mailto:${address}`,
      "END:VEVENT", "END:VCALENDAR", ""
    ].join("\r\n")
    await sendMail(server.smtpPort, {
      from: "Ada Lovelace <ada@partner.test>",
      to: address,
      subject: "Invitation: Company holiday",
      text: "A day off.",
      icalEvent: { method: "REQUEST", content: ics }
    })
    await page.goto(`/#/emails/${await withSubject("Invitation: Company holiday")}`)
    const card = page.getByRole("region", { name: "Invitation" })
    await card.getByRole("heading", { name: "Company holiday" }).waitFor()
    await expect(card.locator("dd").first().textContent()).resolves.toBe(await dayInPage(daysAhead(4), { dateStyle: "full" }))
  })

  it("says which invitations an update replaced (linking the current one), and that the organizer cancelled it", async () => {
    const version = (sequence: number, hour: string, method = "REQUEST") =>
      [
        "BEGIN:VCALENDAR", "VERSION:2.0", `METHOD:${method}`, "BEGIN:VEVENT", "UID:ext-2@partner.test", `SEQUENCE:${sequence}`,
        `DTSTART:${icalDay(4)}T${hour}0000Z`, `DTEND:${icalDay(4)}T${hour}3000Z`, "SUMMARY:Partner sync",
        ...(method === "CANCEL" ? ["STATUS:CANCELLED"] : []),
        "ORGANIZER;CN=Ada Lovelace:mailto:ada@partner.test", `ATTENDEE;PARTSTAT=NEEDS-ACTION;RSVP=TRUE:mailto:${address}`,
        "END:VEVENT", "END:VCALENDAR", ""
      ].join("\r\n")
    /**
     * Sends one revision, and answers its email once stored, vouched for as a person would (this suite's
     * mail from partner.test has no SPF or DKIM to prove its From): an update counts from its organizer only.
     */
    const send = async (subject: string, sequence: number, hour: string, method = "REQUEST") => {
      await sendMail(server.smtpPort, {
        from: "Ada Lovelace <ada@partner.test>",
        to: address,
        subject,
        text: "Partner sync.",
        icalEvent: { method, content: version(sequence, hour, method) }
      })
      const emailId = await withSubject(subject)
      await api("PATCH", `/api/emails/${emailId}`, { remove_labels: ["unauthenticated"] })
      return emailId
    }
    const first = await send("Partner sync (0)", 0, "10")
    await scheduled("ext-2@partner.test", first)
    const moved = await send("Partner sync (2)", 2, "14")
    await scheduled("ext-2@partner.test", moved)
    // A late copy of revision 1: older than the one kept, it changes nothing.
    const late = await send("Partner sync (1)", 1, "12")

    const card = page.getByRole("region", { name: "Invitation" })
    /** Opens an email's page, once it shows that email. */
    const open = async (emailId: string, subject: string) => {
      await page.goto(`/#/emails/${emailId}`)
      await page.getByRole("heading", { name: subject, level: 1 }).waitFor()
    }
    for (const [old, subject] of [[first, "Partner sync (0)"], [late, "Partner sync (1)"]] as const) {
      await open(old, subject)
      await card.getByText("Superseded by a later update").waitFor()
      expect(await card.getByRole("button", { name: "Accept" }).count()).toBe(0)
      await expect(card.getByRole("link", { name: "Open the latest" }).getAttribute("href")).resolves.toBe(`#/emails/${moved}`)
    }
    // The link opens the current one, which is answered there.
    await card.getByRole("link", { name: "Open the latest" }).click()
    await page.getByRole("heading", { name: "Partner sync (2)", level: 1 }).waitFor()
    await card.getByRole("button", { name: "Accept" }).click()
    await card.getByText(/^You accepted on /).waitFor()
    expect(await card.getByText("Superseded by a later update").count()).toBe(0)
    expect(await card.getByText("Cancelled by the organizer").count()).toBe(0)

    // The organizer calls it off: the accepted card says so, as do the older ones.
    const cancellation = await send("Cancelled: Partner sync", 3, "14", "CANCEL")
    await scheduled("ext-2@partner.test", cancellation, "cancelled")
    // One state each, the event's last word: cancelled, not also superseded, linking the cancellation.
    for (const [emailId, subject] of [[first, "Partner sync (0)"], [late, "Partner sync (1)"], [moved, "Partner sync (2)"]] as const) {
      await open(emailId, subject)
      await card.getByRole("heading", { name: "Cancelled: Partner sync" }).waitFor()
      await card.getByText("Cancelled by the organizer").waitFor()
      expect(await card.getByText("Superseded by a later update").count()).toBe(0)
      expect(await card.getByRole("link", { name: "Open the latest" }).count()).toBe(1)
      await expect(card.getByRole("link", { name: "Open the latest" }).getAttribute("href")).resolves.toBe(`#/emails/${cancellation}`)
      expect(await card.getByRole("button", { name: "Accept" }).count()).toBe(0)
    }
    await card.getByText(/^You accepted on /).waitFor()
  })

  it("says an update not applied for who sent it is not applied, and why, offering no answer until it is vouched for", async () => {
    const invitation = (sequence: number, hour: string) =>
      [
        "BEGIN:VCALENDAR", "VERSION:2.0", "METHOD:REQUEST", "BEGIN:VEVENT", "UID:ext-3@partner.test", `SEQUENCE:${sequence}`,
        `DTSTART:${icalDay(5)}T${hour}0000Z`, `DTEND:${icalDay(5)}T${hour}3000Z`, "SUMMARY:Vendor call",
        "ORGANIZER;CN=Ada Lovelace:mailto:ada@partner.test", `ATTENDEE;PARTSTAT=NEEDS-ACTION;RSVP=TRUE:mailto:${address}`,
        "END:VEVENT", "END:VCALENDAR", ""
      ].join("\r\n")
    const send = async (subject: string, sequence: number, hour: string) => {
      await sendMail(server.smtpPort, {
        from: "Ada Lovelace <ada@partner.test>",
        to: address,
        subject,
        text: "Vendor call.",
        icalEvent: { method: "REQUEST", content: invitation(sequence, hour) }
      })
      return withSubject(subject)
    }
    // A new event is entered from anyone; its move, from the organizer's address with nothing proving it, is not applied.
    const first = await send("Vendor call", 0, "10")
    await scheduled("ext-3@partner.test", first)
    const moved = await send("Vendor call moved", 1, "15")
    for (let tries = 0; tries < 200; tries++) {
      if ((await api("GET", `/api/emails/${moved}/invitation`)).not_applied_reason === "unverified_sender") break
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    const card = page.getByRole("region", { name: "Invitation" })
    await page.goto(`/#/emails/${moved}`)
    await page.getByRole("heading", { name: "Vendor call moved", level: 1 }).waitFor()
    await card.getByText("Not applied to the schedule: nothing proves it comes from its sender").waitFor()
    expect(await card.getByRole("button", { name: "Accept" }).count()).toBe(0)
    expect(await card.getByText("Superseded by a later update").count()).toBe(0)
    await expect(card.getByRole("link", { name: "Open the one the schedule holds" }).getAttribute("href")).resolves.toBe(`#/emails/${first}`)
    // Vouched for (the label taken off), it applies: answered there, and the first one is superseded.
    await api("PATCH", `/api/emails/${moved}`, { remove_labels: ["unauthenticated"] })
    await scheduled("ext-3@partner.test", moved)
    await page.goto(`/#/emails/${first}`)
    await page.getByRole("heading", { name: "Vendor call", level: 1 }).waitFor()
    await card.getByText("Superseded by a later update").waitFor()
    await page.goto(`/#/emails/${moved}`)
    await page.getByRole("heading", { name: "Vendor call moved", level: 1 }).waitFor()
    await card.getByRole("button", { name: "Accept" }).click()
    await card.getByText(/^You accepted on /).waitFor()
    expect(await card.getByText(/^Not applied/).count()).toBe(0)
  })

  it("fits a 375 px screen on the meetings page, and had no console error or failed request besides the refusals above", async () => {
    await page.setViewportSize({ width: 375, height: 740 })
    await page.goto(`/#/mailboxes/${mailboxId}/meetings`)
    await page.getByRole("heading", { name: `Meetings of ${address}` }).waitFor()
    await page.getByText("Send invitations").waitFor()
    expect(await page.evaluate("document.documentElement.scrollWidth")).toBeLessThanOrEqual(375)
    await page.setViewportSize({ width: 1280, height: 800 })
    expect(watched.problems).toEqual([])
  })
})
