/** Test users with a mailbox: what SMTP tests send to and read back from. */
import type { Client, withApiKey } from "./http.ts"
import { withApiKey as signUpWithKey } from "./http.ts"

export type User = Awaited<ReturnType<typeof withApiKey>>

export interface Box {
  readonly user: User
  readonly mailboxId: string
  readonly address: string
}

export const DOMAIN = "agents.localhost"

let counter = 0
/** A name no other test in this run uses (local parts, message ids). */
export const fresh = (prefix: string) => `${prefix}${Date.now().toString(36)}${counter++}${Math.random().toString(36).slice(2, 6)}`

/** A mailbox on the shared domain, for `user` or for a new user with an API key. */
export const newBox = async (api: Client, options: { readonly user?: User; readonly localPart?: string } = {}): Promise<Box> => {
  const user = options.user ?? (await signUpWithKey(api))
  const created = await api.post("/v1/api/mailboxes", {
    apiKey: user.apiKey,
    body: { local_part: options.localPart ?? fresh("box"), domain: DOMAIN }
  })
  if (created.status !== 201) throw new Error(`mailbox not created: ${created.status} ${created.text}`)
  const mailbox = created.body.mailbox as { mailbox_id: string; email_address: string }
  return { user, mailboxId: mailbox.mailbox_id, address: mailbox.email_address }
}
