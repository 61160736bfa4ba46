/** Test users with a mailbox: what SMTP tests send to and read back from. */
import { withApiKey } from "./accounts.ts"
import { withKey } from "./typed-client.ts"
import { until } from "./wait.ts"

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
export const newBox = async (baseUrl: string, options: { readonly user?: User; readonly localPart?: string } = {}): Promise<Box> => {
  const user = options.user ?? (await withApiKey(baseUrl))
  const created = await withKey(baseUrl, user).POST("/v1/api/mailboxes", {
    body: { local_part: options.localPart ?? fresh("box"), domain: DOMAIN }
  })
  if (created.response.status !== 201 || !created.data) {
    throw new Error(`mailbox not created: ${created.response.status} ${JSON.stringify(created.error)}`)
  }
  const mailbox = created.data.mailbox
  return { user, mailboxId: mailbox.mailbox_id, address: mailbox.email_address }
}

/** The newest email in `box` with `subject`, read whole, once it has arrived (up to 30 s). */
export const arrivedIn = async (baseUrl: string, box: Box, subject: string) => {
  const mail = withKey(baseUrl, box.user)
  const listed = await until(`"${subject}" in ${box.address}`, async () => {
    const { data } = await mail.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
    return data?.data.find((email) => email.subject === subject)
  }, 30_000, 100, 500)
  const { data } = await mail.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: listed.email_id } } })
  return data!.data
}

/** The token of the confirm-email link in a mailed text. */
export const emailChangeToken = (text: string | null | undefined) => /#\/confirm-email\/(mre_[A-Za-z0-9_-]+)/.exec(text ?? "")![1]!
