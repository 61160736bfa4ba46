/**
 * The few pages Mailroom serves outside the dashboard, to people who follow a link: the local payment
 * provider's (billing/payment-pages.ts) and the unsubscribe page of sent mail
 * (outbound/unsubscribe-pages.ts). Plain HTML with a form where they act, so they work without
 * JavaScript and in any mail app's browser. Their forms' paths are input-rules.ts's `readsForm`.
 */
import { HttpServerResponse } from "@effect/platform"
import { escapeHtml } from "../../services/html.ts"

/** A page titled `title` with `body` (HTML, its values escaped by the caller). */
export const page = (title: string, body: string, status = 200) =>
  HttpServerResponse.html(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · Mailroom</title>
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#1f2328}
button{font:inherit;padding:.5rem 1rem;border-radius:.4rem;border:1px solid #1f2328;background:#1f2328;color:#fff;cursor:pointer}
a{color:#0969da}.muted{color:#59636e}</style></head>
<body><h1>${escapeHtml(title)}</h1>${body}</body></html>`).pipe(HttpServerResponse.setStatus(status))
