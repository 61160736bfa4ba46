/**
 * The unsubscribe link of mail sent with `list_unsubscribe` (services/outbound/unsubscribes.ts):
 *
 * - `GET /unsubscribe/:token` shows whom the link is for and a button; it changes nothing, since link
 *   checkers and previews fetch links on their own.
 * - `POST /unsubscribe/:token` unsubscribes: what a mail app's Unsubscribe button sends (RFC 8058: a
 *   form body `List-Unsubscribe=One-Click`, from no session and no page) and what the page's button
 *   sends. Any body is taken; the link is the whole request. 200 with a page saying so, again on a
 *   repeat; an unknown link 404.
 */
import { HttpApiBuilder, HttpRouter } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { DependencyHealth } from "../../../services/health/dependency-health.ts"
import { escapeHtml } from "../../../services/html.ts"
import { type UnsubscribeLink, Unsubscribes } from "../../../services/outbound/unsubscribes.ts"
import { page, pageOrUnavailable } from "../pages.ts"

/** The page's form (input-rules.ts `readsForm`). */
export const unsubscribeForms = [/^\/unsubscribe\/[^/]+$/]

const unknown = page(
  "This link is not valid",
  `<p class="muted">It may have been copied incompletely, or its sender's account no longer exists. Ask the sender to stop writing to you.</p>`,
  404
)

const sender = (link: UnsubscribeLink) => link.sender === null ? "its sender" : `<strong>${escapeHtml(link.sender)}</strong>`

const unsubscribed = (link: UnsubscribeLink) =>
  page(
    "You are unsubscribed",
    `<p><strong>${escapeHtml(link.address)}</strong> will get no more mail from ${sender(link)}.</p>`
  )

export const UnsubscribePagesLive = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    const unsubscribes = yield* Unsubscribes
    const health = yield* DependencyHealth
    const token = Effect.map(HttpRouter.params, (params) => params.token ?? "")
    const answered = pageOrUnavailable(health)

    yield* router.get(
      "/unsubscribe/:token",
      Effect.gen(function*() {
        const found = yield* unsubscribes.find(yield* token)
        if (Option.isNone(found)) return unknown
        const link = found.value
        if (link.suppressed) return unsubscribed(link)
        return page(
          "Unsubscribe",
          `<p>Stop mail from ${sender(link)} to <strong>${escapeHtml(link.address)}</strong>?</p>
<form method="post"><input type="hidden" name="List-Unsubscribe" value="One-Click"><button type="submit">Unsubscribe</button></form>`
        )
      }).pipe(answered)
    )

    yield* router.post(
      "/unsubscribe/:token",
      Effect.gen(function*() {
        const done = yield* unsubscribes.unsubscribe(yield* token)
        return Option.match(done, { onNone: () => unknown, onSome: unsubscribed })
      }).pipe(answered)
    )
  })
).pipe(Layer.provide(Unsubscribes.Default))
