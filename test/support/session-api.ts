/**
 * The dashboard's session API as a page's own scripts call it, for browser suites that read or arrange
 * what the page shows, and the other checks of the browser suites that need vitest's expect (apart
 * from browser.ts, which scripts/screenshots.ts loads outside vitest).
 */
import type { Page } from "playwright-core"
import { expect } from "vitest"
import type { WatchedPage } from "./browser.ts"
import { until } from "./wait.ts"

/** A call of the dashboard's session API: what a page's own scripts would ask, answering the body's `data`. */
export type SessionApi = (method: "GET" | "POST" | "PATCH", path: string, body?: unknown) => Promise<any>

/**
 * The session API as `page` calls it (its cookie; a write with the page's origin, `origin`): an
 * answer of 300 or more fails the test, naming the call.
 */
export const sessionApi = (page: Page, origin: string): SessionApi => async (method, path, body) => {
  const response = await page.request.fetch(path, {
    method,
    headers: { origin, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { data: JSON.stringify(body) })
  })
  expect(response.status(), `${method} ${path}`).toBeLessThan(300)
  return (await response.json()).data
}

/** The id of the email of `mailboxId` whose subject is `subject`, once it is stored (read through `api`). */
export const emailWithSubject = (api: SessionApi, mailboxId: string, subject: string): Promise<string> =>
  until(`the email "${subject.slice(0, 40)}"`, async () => {
    const emails: Array<{ email_id: string; subject: string }> = await api("GET", `/api/mailboxes/${mailboxId}/emails?limit=100`)
    return emails.find((e) => e.subject === subject)?.email_id
  }, 30_000, 100)

/**
 * Takes off the page's record of problems a request the server refused on purpose (a wrong password,
 * a spent link, a sign-in answered 401 asking for the code) and the console line the browser writes
 * for it: the test fails unless exactly those two lines name `path` or the status `status`; the
 * record keeps everything else. Nothing is taken when the test fails.
 */
export const takeRefusedRequest = (watched: WatchedPage, path: string, status: number): void => {
  const refused = watched.problems.filter((p) => p.includes(path) || p.includes(`status of ${status}`))
  expect(refused).toHaveLength(2)
  watched.problems.splice(0, watched.problems.length, ...watched.problems.filter((p) => !refused.includes(p)))
}
