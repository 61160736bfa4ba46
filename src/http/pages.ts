/**
 * The few pages Mailroom serves outside the dashboard, to people who follow a link: the local payment
 * provider's (billing/payment-pages.ts), the unsubscribe page of sent mail
 * (outbound/unsubscribe-pages.ts) and the forwarding confirmation (forwarding/pages.ts). Plain HTML with
 * a form where they act, so they work without JavaScript and in any mail app's browser. Their forms'
 * paths are input-rules.ts's `readsForm`.
 */
import { HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { escapeHtml } from "../../services/html.ts"
import { orUnavailable } from "./infra.ts"

/** A page titled `title` with `body` (HTML, its values escaped by the caller). */
export const page = (title: string, body: string, status = 200) =>
  HttpServerResponse.html(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · Mailroom</title>
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#1f2328}
button{font:inherit;padding:.5rem 1rem;border-radius:.4rem;border:1px solid #1f2328;background:#1f2328;color:#fff;cursor:pointer}
a{color:#0969da}.muted{color:#59636e}</style></head>
<body><h1>${escapeHtml(title)}</h1>${body}</body></html>`).pipe(HttpServerResponse.setStatus(status))

/** The database cannot be reached: a mail app retries a POST answered so; a person, later. */
const unavailable = page("Try again in a moment", `<p class="muted">Mailroom cannot reach its database right now. Nothing was changed.</p>`, 503).pipe(
  HttpServerResponse.setHeader("retry-after", "5")
)

/** A page of a link's own (`effect`), or, the database out of reach, the page that says so (reported to `health`). */
export const pageOrUnavailable = (health: DependencyHealth) =>
<E, R>(effect: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
  effect.pipe(
    orUnavailable,
    Effect.catchTag("ServiceUnavailable", () => Effect.succeed(unavailable)),
    Effect.provideService(DependencyHealth, health)
  )
