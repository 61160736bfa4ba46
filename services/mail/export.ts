/**
 * A mailbox's mail as one mbox file (the mboxrd variant, RFC 4155): every email, received and sent,
 * oldest first, each its raw message exactly as stored but for its line ends (LF, as mbox files have
 * them) and the quoting mbox needs. What a person takes away before deleting an account, or brings
 * to another mail program (Thunderbird, mutt, Apple Mail, Python's `mailbox`).
 *
 * - Each message starts with `From <envelope sender> <date in asctime form, UTC>`; the null sender
 *   is written MAILER-DAEMON, as mail programs do.
 * - mboxrd quoting: a line of the message that reads `From ` after any number of `>` gains one more
 *   `>`, so a reader that removes one gets the message back whole; a message ends with an empty line.
 * - Streamed: emails listed EXPORT_PAGE at a time by (received_at, id), their raw messages read up to
 *   BYTES_AT_ONCE at a time, so a mailbox of any size takes bounded memory. Mail arriving during the
 *   export comes in when it sorts after the page read; mail deleted meanwhile is left out.
 */
import { SqlClient } from "@effect/sql"
import { Chunk, Effect, Option, Sink, Stream } from "effect"
import { ownMailbox } from "../mailboxes/owned.ts"

/** Emails listed per statement. */
const EXPORT_PAGE = 100
/** Raw bytes read per statement at most (a larger message is read alone). */
const BYTES_AT_ONCE = 8 * 1024 * 1024

const DAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
const two = (n: number) => String(n).padStart(2, "0")

/** `Sun Nov 29 16:13:20 2026`, in UTC: the date of an mbox `From ` line (C's asctime). */
export const asctime = (date: Date) =>
  `${DAYS[date.getUTCDay()]} ${MONTHS[date.getUTCMonth()]} ${String(date.getUTCDate()).padStart(2, " ")} ` +
  `${two(date.getUTCHours())}:${two(date.getUTCMinutes())}:${two(date.getUTCSeconds())} ${date.getUTCFullYear()}`

/** The envelope sender as a `From ` line names it: one token, MAILER-DAEMON for the null sender. */
const senderToken = (mailFrom: string) => {
  const token = mailFrom.trim().replace(/\s+/g, "")
  return token === "" || token === "<>" ? "MAILER-DAEMON" : token
}

const FROM_LINE = /^>*From /

/** One message as an mbox entry: its `From ` line, its lines quoted (mboxrd) with LF ends, an empty line. */
export const mboxEntry = (raw: Uint8Array, mailFrom: string, receivedAt: Date): Buffer => {
  // Bytes as latin1 so that any byte survives the line handling unchanged (8-bit mail included).
  const text = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString("latin1")
  const lines = text.split(/\r?\n/)
  // A message ending with a line end has an empty last piece, which is not a line of its own.
  if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop()
  const quoted = lines.map((line) => (FROM_LINE.test(line) ? `>${line}` : line))
  return Buffer.from(`From ${senderToken(mailFrom)} ${asctime(receivedAt)}\n${quoted.join("\n")}\n\n`, "latin1")
}

interface Listed {
  readonly id: string
  readonly mailFrom: string
  readonly receivedAt: Date
  /** `received_at` as the database writes it: to the microsecond, which a Date is not. */
  readonly position: string
  readonly size: number
}

export class MailExport extends Effect.Service<MailExport>()("mailroom/MailExport", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /** The next EXPORT_PAGE emails of the mailbox after `after`, in export order. */
    const page = (mailboxId: string, after: Listed | undefined) =>
      sql<Listed>`
        SELECT id, mail_from, received_at, received_at::text AS position, size FROM emails
        WHERE mailbox_id = ${mailboxId}
          ${after === undefined ? sql`` : sql`AND (received_at, id) > (${after.position}::timestamptz, ${after.id})`}
        ORDER BY received_at, id
        LIMIT ${EXPORT_PAGE}`

    /** The raw messages of `emails`, in their order. */
    const contents = (emails: ReadonlyArray<Listed>) =>
      Effect.map(
        sql<{ id: string; content: Uint8Array }>`
          SELECT e.id, b.content FROM emails e JOIN blobs b ON b.sha256 = e.raw_sha256
          WHERE e.id = ANY(${emails.map((email) => email.id)}::text[])`,
        (rows) => {
          const byId = new Map(rows.map((row) => [row.id, row.content]))
          // One deleted since it was listed is left out.
          return emails.flatMap((email) => {
            const content = byId.get(email.id)
            return content === undefined ? [] : [mboxEntry(content, email.mailFrom, email.receivedAt)]
          })
        }
      )

    /**
     * The mailbox's address and its mail as mbox bytes: 404 (before anything is streamed) when it is
     * not an active mailbox of `userId`'s.
     */
    const mbox = Effect.fn("MailExport.mbox")(function*(userId: string, mailboxId: string) {
      yield* ownMailbox(sql, userId, mailboxId)
      const found = yield* sql<{ address: string }>`
        SELECT local_part || '@' || domain AS address FROM mailboxes WHERE id = ${mailboxId}`
      const listed = Stream.paginateChunkEffect(undefined as Listed | undefined, (after) =>
        Effect.map(page(mailboxId, after), (rows) => {
          const last = rows.at(-1)
          return [Chunk.unsafeFromArray(rows), rows.length < EXPORT_PAGE ? Option.none() : Option.fromNullable(last)] as const
        }))
      // Messages read together up to BYTES_AT_ONCE (a larger one alone), so memory stays bounded.
      const bytes = listed.pipe(
        Stream.transduce(Sink.foldWeighted({
          initial: [] as Array<Listed>,
          maxCost: BYTES_AT_ONCE,
          cost: (_, email) => Number(email.size),
          body: (group, email) => [...group, email]
        })),
        Stream.mapEffect(contents),
        Stream.flatMap((entries) => Stream.fromIterable<Uint8Array>(entries))
      )
      return { address: found[0]!.address, bytes }
    })

    return { mbox } as const
  })
}) {}
