/**
 * The link mailed to a forwarding address (services/mail/forwarding.ts), for the person who owns it:
 *
 * - `GET /forwarding/:token` shows which mailbox asks to forward its mail there, with a button to agree
 *   (or, once agreed, to stop); it changes nothing, since link checkers and previews fetch links.
 * - `POST /forwarding/:token` with `action=confirm` starts forwarding, `action=stop` ends it (the address
 *   is removed from the mailbox's forwarding, and this link no longer works). An unknown link is 404.
 */
import { HttpApiBuilder, HttpRouter, HttpServerRequest } from "@effect/platform"
import { Effect, Layer, Option, Schema } from "effect"
import { DependencyHealth } from "../../../services/health/dependency-health.ts"
import { escapeHtml } from "../../../services/html.ts"
import { Forwarding, type ForwardingLink } from "../../../services/mail/forwarding.ts"
import { page, pageOrUnavailable } from "../pages.ts"

/** The page's form (input-rules.ts `readsForm`). */
export const forwardingForms = [/^\/forwarding\/[^/]+$/]

const unknown = page(
  "This link is not valid",
  `<p class="muted">It may have been copied incompletely, replaced by a newer link, or the forwarding was stopped or removed.</p>`,
  404
)

const names = (link: ForwardingLink) => ({ mailbox: `<strong>${escapeHtml(link.mailbox)}</strong>`, address: `<strong>${escapeHtml(link.address)}</strong>` })

const button = (action: "confirm" | "stop", label: string) =>
  `<form method="post"><input type="hidden" name="action" value="${action}"><button type="submit">${label}</button></form>`

const active = (link: ForwardingLink) => {
  const { address, mailbox } = names(link)
  return page(
    "Forwarding is on",
    `<p>Mail that arrives at ${mailbox} is forwarded to ${address}.</p>
<p class="muted">To stop it, come back to this link.</p>${button("stop", "Stop forwarding")}`
  )
}

const stopped = (link: ForwardingLink) => {
  const { address, mailbox } = names(link)
  return page("Forwarding stopped", `<p>Mail that arrives at ${mailbox} is no longer forwarded to ${address}.</p>`)
}

export const ForwardingPagesLive = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    const forwarding = yield* Forwarding
    const health = yield* DependencyHealth
    const token = Effect.map(HttpRouter.params, (params) => params.token ?? "")
    const answered = pageOrUnavailable(health)

    yield* router.get(
      "/forwarding/:token",
      Effect.gen(function*() {
        const found = yield* forwarding.find(yield* token)
        if (Option.isNone(found)) return unknown
        const link = found.value
        if (link.active) return active(link)
        const { address, mailbox } = names(link)
        return page(
          "Forward mail to you?",
          `<p>Mail that arrives at ${mailbox}, a Mailroom mailbox, is to be forwarded to you at ${address}.</p>
<p class="muted">Nothing is forwarded until you agree. If you did not expect this, close this page.</p>${button("confirm", "Forward mail to me")}`
        )
      }).pipe(answered)
    )

    yield* router.post(
      "/forwarding/:token",
      Effect.gen(function*() {
        // The page's own form is URL-encoded; anything else finds no action and changes nothing.
        const form = yield* Effect.option(HttpServerRequest.schemaBodyUrlParams(Schema.Struct({ action: Schema.Literal("confirm", "stop") })))
        if (Option.isNone(form)) return page("Unknown action", `<p class="muted">Nothing was changed. Open the link from the email again.</p>`, 400)
        const done = form.value.action === "stop" ? yield* forwarding.stop(yield* token) : yield* forwarding.confirm(yield* token)
        return Option.match(done, { onNone: () => unknown, onSome: (link) => (link.active ? active(link) : stopped(link)) })
      }).pipe(answered)
    )
  })
).pipe(Layer.provide(Forwarding.Default))
