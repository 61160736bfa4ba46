/**
 * The folders of a mailbox as IMAP numbers them (folders.ts says which mail each folder shows).
 *
 * A folder's messages are numbered when a session looks at the folder (`sync`), under a lock on
 * the folder's row: each email new to the folder gets the next UID, in the order the mail arrived, and
 * an email that left it (deleted, moved to Junk, unlabelled) loses its UID. So UIDs only grow, every
 * session sees the same UID for the same message, and a message a session has seen never comes back
 * under a UID below one it saw: nothing needs to number mail as it is stored (the inbound path is
 * untouched). An email that leaves a folder and comes back is a new message there, with a new UID,
 * as RFC 3501 wants of a message moved out and back. UIDVALIDITY is when the folder was first looked at;
 * it changes only if the folder's numbering is lost (a mailbox deleted and made again).
 *
 * A session polls its folder (NOOP, IDLE) far more often than the folder changes: `version` sums the
 * folder up without reading its messages, and only a version unlike the one the session read means
 * reading them again.
 */
import { SqlClient, type Statement } from "@effect/sql"
import { Effect } from "effect"
import { escapeLike } from "../like.ts"
import { UNREAD } from "../mail/label-rules.ts"
import {
  FLAGGED_LABEL,
  type Folder,
  folderKey,
  folderNamed,
  foldersOf,
  isKeywordFlag,
  isSeen,
  JUNK_LABELS,
  KEPT_FLAGS,
  type KeptFlag,
  SYSTEM_LABELS
} from "./folders.ts"
import { outage } from "./refusals.ts"

/**
 * Whether the email `e` carries a label of the account's own (one not in SYSTEM_LABELS): the system
 * labels written into the statement as migration 0084's index has them, so that LIST reads that index
 * in any plan.
 */
export const CARRIES_OWN_LABELS = `NOT (e.labels <@ ARRAY[${[...SYSTEM_LABELS].map((label) => `'${label}'`).join(", ")}]::text[])`

/** A message of a folder, as a session keeps it. */
export interface FolderMessage {
  readonly uid: number
  readonly emailId: string
  readonly direction: string
  readonly labels: ReadonlyArray<string>
  readonly size: number
  /** When it arrived (INTERNALDATE), in milliseconds since 1970: a session keeps every message, so no Date each. */
  readonly receivedAt: number
  /** The flags and keywords kept for it (imap_flags). */
  readonly kept: ReadonlyArray<string>
  /** Received mail the mailbox has sent a reply to (\Answered, whatever was kept). */
  readonly answered: boolean
  /** Received mail the mailbox has forwarded ($Forwarded, whatever was kept). */
  readonly forwarded: boolean
}

/**
 * A STORE of kept flags and keywords: those added and those taken away (any case), or (`replace`,
 * FLAGS without + or -) the ones added and no other.
 */
export interface KeptFlagChange {
  readonly add: ReadonlyArray<string>
  readonly remove: ReadonlyArray<string>
  readonly replace: boolean
}

export interface FolderState {
  readonly uidValidity: number
  readonly uidNext: number
  /**
   * The folder's contents summed up as they were read (`version`): while the folder's version is the
   * same, so is what a session was shown of it.
   */
  readonly version: string
  /** By UID, ascending. */
  readonly messages: ReadonlyArray<FolderMessage>
}

/** A folder counted for STATUS. */
export interface FolderCounts {
  readonly uidValidity: number
  readonly uidNext: number
  readonly messages: number
  readonly unseen: number
  /** Octets, the messages' sizes summed. */
  readonly size: number
}

/** A SEARCH key (RFC 3501 §6.4.4), sequence numbers already turned into UIDs by the session. */
export type SearchKey =
  | { readonly kind: "all" }
  | { readonly kind: "uids"; readonly ranges: ReadonlyArray<readonly [number, number]> }
  | { readonly kind: "flag"; readonly flag: "seen" | "flagged"; readonly set: boolean }
  | { readonly kind: "none" }
  | { readonly kind: "text"; readonly field: "from" | "to" | "cc" | "bcc" | "subject" | "body" | "text"; readonly value: string }
  | { readonly kind: "header"; readonly name: string; readonly value: string }
  | { readonly kind: "date"; readonly field: "internal" | "sent"; readonly op: "before" | "on" | "since"; readonly day: Date }
  | { readonly kind: "size"; readonly op: "larger" | "smaller"; readonly bytes: number }
  | { readonly kind: "not"; readonly key: SearchKey }
  | { readonly kind: "or"; readonly left: SearchKey; readonly right: SearchKey }
  | { readonly kind: "and"; readonly keys: ReadonlyArray<SearchKey> }

/** Kept flags as FLAGS lists them: the system flags in their order, then the keywords. */
const inOrder = (flags: ReadonlyArray<string>): ReadonlyArray<string> => [
  ...KEPT_FLAGS.filter((flag) => flags.includes(flag)),
  ...flags.filter(isKeywordFlag)
]

const NOTHING_KEPT: ReadonlyArray<string> = []

/** What may stand on either side of an address written in a header, and not be part of it (regex classes). */
const ADDRESS_EDGE_BEFORE = "(^|[^a-z0-9._%+-])"
const ADDRESS_EDGE_AFTER = "($|[^a-z0-9.-])"

export class FolderViews extends Effect.Service<FolderViews>()("mailroom/FolderViews", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const plain = sql.withoutTransforms()

    /**
     * The folders of a mailbox: the system ones and one per label its mail carries (of the account's
     * own: read from the mail that carries any, CARRIES_OWN_LABELS).
     */
    const folders = Effect.fn("FolderViews.folders")(function*(mailboxId: string) {
      const rows = yield* sql<{ label: string }>`
        SELECT DISTINCT l.label FROM emails e, unnest(e.labels) AS l(label)
        WHERE e.mailbox_id = ${mailboxId} AND ${sql.literal(CARRIES_OWN_LABELS)}`
      return foldersOf(rows.map((row) => row.label))
    }, Effect.catchTag("SqlError", outage))

    /**
     * The folder a mail program names, if the mailbox has it: a system folder without a read, a label's
     * when some email of the mailbox carries the label (one probe, not the whole list LIST reads).
     */
    const resolve = Effect.fn("FolderViews.resolve")(function*(mailboxId: string, name: string) {
      const folder = folderNamed(name)
      if (folder?.kind !== "label") return folder
      const carried = yield* sql`SELECT 1 FROM emails WHERE mailbox_id = ${mailboxId} AND ${folder.label ?? ""} = ANY(labels) LIMIT 1`
      return carried.length > 0 ? folder : undefined
    }, Effect.catchTag("SqlError", outage))

    /** Which of the mailbox's emails `e` are in `folder`. */
    const inFolder = (folder: Folder): Statement.Fragment => {
      switch (folder.kind) {
        case "inbox":
          return sql`e.direction = 'inbound' AND NOT (e.labels && ${[...JUNK_LABELS]}::text[])`
        case "sent":
          return sql`e.direction = 'outbound'`
        case "junk":
          return sql`e.direction = 'inbound' AND e.labels && ${[...JUNK_LABELS]}::text[]`
        case "trash":
          return sql`false`
        case "label":
          return sql`${folder.label ?? ""} = ANY(e.labels)`
      }
    }

    /** Which emails `e` lack \Seen (isSeen in SQL): received mail still unread. */
    const unseenMail = sql`(e.direction = 'inbound' AND ${UNREAD} = ANY(e.labels))`

    /**
     * The Message-IDs of the mail the mailbox has answered (named by its sent mail's In-Reply-To) and
     * forwarded (the last its References name, in sent mail answering none: a forward).
     */
    const repliesIn = (mailboxId: string) =>
      Effect.map(
        sql<{ answered: string | null; forwarded: string | null }>`
          SELECT DISTINCT substring(headers->>'in-reply-to' FROM '<[^<>]*>') AS answered,
                 CASE WHEN NOT headers ? 'in-reply-to' THEN referenced[cardinality(referenced)] END AS forwarded
          FROM emails
          WHERE mailbox_id = ${mailboxId} AND direction = 'outbound' AND (headers ? 'in-reply-to' OR cardinality(referenced) > 0)`,
        (rows) => ({
          answered: new Set(rows.flatMap((row) => row.answered ?? [])),
          forwarded: new Set(rows.flatMap((row) => row.forwarded ?? []))
        })
      )

    /**
     * STORE of kept flags and keywords on some of the mailbox's emails, each changed where it is kept
     * (two sessions adding flags to one message both count). The flags each now has, by email id: with
     * flags added (or replaced by some), every email of `emailIds` still there; else those that had any kept.
     */
    const keepFlags = Effect.fn("FolderViews.keepFlags")(function*(mailboxId: string, emailIds: ReadonlyArray<string>, change: KeptFlagChange) {
      const add = [...change.add]
      // Each flag once, as first written: those kept before those added.
      const after = change.replace ? sql`${add}::text[]` : sql`ARRAY(
        SELECT f FROM (
          SELECT DISTINCT ON (lower(f)) f, n FROM unnest(imap_flags.flags || ${add}::text[]) WITH ORDINALITY AS u(f, n)
          WHERE NOT (lower(f) = ANY(${change.remove.map((flag) => flag.toLowerCase())}::text[])) ORDER BY lower(f), n) AS kept
        ORDER BY n)`
      const rows = yield* (add.length > 0
        ? sql<{ emailId: string; flags: ReadonlyArray<string> }>`
          INSERT INTO imap_flags (email_id, mailbox_id, flags)
          SELECT e.id, e.mailbox_id, ${add}::text[] FROM emails e
          WHERE e.mailbox_id = ${mailboxId} AND e.id = ANY(${[...emailIds]}::text[])
          ON CONFLICT (email_id) DO UPDATE SET flags = ${after}
          RETURNING email_id, flags`
        : sql<{ emailId: string; flags: ReadonlyArray<string> }>`
          UPDATE imap_flags SET flags = ${after}
          WHERE mailbox_id = ${mailboxId} AND email_id = ANY(${[...emailIds]}::text[])
          RETURNING email_id, flags`)
      return new Map(rows.map((row) => [row.emailId, inOrder(row.flags)]))
    }, Effect.catchTag("SqlError", outage))

    /** The mailbox's emails that carry the kept flag `flag` now (whichever session set it). */
    const carrying = Effect.fn("FolderViews.carrying")(function*(mailboxId: string, flag: KeptFlag) {
      const rows = yield* sql<{ emailId: string }>`SELECT email_id FROM imap_flags WHERE mailbox_id = ${mailboxId} AND ${flag} = ANY(flags)`
      return new Set(rows.map((row) => row.emailId))
    }, Effect.catchTag("SqlError", outage))

    /** Rows summed up as `count:hash sum` of `value` (64-bit hashes; an aggregate). */
    const summed = (value: Statement.Fragment) => sql`count(*) || ':' || coalesce(sum(hashtextextended(${value}, 0)), 0)`

    /**
     * What a folder shows summed up, a count and a 64-bit hash sum each: its emails with their labels
     * (flags, membership), the mailbox's kept flags and (but in Sent) the sent mail that answers or
     * forwards. One statement, so one snapshot; about 2 ms a thousand messages on PostgreSQL, where
     * reading them is ten times that. A change leaves a hash sum the same only by a 2^-64 chance.
     */
    const contentsOf = (mailboxId: string, folder: Folder) =>
      sql`
        (SELECT ${summed(sql`e.id || e.labels::text`)}
         FROM emails e WHERE e.mailbox_id = ${mailboxId} AND ${inFolder(folder)})
        || '/' || (SELECT ${summed(sql`email_id || flags::text`)}
         FROM imap_flags WHERE mailbox_id = ${mailboxId})
        || '/' || ${
        folder.kind === "sent" ? sql`''` : sql`(SELECT ${summed(sql`id`)}
         FROM emails WHERE mailbox_id = ${mailboxId} AND direction = 'outbound' AND (headers ? 'in-reply-to' OR cardinality(referenced) > 0))`
      }`
    /** A version (FolderState's): the contents, then the numbering (the next UID, how many are numbered). */
    const versionOf = (contents: string, uidNext: number | string, numbered: number | string) => `${contents}|${uidNext}|${numbered}`

    /**
     * The folder's version now, without reading its messages: the same as the last `sync`'s, nothing a
     * session was shown then has changed (a mail program's NOOP or IDLE poll ends there).
     */
    const version = Effect.fn("FolderViews.version")(function*(mailboxId: string, folder: Folder) {
      const key = folderKey(folder)
      const rows = yield* sql<{ contents: string; uidNext: string | null; numbered: string }>`
        SELECT ${contentsOf(mailboxId, folder)} AS contents,
          (SELECT uid_next FROM imap_folders WHERE mailbox_id = ${mailboxId} AND folder = ${key}) AS uid_next,
          (SELECT count(*) FROM imap_messages WHERE mailbox_id = ${mailboxId} AND folder = ${key}) AS numbered`
      const row = rows[0]!
      return versionOf(row.contents, row.uidNext ?? "", row.numbered)
    }, Effect.catchTag("SqlError", outage))

    /**
     * The folder numbered now, in the transaction `sync` and `status` run it in: emails new to it get the
     * next UIDs (in arrival order), emails that left it lose theirs. The folder's row is locked, so
     * sessions numbering the same folder at once take turns.
     */
    const number = (mailboxId: string, folder: Folder) =>
      Effect.gen(function*() {
        const key = folderKey(folder)
        yield* sql`
          INSERT INTO imap_folders (mailbox_id, folder, uid_validity)
          VALUES (${mailboxId}, ${key}, extract(epoch FROM now())::bigint)
          ON CONFLICT (mailbox_id, folder) DO NOTHING`
        const locked = yield* sql<{ uidValidity: string; uidNext: string }>`
          SELECT uid_validity, uid_next FROM imap_folders WHERE mailbox_id = ${mailboxId} AND folder = ${key} FOR UPDATE`
        const uidValidity = Number(locked[0]!.uidValidity)
        let uidNext = Number(locked[0]!.uidNext)
        // Two plain reads and the difference computed here: no join whose plan would depend on the
        // tables' statistics (the embedded database keeps none fresh, and a nested loop over a
        // folder's every message twice took seconds at 10,000).
        // A row each of the folder's every message: named as read (no renaming of each row's columns),
        // numbers as numbers (float8: no strings to convert, no Date to make).
        const members = yield* plain<
          { id: string; messageId: string; direction: string; labels: ReadonlyArray<string>; size: number; receivedAt: number }
        >`
          SELECT e.id, e.message_id AS "messageId", e.direction, e.labels, e.size::float8 AS size,
            (extract(epoch FROM e.received_at) * 1000)::float8 AS "receivedAt"
          FROM emails e
          WHERE e.mailbox_id = ${mailboxId} AND ${inFolder(folder)}
          ORDER BY e.received_at, e.id`
        const numbered = yield* plain<{ uid: number; emailId: string }>`
          SELECT uid::float8 AS uid, email_id AS "emailId" FROM imap_messages WHERE mailbox_id = ${mailboxId} AND folder = ${key}`
        const uidOf = new Map(numbered.map((row) => [row.emailId, row.uid]))
        const present = new Set(members.map((email) => email.id))
        const left = numbered.filter((row) => !present.has(row.emailId)).map((row) => row.uid)
        if (left.length > 0) {
          yield* sql`DELETE FROM imap_messages WHERE mailbox_id = ${mailboxId} AND folder = ${key} AND uid = ANY(${left}::bigint[])`
        }
        const arriving = members.filter((email) => !uidOf.has(email.id))
        if (arriving.length > 0) {
          const uids = arriving.map((email, index) => {
            uidOf.set(email.id, uidNext + index)
            return uidNext + index
          })
          yield* sql`
            INSERT INTO imap_messages (mailbox_id, folder, uid, email_id)
            SELECT ${mailboxId}, ${key}, u.uid, u.email_id
            FROM unnest(${uids}::bigint[], ${arriving.map((email) => email.id)}::text[]) AS u(uid, email_id)`
          uidNext += arriving.length
          yield* sql`UPDATE imap_folders SET uid_next = ${uidNext} WHERE mailbox_id = ${mailboxId} AND folder = ${key}`
        }
        return { uidValidity, uidNext, members, uidOf }
      })

    /** The folder's messages now, numbered (`number`), each with its flags. */
    const sync = Effect.fn("FolderViews.sync")(function*(mailboxId: string, folder: Folder) {
      return yield* Effect.gen(function*() {
        // Summed up before anything is read: a change made meanwhile is in what is read but not in the
        // version, so the next look reads again (never the other way round, which would hide it).
        const contents = (yield* sql<{ contents: string }>`SELECT ${contentsOf(mailboxId, folder)} AS contents`)[0]!.contents
        const { members, uidNext, uidOf, uidValidity } = yield* number(mailboxId, folder)
        const kept = new Map(
          (yield* sql<{ emailId: string; flags: ReadonlyArray<string> }>`
            SELECT email_id, flags FROM imap_flags WHERE mailbox_id = ${mailboxId}`).map((row) => [row.emailId, inOrder(row.flags)])
        )
        const replies = folder.kind === "sent" ? { answered: new Set<string>(), forwarded: new Set<string>() } : yield* repliesIn(mailboxId)
        // A session keeps its folder's messages while it is open (190,000 in a large INBOX): the few
        // sets of labels mail carries are shared, as are the directions and "nothing kept".
        const labelSets = new Map<string, ReadonlyArray<string>>()
        const shared = (labels: ReadonlyArray<string>) => {
          const key = labels.join("\u0000")
          const found = labelSets.get(key)
          if (found !== undefined) return found
          labelSets.set(key, labels)
          return labels
        }
        const messages = members
          .map((email): FolderMessage => {
            const inbound = email.direction === "inbound"
            return {
              uid: uidOf.get(email.id)!,
              emailId: email.id,
              direction: inbound ? "inbound" : "outbound",
              labels: shared(email.labels),
              size: email.size,
              receivedAt: Math.floor(email.receivedAt),
              kept: kept.get(email.id) ?? NOTHING_KEPT,
              answered: inbound && replies.answered.has(email.messageId),
              forwarded: inbound && replies.forwarded.has(email.messageId)
            }
          })
          .sort((a, b) => a.uid - b.uid)
        // Numbered under the folder's lock, the folder's numbers are its members' until the transaction ends.
        return { uidValidity, uidNext, version: versionOf(contents, uidNext, members.length), messages } satisfies FolderState
      }).pipe(sql.withTransaction)
    }, Effect.catchTag("SqlError", outage))

    /**
     * STATUS: the folder counted as numbered now (UIDNEXT is the next UID a session will see), without
     * the kept and derived flags no count needs (\Seen is the email's own label). A mail program asks
     * it of every folder every few minutes: counted in one statement while the numbering already holds
     * the folder's mail (the same count and hash sum of ids: no mail new to it, none gone), else the
     * folder numbered first (`number`).
     */
    const status = Effect.fn("FolderViews.status")(function*(mailboxId: string, folder: Folder) {
      const key = folderKey(folder)
      const counted = yield* sql<
        { uidValidity: string; uidNext: string; numbered: string; members: string; messages: string; unseen: string; size: string }
      >`
        SELECT f.uid_validity, f.uid_next, c.members, c.messages, c.unseen, c.size,
          (SELECT ${summed(sql`m.email_id`)}
           FROM imap_messages m WHERE m.mailbox_id = ${mailboxId} AND m.folder = ${key}) AS numbered
        FROM imap_folders f, (
          SELECT ${summed(sql`e.id`)} AS members, count(*) AS messages,
            count(*) FILTER (WHERE ${unseenMail}) AS unseen, coalesce(sum(e.size), 0) AS size
          FROM emails e WHERE e.mailbox_id = ${mailboxId} AND ${inFolder(folder)}) c
        WHERE f.mailbox_id = ${mailboxId} AND f.folder = ${key}`
      const row = counted[0]
      if (row !== undefined && row.numbered === row.members) {
        return {
          uidValidity: Number(row.uidValidity),
          uidNext: Number(row.uidNext),
          messages: Number(row.messages),
          unseen: Number(row.unseen),
          size: Number(row.size)
        } satisfies FolderCounts
      }
      const { members, uidNext, uidValidity } = yield* number(mailboxId, folder).pipe(sql.withTransaction)
      return {
        uidValidity,
        uidNext,
        messages: members.length,
        unseen: members.filter((email) => !isSeen(email)).length,
        size: members.reduce((sum, email) => sum + email.size, 0)
      } satisfies FolderCounts
    }, Effect.catchTag("SqlError", outage))

    /** The raw messages of some of the mailbox's emails, by email id (an email deleted since is absent). */
    const raw = Effect.fn("FolderViews.raw")(function*(mailboxId: string, emailIds: ReadonlyArray<string>) {
      const rows = yield* sql<{ id: string; content: Uint8Array }>`
        SELECT e.id, b.content FROM emails e JOIN blobs b ON b.sha256 = e.raw_sha256
        WHERE e.mailbox_id = ${mailboxId} AND e.id = ANY(${[...emailIds]}::text[])`
      return new Map(rows.map((row) => [row.id, row.content]))
    }, Effect.catchTag("SqlError", outage))

    const contains = (column: Statement.Fragment, value: string) => sql`${column} ILIKE ${`%${escapeLike(value)}%`} ESCAPE '\\'`
    const headerText = (name: string) => sql`coalesce(e.headers->>${name}, '')`
    /** Every header field's value, a line each (the stored JSON would show a quote as \"). */
    const headerValues = sql`coalesce((SELECT string_agg(h.value, E'\n') FROM jsonb_each_text(e.headers) AS h), '')`
    /**
     * BODY: the message's body as a reader meets it: its text part, its HTML part, and the text of its
     * document attachments (PDF, Word) as search reads them.
     */
    const bodyHolds = (value: string) =>
      sql`(${contains(sql`coalesce(e.text_body, '')`, value)} OR ${contains(sql`coalesce(e.html_body, '')`, value)} OR EXISTS (
        SELECT 1 FROM attachments a JOIN document_texts d ON d.checksum = a.checksum
        WHERE a.email_id = e.id AND ${contains(sql`d.text`, value)}))`

    /** A SEARCH key as a condition on `imap_messages m` joined to `emails e`. */
    const condition = (key: SearchKey): Statement.Fragment => {
      switch (key.kind) {
        case "all":
          return sql`true`
        case "none":
          return sql`false`
        case "uids":
          return key.ranges.length === 0
            ? sql`false`
            : sql`(${sql.join(" OR ", false)(key.ranges.map(([from, to]) => sql`m.uid BETWEEN ${from} AND ${to}`))})`
        case "flag":
          if (key.flag === "seen") return key.set ? sql`NOT ${unseenMail}` : unseenMail
          return key.set ? sql`${FLAGGED_LABEL} = ANY(e.labels)` : sql`NOT (${FLAGGED_LABEL} = ANY(e.labels))`
        case "text":
          switch (key.field) {
            case "subject":
              return contains(sql`e.subject`, key.value)
            case "body":
              return bodyHolds(key.value)
            case "text":
              return sql`(${contains(headerValues, key.value)} OR ${bodyHolds(key.value)} OR EXISTS (
                SELECT 1 FROM attachments a WHERE a.email_id = e.id AND ${contains(sql`coalesce(a.filename, '')`, key.value)}))`
            case "bcc":
              // Sent mail carries no Bcc field (it is taken out before sending): its blind recipients
              // are those it was delivered to that To and Cc do not name.
              return sql`(${contains(headerText("bcc"), key.value)} OR (e.direction = 'outbound' AND EXISTS (
                SELECT 1 FROM outbound_deliveries d
                WHERE d.email_id = e.id AND ${contains(sql`d.recipient`, key.value)}
                  AND NOT lower(${headerText("to")} || ' ' || ${headerText("cc")}) ~ (
                    -- the whole address, not a part of another (bob@ in jimbob@): its characters escaped, bounded
                    ${ADDRESS_EDGE_BEFORE} || regexp_replace(lower(d.recipient), '([^a-z0-9@])', ${"\\\\\\1"}, 'g') || ${ADDRESS_EDGE_AFTER}))))`
            default:
              return contains(headerText(key.field), key.value)
          }
        case "header":
          return key.value.length === 0 ? sql`e.headers ? ${key.name.toLowerCase()}` : contains(headerText(key.name.toLowerCase()), key.value)
        case "date": {
          if (key.field !== "internal") {
            // SENT*: the Date header's own calendar day, its time and zone disregarded (RFC 3501 §6.4.4):
            // the sent moment moved by the header's offset. A header without a numeric offset is read as UTC.
            const sentDay = sql`((coalesce(e.sent_at, e.received_at) AT TIME ZONE 'UTC') + coalesce(
              (SELECT make_interval(mins => (CASE WHEN z[1] = '-' THEN -1 ELSE 1 END) * (z[2]::int * 60 + z[3]::int))
               FROM regexp_match(e.headers->>'date', '([+-])([0-9]{2})([0-9]{2})') AS z), interval '0'))::date`
            const day = key.day.toISOString().slice(0, 10)
            return key.op === "before"
              ? sql`${sentDay} < ${day}::date`
              : key.op === "since"
              ? sql`${sentDay} >= ${day}::date`
              : sql`${sentDay} = ${day}::date`
          }
          const day = key.day.toISOString()
          const next = new Date(key.day.getTime() + 86_400_000).toISOString()
          return key.op === "before"
            ? sql`e.received_at < ${day}::timestamptz`
            : key.op === "since"
            ? sql`e.received_at >= ${day}::timestamptz`
            : sql`(e.received_at >= ${day}::timestamptz AND e.received_at < ${next}::timestamptz)`
        }
        case "size":
          return key.op === "larger" ? sql`e.size > ${key.bytes}` : sql`e.size < ${key.bytes}`
        case "not":
          return sql`NOT (${condition(key.key)})`
        case "or":
          return sql`((${condition(key.left)}) OR (${condition(key.right)}))`
        case "and":
          return key.keys.length === 0 ? sql`true` : sql`(${sql.join(" AND ", false)(key.keys.map(condition))})`
      }
    }

    /** The UIDs of the folder's messages (as numbered so far) that match `key`, ascending. */
    const search = Effect.fn("FolderViews.search")(function*(mailboxId: string, folder: Folder, key: SearchKey) {
      const rows = yield* sql<{ uid: string }>`
        SELECT m.uid FROM imap_messages m JOIN emails e ON e.id = m.email_id
        WHERE m.mailbox_id = ${mailboxId} AND m.folder = ${folderKey(folder)} AND ${condition(key)}
        ORDER BY m.uid`
      return rows.map((row) => Number(row.uid))
    }, Effect.catchTag("SqlError", outage))

    /** The mail sent from the mailbox with this Message-ID, if any: what an APPEND of a sent copy is already. */
    const sentCopy = Effect.fn("FolderViews.sentCopy")(function*(mailboxId: string, messageId: string) {
      const rows = yield* sql<{ id: string }>`
        SELECT id FROM emails WHERE mailbox_id = ${mailboxId} AND message_id = ${messageId} AND direction = 'outbound'
        ORDER BY received_at LIMIT 1`
      return rows[0]?.id
    }, Effect.catchTag("SqlError", outage))

    return { folders, resolve, sync, version, status, raw, search, sentCopy, keepFlags, carrying } as const
  })
}) {}
