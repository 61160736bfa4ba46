/**
 * How large a request body may be: 1 MiB of JSON (DESIGN.md §4), except on the routes whose body
 * carries a message to send (send, a batch, reply, reply-all, forward, a draft's create and update,
 * and MCP's tools that do the same). Their
 * attachments come as base64, so they may be as large as the largest plan's message in base64 (4/3 of
 * it) and 1 MiB more for the rest; the sending mailbox's own plan then decides (413 with its limit,
 * services/outbound/send.ts). A larger body is refused before it is read, or as soon as reading it
 * passes the limit.
 */
import { PayloadTooLarge } from "../../services/errors.ts"
import { limits } from "../../services/plans/plans.ts"

const MiB = 1024 * 1024

export const MAX_JSON_BYTES = MiB

const largestMessage = Math.max(...Object.values(limits).map((plan) => plan.maxEmailBytes))

export const MAX_MESSAGE_BODY_BYTES = Math.ceil((largestMessage * 4) / 3) + MiB

/** On the API (/v1/api) and the dashboard's (/api) surface alike. */
const CARRIES_MESSAGE = /^\/(?:v1\/)?api\/(?:mailboxes\/[^/]+\/(?:send(?:\/batch)?|drafts(?:\/[^/]+)?)|emails\/[^/]+\/(?:reply|reply-all|forward))\/?$/

/**
 * The MCP endpoint: its sending tools (send_email, reply_to_email, forward_email, create_draft,
 * update_draft) carry the same messages as those routes, and which tool a body calls is known only
 * once it is read; what the tools' plan allows is theirs to say, as a tool's refusal.
 */
const MCP = /^\/mcp\/?$/

/** The most a request to `pathname` by `method` may send. */
export const maxBodyBytes = (method: string, pathname: string): number =>
  ((method === "POST" || method === "PATCH") && CARRIES_MESSAGE.test(pathname)) || (method === "POST" && MCP.test(pathname))
    ? MAX_MESSAGE_BODY_BYTES
    : MAX_JSON_BYTES

const size = (bytes: number) => `${(bytes / MiB).toFixed(bytes % MiB === 0 ? 0 : 1)} MiB`

export const tooLarge = (max: number) =>
  new PayloadTooLarge({ message: `The request body is larger than ${size(max)}`, details: { max_bytes: max } })

/** Reading a body stopped because it passed the limit (the platform's RequestError). */
export const isBodyTooLarge = (error: unknown): boolean => {
  const failure = error as { readonly _tag?: unknown; readonly reason?: unknown; readonly cause?: { readonly message?: unknown } } | null
  return failure?._tag === "RequestError" && failure.reason === "Decode" && failure.cause?.message === "maxBytes exceeded"
}
