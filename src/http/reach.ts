/**
 * The routes an API key limited to some mailboxes may call, and how each is held to them
 * (services/accounts/reach.ts). A route missing here is refused to such a key (403 FORBIDDEN): a route
 * added later is closed to limited keys until someone decides how it reaches mailboxes, and
 * `test/api/limited-keys.test.ts` fails until every `/v1` route has been decided. Also the routes a
 * read-only key may call: those that change nothing (`isReading`).
 */
import { HttpRouter } from "@effect/platform"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Option } from "effect"
import type { Principal } from "../../services/accounts/principal.ts"
import { MailboxReach } from "../../services/accounts/reach.ts"
import { Forbidden, type NotFound } from "../../services/errors.ts"

/**
 * - `mailbox`: the path's `:mailboxId` must be one of the key's;
 * - `email`, `thread`: the path's email or conversation must be in one of the key's mailboxes;
 * - `webhook`: the path's webhook must listen to some of the key's mailboxes and no other;
 * - `meeting`: the path's meeting must be organized by one of the key's mailboxes;
 * - `own`: the handler shows and acts on the key's mailboxes only (lists, batches, search, events,
 *   new webhooks);
 * - `account`: about the whole account (keys, domains, billing, account lists, new mailboxes): refused.
 */
export type Reach = "mailbox" | "email" | "thread" | "webhook" | "meeting" | "own" | "account"

export const routeReach: Readonly<Record<string, Reach>> = {
  "GET /v1/api-keys": "account",
  "POST /v1/api-keys": "account",
  "PATCH /v1/api-keys/:id": "account",
  "DELETE /v1/api-keys/:id": "account",
  "GET /v1/billing/subscription": "account",
  "GET /v1/billing/usage": "account",
  "POST /v1/billing/checkout": "account",
  "POST /v1/billing/portal": "account",
  "GET /v1/api/mailboxes": "own",
  "POST /v1/api/mailboxes": "account",
  "GET /v1/api/mailboxes/check-email": "account",
  "GET /v1/api/mailboxes/:mailboxId": "mailbox",
  "PATCH /v1/api/mailboxes/:mailboxId": "mailbox",
  "DELETE /v1/api/mailboxes/:mailboxId": "mailbox",
  "GET /v1/api/mailboxes/:mailboxId/emails": "mailbox",
  "GET /v1/api/mailboxes/:mailboxId/export": "mailbox",
  "GET /v1/api/emails": "own",
  "GET /v1/api/mailboxes/:mailboxId/threads": "mailbox",
  "GET /v1/api/threads": "own",
  "GET /v1/api/labels": "own",
  "GET /v1/api/emails/:emailId": "email",
  "PATCH /v1/api/emails/:emailId": "email",
  "DELETE /v1/api/emails/:emailId": "email",
  "POST /v1/api/emails/batch-update": "own",
  "POST /v1/api/emails/batch-delete": "own",
  "GET /v1/api/emails/:emailId/raw": "email",
  "GET /v1/api/emails/:emailId/attachments/:attachmentId": "email",
  "GET /v1/api/emails/:emailId/attachments/:attachmentId/text": "email",
  "GET /v1/api/emails/:emailId/invitation": "email",
  "GET /v1/api/mailboxes/:mailboxId/meetings": "mailbox",
  "POST /v1/api/mailboxes/:mailboxId/meetings": "mailbox",
  "GET /v1/api/meetings/:meetingId": "meeting",
  "PATCH /v1/api/meetings/:meetingId": "meeting",
  "POST /v1/api/meetings/:meetingId/cancel": "meeting",
  "GET /v1/api/mailboxes/:mailboxId/schedule": "mailbox",
  "GET /v1/api/mailboxes/:mailboxId/availability": "mailbox",
  "GET /v1/api/schedule": "own",
  "GET /v1/api/availability": "own",
  "POST /v1/api/emails/:emailId/invitation/respond": "email",
  "GET /v1/api/threads/:threadId": "thread",
  "PATCH /v1/api/threads/:threadId": "thread",
  "DELETE /v1/api/threads/:threadId": "thread",
  "POST /v1/api/threads/batch-update": "own",
  "POST /v1/api/threads/batch-delete": "own",
  "POST /v1/api/mailboxes/:mailboxId/send": "mailbox",
  "POST /v1/api/mailboxes/:mailboxId/send/batch": "mailbox",
  "POST /v1/api/emails/:emailId/reply": "email",
  "POST /v1/api/emails/:emailId/reply-all": "email",
  "POST /v1/api/emails/:emailId/forward": "email",
  "POST /v1/api/emails/:emailId/unsubscribe": "email",
  "POST /v1/api/mailboxes/:mailboxId/drafts": "mailbox",
  "GET /v1/api/mailboxes/:mailboxId/drafts": "mailbox",
  "GET /v1/api/drafts": "own",
  "GET /v1/api/mailboxes/:mailboxId/drafts/:draftId": "mailbox",
  "PATCH /v1/api/mailboxes/:mailboxId/drafts/:draftId": "mailbox",
  "DELETE /v1/api/mailboxes/:mailboxId/drafts/:draftId": "mailbox",
  "POST /v1/api/mailboxes/:mailboxId/drafts/:draftId/send": "mailbox",
  "GET /v1/api/suppressions": "account",
  "POST /v1/api/suppressions": "account",
  "DELETE /v1/api/suppressions/:address": "account",
  "GET /v1/api/webhooks": "own",
  "POST /v1/api/webhooks": "own",
  "GET /v1/api/webhooks/:id": "webhook",
  "PATCH /v1/api/webhooks/:id": "webhook",
  "DELETE /v1/api/webhooks/:id": "webhook",
  "GET /v1/api/webhooks/:id/deliveries": "webhook",
  "POST /v1/api/webhooks/:id/test": "webhook",
  "POST /v1/api/webhooks/:id/deliveries/:deliveryId/resend": "webhook",
  "GET /v1/api/lists/:list": "account",
  "POST /v1/api/lists/:list": "account",
  "DELETE /v1/api/lists/:list/:entry": "account",
  "GET /v1/api/mailboxes/:mailboxId/lists/:list": "mailbox",
  "POST /v1/api/mailboxes/:mailboxId/lists/:list": "mailbox",
  "DELETE /v1/api/mailboxes/:mailboxId/lists/:list/:entry": "mailbox",
  "GET /v1/api/mailboxes/:mailboxId/auto-reply": "mailbox",
  "PUT /v1/api/mailboxes/:mailboxId/auto-reply": "mailbox",
  "DELETE /v1/api/mailboxes/:mailboxId/auto-reply": "mailbox",
  "GET /v1/api/filters": "account",
  "POST /v1/api/filters": "account",
  "GET /v1/api/filters/:filterId": "account",
  "PATCH /v1/api/filters/:filterId": "account",
  "DELETE /v1/api/filters/:filterId": "account",
  "POST /v1/api/filters/:filterId/apply": "account",
  "GET /v1/api/mailboxes/:mailboxId/forwarding": "mailbox",
  "POST /v1/api/mailboxes/:mailboxId/forwarding": "mailbox",
  "DELETE /v1/api/mailboxes/:mailboxId/forwarding/:address": "mailbox",
  "GET /v1/api/domains": "account",
  "GET /v1/api/domains/:id": "account",
  "POST /v1/api/domains": "account",
  "POST /v1/api/domains/:id/verify": "account",
  "PATCH /v1/api/domains/:id": "account",
  "POST /v1/api/domains/:id/migrate-mailboxes": "account",
  "DELETE /v1/api/domains/:id": "account",
  "GET /v1/domains": "account",
  "GET /v1/api/stats": "own",
  "POST /v1/search": "own",
  "GET /v1/search/suggestions": "own",
  "GET /v1/events": "own",
  "GET /v1/ws": "own"
}

/** The refusal of a route (an MCP tool) about the whole account to a key limited to some mailboxes. */
export const accountWide = (principal: Pick<Principal, "mailboxes">, what: "route" | "tool" = "route") =>
  new Forbidden({
    message: `This API key is limited to some mailboxes; this ${what} is about the whole account and needs a key without that limit`,
    details: { mailboxIds: Option.getOrElse(principal.mailboxes, () => []) }
  })

/** Routes that change nothing though they are not GETs: a read-only key may call them too. */
const readingPosts: ReadonlySet<string> = new Set(["POST /v1/search"])

/** Does the route change nothing (a read-only key may call it)? */
export const isReading = (method: string, path: string) => method === "GET" || method === "HEAD" || readingPosts.has(`${method} ${path}`)

/** The refusal of a route that changes something to a read-only key. */
export const readOnlyRefusal = () =>
  new Forbidden({
    message: "This API key is read-only: it reads and searches, and changes nothing; this needs a key with full access",
    details: { permission: "read_only" }
  })

/** Let `principal` through to the route being served, or refuse it as its permission and the route's rule say. */
export const admit = (reach: MailboxReach, principal: Principal): Effect.Effect<void, NotFound | Forbidden | SqlError, HttpRouter.RouteContext> =>
  Effect.zipRight(
    principal.readOnly
      ? Effect.flatMap(HttpRouter.RouteContext, ({ route }) => (isReading(route.method, route.path) ? Effect.void : Effect.fail(readOnlyRefusal())))
      : Effect.void,
    admitMailboxes(reach, principal)
  )

const admitMailboxes = (reach: MailboxReach, principal: Principal): Effect.Effect<void, NotFound | Forbidden | SqlError, HttpRouter.RouteContext> =>
  Option.isNone(principal.mailboxes) ? Effect.void : Effect.flatMap(HttpRouter.RouteContext, ({ params, route }): Effect.Effect<void, NotFound | Forbidden | SqlError> => {
    switch (routeReach[`${route.method} ${route.path}`] ?? "account") {
      case "mailbox":
        return reach.mailbox(principal, params["mailboxId"]!)
      case "email":
        return reach.emails(principal, [params["emailId"]!])
      case "thread":
        return reach.thread(principal, params["threadId"]!)
      case "webhook":
        return reach.webhook(principal, params["id"]!)
      case "meeting":
        return reach.meeting(principal, params["meetingId"]!)
      case "own":
        return Effect.void
      case "account":
        return Effect.fail(accountWide(principal))
    }
  })
