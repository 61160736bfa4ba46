/**
 * What a browser suite says of a test that failed. Apart from browser.ts, which the repository's
 * programs (scripts/screenshots.ts) import outside vitest: this module needs vitest's hooks.
 */
import { afterEach, beforeEach } from "vitest"
import type { WatchedPage } from "./browser.ts"

/**
 * In a suite's describe: a test that fails shows what the server logged meanwhile, and where the page
 * was and what it saw (its console errors and failed requests), since a step that waits in vain says
 * only what it waited for.
 */
export const tellOnFailure = (
  server: () => { readonly output: () => string } | undefined,
  watched: () => WatchedPage | undefined
): void => {
  let logged = 0
  beforeEach(() => {
    logged = server()?.output().length ?? 0
  })
  afterEach(({ task }) => {
    if (task.result?.state !== "fail") return
    const during = server()?.output().slice(logged).trim()
    const page = watched()
    console.error(`While "${task.name}" ran, the server logged:\n${during ? during.slice(-6000) : "(nothing)"}\n` +
      `the page was at ${page?.page.url()} and saw: ${JSON.stringify(page?.problems ?? [])}`)
  })
}
