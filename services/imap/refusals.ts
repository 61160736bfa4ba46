/** What an IMAP command is refused with: the response code (RFC 5530) and text its tagged NO carries. */
import { Data, Effect } from "effect"

/** Why a sign-in or a command is refused, as the IMAP response code and text it is answered with. */
export class ImapRefused extends Data.TaggedError("ImapRefused")<{
  readonly code: "AUTHENTICATIONFAILED" | "UNAVAILABLE" | "NOPERM" | "NONEXISTENT" | "LIMIT" | "CANNOT" | "EXPUNGEISSUED"
  readonly text: string
}> {}

const unavailable = new ImapRefused({ code: "UNAVAILABLE", text: "Temporarily unavailable; try again later" })
/** The database (or the bus) failing a command: logged, and the client told to try again. */
export const outage = (error: unknown) => Effect.zipRight(Effect.logWarning("IMAP: the store failed a command", error), Effect.fail(unavailable))

