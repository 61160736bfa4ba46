/**
 * One IMAP connection's conversation (RFC 3501's states: not authenticated, authenticated, selected,
 * logout), over the ImapStore's view of one mailbox. The server (server.ts) frames commands and hands
 * them here one at a time; responses go out through `send` in order.
 *
 * What a session tells about changes made elsewhere (new mail, flags changed through the API, mail
 * deleted): at SELECT, NOOP, CHECK, during IDLE, and after its own EXPUNGE, never in the middle of a
 * FETCH, STORE or SEARCH (RFC 3501 §7.4.1), so sequence numbers stay put while a client counts on them.
 *
 * Every refusal is a tagged NO or BAD with a response code (RFC 5530); a store outage is
 * NO [UNAVAILABLE] and the client may try again. A command the client got wrong fails with BadCommand,
 * answered BAD: expected, never logged; only a bug is a defect (NO [SERVERBUG], logged).
 */
import { Effect, Either, Option } from "effect"
import {
  filing,
  type Folder,
  flagsOf,
  HIERARCHY_DELIMITER,
  impliedParents,
  isWellFormedKeyword,
  isKeywordFlag,
  KEPT_FLAGS,
  keywordsOf,
  labelChangeFor,
  MAX_KEYWORDS,
  onceEach,
  PERMANENT_FLAGS,
  sameFlag,
  type SystemFlag
} from "../../services/imap/folders.ts"
import { bodyStructure, envelope, header, parseMessage, sectionBytes } from "../../services/imap/mime.ts"
import type { ImapRefused } from "../../services/imap/refusals.ts"
import type { ImapStore, SignedIn } from "../../services/imap/store.ts"
import type { FolderMessage } from "../../services/imap/views.ts"
import { maxMessageBytes } from "../smtp/server.ts"
import { parseFetchItem } from "./fetch-items.ts"
import { ImapMetrics } from "./metrics.ts"
import {
  type Arg,
  answerText,
  astring,
  badCommand,
  type BadCommand,
  type Command,
  decodeMailboxName,
  encodeMailboxName,
  formatInternalDate,
  inSequenceSet,
  Literal,
  type Out,
  parseSequenceSet,
  Raw,
  serialize,
  type SequenceSet,
  utf8
} from "./protocol.ts"
import { readSearchKeys } from "./search-keys.ts"

/** Failed sign-ins a connection may make before it is closed. */
export const MAX_FAILED_LOGINS = 3
/** Messages whose bytes are read from the store at once while answering a FETCH. */
const FETCH_BATCH = 50
/** Untagged answers gathered (`gathering`) are written once they reach this many bytes (latin1: a byte a character). */
const WRITE_BYTES = 64 * 1024

export interface SessionOptions {
  /** TLS is on (from the first byte, or after STARTTLS). */
  readonly secure: () => boolean
  /** STARTTLS can be offered (certificate configured, not yet on TLS). */
  readonly canStartTls: () => boolean
  /** Passwords may be taken without TLS (a loopback listener with no certificate). */
  readonly clearTextAllowed: boolean
}

/** What a command asks of the connection besides its responses. */
export type Next = "continue" | "close" | "startTls" | "authenticate" | "idle"

interface Selected {
  readonly folder: Folder
  readonly readOnly: boolean
  readonly uidValidity: number
  uidNext: number
  /** The folder's version when the session last read it (FolderState's). */
  version: string
  messages: Array<FolderMessage>
  /** The keywords the client was told the folder's messages use (FLAGS), in lower case. */
  readonly keywords: Set<string>
}

/** RFC 3501's LIST wildcards as a regular expression: `*` any, `%` any but the hierarchy's separator. */
const listPattern = (pattern: string) =>
  new RegExp(
    "^" + pattern.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/%/g, `[^${HIERARCHY_DELIMITER}]*`) + "$",
    pattern.toUpperCase().startsWith("INBOX") ? "i" : ""
  )

export const makeSession = (
  store: ImapStore,
  options: SessionOptions,
  send: (text: string) => Effect.Effect<void>
) => {
  let signedIn: (SignedIn & { readonly apiKey: string }) | undefined
  let selected: Selected | undefined
  let failedLogins = 0
  /** The tag of the AUTHENTICATE or IDLE waiting for the client's next line. */
  let waiting: { readonly tag: string; readonly kind: "authenticate" | "idle" } | undefined

  const untagged = (text: string) => send(`* ${text}\r\n`)
  /**
   * Untagged answers of one command written together, WRITE_BYTES at a time (a FETCH of a large
   * folder's every message, thousands of EXPUNGEs): `flush` writes the rest.
   */
  const gathering = () => {
    let text = ""
    const flush = Effect.suspend(() => {
      const out = text
      text = ""
      return out === "" ? Effect.void : send(out)
    })
    const add = (line: string) =>
      Effect.suspend(() => {
        text += `* ${line}\r\n`
        return text.length >= WRITE_BYTES ? flush : Effect.void
      })
    return { add, flush } as const
  }
  /** The command being answered, for the metrics. */
  let current = ""
  const tagged = (tag: string, status: "OK" | "NO" | "BAD", text: string) => {
    if (tag !== "") ImapMetrics.command(current, status)
    return send(`${tag} ${status} ${answerText(text)}\r\n`)
  }
  const refused = (tag: string, refusal: ImapRefused) => tagged(tag, "NO", `[${refusal.code}] ${refusal.text}`)

  const capabilities = () => {
    const list = ["IMAP4rev1", "LITERAL+", "SASL-IR", "ID", "IDLE", "NAMESPACE", "UIDPLUS", "MOVE", "UNSELECT", "SPECIAL-USE", "ENABLE"]
    // RFC 7889: a client learns the largest APPEND taken before sending it (past it, NO [TOOBIG]).
    list.push(`APPENDLIMIT=${maxMessageBytes}`)
    if (signedIn === undefined) {
      if (options.canStartTls()) list.push("STARTTLS")
      if (options.secure() || options.clearTextAllowed) list.push("AUTH=PLAIN")
      else list.push("LOGINDISABLED")
    }
    return list.join(" ")
  }

  const seqOf = (uid: number) => {
    const messages = selected?.messages ?? []
    let low = 0
    let high = messages.length - 1
    while (low <= high) {
      const mid = (low + high) >> 1
      const at = messages[mid]!.uid
      if (at === uid) return mid + 1
      if (at < uid) low = mid + 1
      else high = mid - 1
    }
    return undefined
  }

  const flagsFor = (message: FolderMessage): Array<Raw> => flagsOf(message).map((flag) => new Raw(flag))

  /** The keywords `messages` carry, each once (in the case first met). */
  const keywordsIn = (messages: ReadonlyArray<FolderMessage>) => onceEach(messages.flatMap(keywordsOf))

  /** FLAGS: the system flags and the keywords the folder's messages use. */
  const flagList = (keywords: ReadonlyArray<string>) => [...PERMANENT_FLAGS, ...KEPT_FLAGS, ...keywords].join(" ")

  /** FLAGS again when the folder's messages (`messages`: as they now are) have come to use a keyword the client was not told of. */
  const announceKeywords = (state: Selected, messages: ReadonlyArray<FolderMessage> = state.messages) =>
    Effect.gen(function*() {
      const keywords = keywordsIn(messages)
      if (keywords.every((keyword) => state.keywords.has(keyword.toLowerCase()))) return
      for (const keyword of keywords) state.keywords.add(keyword.toLowerCase())
      yield* untagged(`FLAGS (${flagList(keywords)})`)
    })

  /** The messages a sequence set names (by sequence number, or by UID for the UID commands). */
  const pick = (state: Selected, set: SequenceSet, byUid: boolean): Array<FolderMessage> => {
    const { messages } = state
    if (messages.length === 0) return []
    return byUid
      ? messages.filter((message) => inSequenceSet(set, message.uid, messages[messages.length - 1]!.uid))
      : messages.filter((_, index) => inSequenceSet(set, index + 1, messages.length))
  }

  const sequenceSet = (arg: Arg | undefined, state: Selected, byUid: boolean): Either.Either<SequenceSet, BadCommand> => {
    if (arg?.kind !== "atom") return Either.left(badCommand("Expected a sequence set"))
    if (arg.text === "$") return Either.left(badCommand("No saved search"))
    const set = parseSequenceSet(arg.text)
    if (set === undefined) return Either.left(badCommand(`Not a sequence set: ${arg.text}`))
    if (!byUid && state.messages.length > 0) {
      const tooHigh = set.some(([from, to]) => [from, to].some((n) => n !== Infinity && n > state.messages.length))
      if (tooHigh) return Either.left(badCommand("No such message"))
    }
    return Either.right(set)
  }

  /** Messages gone from the session's folder, told as EXPUNGEs (highest first, so each number holds when said) unless `quiet`. */
  const leaveView = (state: Selected, gone: ReadonlyArray<FolderMessage>, quiet = false) =>
    Effect.gen(function*() {
      const uids = new Set(gone.map((message) => message.uid))
      const told = gathering()
      // Highest first: every message told gone before one is above it, so its number is still its place
      // in the view as the client counts (RFC 3501 §7.4.1).
      if (!quiet) {
        for (let seq = state.messages.length; seq >= 1; seq--) {
          if (uids.has(state.messages[seq - 1]!.uid)) yield* told.add(`${seq} EXPUNGE`)
        }
      }
      state.messages = state.messages.filter((message) => !uids.has(message.uid))
      yield* told.flush
    })

  /** Tell the session what changed in its folder since it last looked (EXPUNGE, FETCH FLAGS, EXISTS). */
  const refresh = (state: Selected) =>
    Effect.gen(function*() {
      // A mail program polls (NOOP, IDLE) far more often than its folder changes: its version first.
      if ((yield* store.version(signedIn!.mailboxId, state.folder)) === state.version) return
      const now = yield* store.sync(signedIn!.mailboxId, state.folder)
      state.version = now.version
      yield* announceKeywords(state, now.messages)
      const current = new Map(now.messages.map((message) => [message.uid, message]))
      yield* leaveView(state, state.messages.filter((message) => !current.has(message.uid)))
      const lastUid = state.messages.length === 0 ? 0 : state.messages[state.messages.length - 1]!.uid
      const told = gathering()
      for (let index = 0; index < state.messages.length; index++) {
        const before = state.messages[index]!
        const after = current.get(before.uid)!
        state.messages[index] = after
        if (flagsOf(before).join(" ") !== flagsOf(after).join(" ")) {
          yield* told.add(`${index + 1} FETCH ${serialize([new Raw("UID"), after.uid, new Raw("FLAGS"), flagsFor(after)])}`)
        }
      }
      yield* told.flush
      const added = now.messages.filter((message) => message.uid > lastUid)
      state.uidNext = now.uidNext
      if (added.length > 0) {
        state.messages.push(...added)
        yield* untagged(`${state.messages.length} EXISTS`)
      }
    })

  const select = (tag: string, name: string, examine: boolean) =>
    Effect.gen(function*() {
      selected = undefined
      const folder = yield* store.resolve(signedIn!.mailboxId, decodeMailboxName(name))
      if (folder === undefined) return yield* tagged(tag, "NO", "[NONEXISTENT] No such folder")
      const state = yield* store.sync(signedIn!.mailboxId, folder)
      const readOnly = examine || signedIn!.principal.readOnly
      const unseen = state.messages.findIndex((message) => !flagsOf(message).includes("\\Seen"))
      const keywords = keywordsIn(state.messages)
      yield* untagged(`FLAGS (${flagList(keywords)})`)
      // \* : the client may keep keywords of its own.
      yield* untagged(`OK [PERMANENTFLAGS (${readOnly ? "" : `${flagList([])} \\*`})] Flags kept`)
      yield* untagged(`${state.messages.length} EXISTS`)
      yield* untagged("0 RECENT")
      if (unseen >= 0) yield* untagged(`OK [UNSEEN ${unseen + 1}] First unseen`)
      yield* untagged(`OK [UIDVALIDITY ${state.uidValidity}] UIDs valid`)
      yield* untagged(`OK [UIDNEXT ${state.uidNext}] Predicted next UID`)
      selected = {
        folder,
        readOnly,
        uidValidity: state.uidValidity,
        uidNext: state.uidNext,
        version: state.version,
        messages: [...state.messages],
        keywords: new Set(keywords.map((keyword) => keyword.toLowerCase()))
      }
      yield* tagged(tag, "OK", `[${readOnly ? "READ-ONLY" : "READ-WRITE"}] ${examine ? "EXAMINE" : "SELECT"} completed`)
    })

  const list = (tag: string, command: string, reference: string, pattern: string) =>
    Effect.gen(function*() {
      if (pattern === "") {
        yield* untagged(`${command} (\\Noselect) "${HIERARCHY_DELIMITER}" ""`)
        return yield* tagged(tag, "OK", `${command} completed`)
      }
      const folders = yield* store.folders(signedIn!.mailboxId)
      const matches = listPattern(decodeMailboxName(reference + pattern))
      const names = folders.map((folder) => folder.name)
      const hasChildren = (name: string) => names.some((other) => other.startsWith(name + HIERARCHY_DELIMITER))
      for (const folder of folders) {
        if (!matches.test(folder.name)) continue
        const attributes = [hasChildren(folder.name) ? "\\HasChildren" : "\\HasNoChildren", ...(folder.specialUse ? [folder.specialUse] : [])]
        yield* untagged(`${command} (${attributes.join(" ")}) "${HIERARCHY_DELIMITER}" ${serialize(encodeMailboxName(folder.name))}`)
      }
      for (const parent of impliedParents(folders)) {
        if (!matches.test(parent)) continue
        yield* untagged(`${command} (\\Noselect \\HasChildren) "${HIERARCHY_DELIMITER}" ${serialize(encodeMailboxName(parent))}`)
      }
      yield* tagged(tag, "OK", `${command} completed`)
    })

  const status = (tag: string, name: string, items: Arg | undefined) =>
    Effect.gen(function*() {
      if (items?.kind !== "list") return yield* badCommand("STATUS needs a list of items")
      const folder = yield* store.resolve(signedIn!.mailboxId, decodeMailboxName(name))
      if (folder === undefined) return yield* tagged(tag, "NO", "[NONEXISTENT] No such folder")
      const counts = yield* store.status(signedIn!.mailboxId, folder)
      const out: Array<Out> = []
      for (const item of items.items) {
        const key = (yield* astring(item)).toUpperCase()
        const value = key === "MESSAGES"
          ? counts.messages
          : key === "RECENT"
          ? 0
          : key === "UIDNEXT"
          ? counts.uidNext
          : key === "UIDVALIDITY"
          ? counts.uidValidity
          : key === "UNSEEN"
          ? counts.unseen
          : key === "SIZE"
          ? counts.size
          : undefined
        if (value === undefined) return yield* badCommand(`Unknown STATUS item ${key}`)
        out.push(new Raw(key), value)
      }
      yield* untagged(`STATUS ${serialize(encodeMailboxName(folder.name))} ${serialize(out)}`)
      yield* tagged(tag, "OK", "STATUS completed")
    })

  /** Give messages a permanent flag or take it away, through their labels; the messages as they now are. */
  /** The label change setting (or clearing) `flag` on `messages` makes, on those it changes; none when it changes none. */
  const labelStep = (messages: ReadonlyArray<FolderMessage>, flag: SystemFlag, set: boolean) => {
    const has = (message: FolderMessage) => flagsOf(message).includes(flag)
    // Sent mail is always seen: there is nothing to change on it.
    const changing = messages.filter((message) => has(message) !== set && !(flag === "\\Seen" && message.direction === "outbound"))
    return changing.length === 0 ? [] : [{ emailIds: changing.map((message) => message.emailId), change: labelChangeFor(flag, set) }]
  }

  /** The session's view of each email `labels` names, with those labels. */
  const showLabels = (state: Selected, labels: ReadonlyMap<string, ReadonlyArray<string>>) => {
    for (let index = 0; index < state.messages.length; index++) {
      const message = state.messages[index]!
      const now = labels.get(message.emailId)
      if (now !== undefined) state.messages[index] = { ...message, labels: now }
    }
  }

  const changeFlags = (state: Selected, messages: ReadonlyArray<FolderMessage>, flag: SystemFlag, set: boolean) =>
    Effect.gen(function*() {
      for (const step of labelStep(messages, flag, set)) showLabels(state, yield* store.changeLabels(signedIn!.principal, step.emailIds, step.change))
    })

  const fetch = (tag: string, args: ReadonlyArray<Arg>, byUid: boolean) =>
    Effect.gen(function*() {
      const state = selected!
      const set = yield* sequenceSet(args[0], state, byUid)
      const spec = args[1]
      if (spec === undefined) return yield* badCommand("FETCH needs items")
      const items = (yield* Either.all((spec.kind === "list" ? spec.items : [spec]).map((item) => Either.flatMap(astring(item), parseFetchItem)))).flat()
      if (byUid && !items.some((item) => item.kind === "uid")) items.unshift({ kind: "uid" })
      const messages = pick(state, set, byUid)
      const needsBytes = items.some((item) => ["envelope", "bodystructure", "body", "section"].includes(item.kind))
      const marksSeen = !state.readOnly && items.some((item) => item.kind === "section" && !item.peek)
      if (marksSeen) yield* changeFlags(state, messages, "\\Seen", true)
      const wantsFlags = items.some((item) => item.kind === "flags") || marksSeen
      const told = gathering()
      for (let from = 0; from < messages.length; from += FETCH_BATCH) {
        const batch = messages.slice(from, from + FETCH_BATCH)
        // What is ready goes out before the store is asked for more.
        if (needsBytes) yield* told.flush
        const raws = needsBytes ? yield* store.raw(signedIn!.mailboxId, batch.map((message) => message.emailId)) : new Map<string, Uint8Array>()
        for (const picked of batch) {
          const seq = seqOf(picked.uid)
          if (seq === undefined) continue
          const message = state.messages[seq - 1]!
          const bytes = raws.get(message.emailId)
          // Deleted since the session last looked: the client hears of it at its next NOOP.
          if (needsBytes && bytes === undefined) continue
          const parsed = bytes === undefined ? undefined : parseMessage(bytes)
          const out: Array<Out> = []
          for (const item of items) {
            switch (item.kind) {
              case "uid":
                out.push(new Raw("UID"), message.uid)
                break
              case "flags":
                break
              case "internaldate":
                out.push(new Raw("INTERNALDATE"), formatInternalDate(new Date(message.receivedAt)))
                break
              case "size":
                out.push(new Raw("RFC822.SIZE"), bytes?.length ?? message.size)
                break
              case "envelope":
                out.push(new Raw("ENVELOPE"), envelope(parsed!.root))
                break
              case "bodystructure":
                out.push(new Raw("BODYSTRUCTURE"), bodyStructure(parsed!.text, parsed!.root, true))
                break
              case "body":
                out.push(new Raw("BODY"), bodyStructure(parsed!.text, parsed!.root, false))
                break
              case "section": {
                const whole = sectionBytes(parsed!.text, parsed!.root, item.path, item.text) ?? ""
                const [origin, count] = item.partial ?? [0, Infinity]
                const cut = item.partial === undefined ? whole : whole.slice(origin, count === Infinity ? undefined : origin + count)
                out.push(new Raw(item.label), new Literal(cut))
                break
              }
            }
          }
          if (wantsFlags) out.push(new Raw("FLAGS"), flagsFor(message))
          yield* told.add(`${seq} FETCH ${serialize(out)}`)
        }
      }
      yield* told.flush
      yield* tagged(tag, "OK", `${byUid ? "UID FETCH" : "FETCH"} completed`)
    })

  const storeFlags = (tag: string, args: ReadonlyArray<Arg>, byUid: boolean) =>
    Effect.gen(function*() {
      const state = selected!
      const set = yield* sequenceSet(args[0], state, byUid)
      const action = (yield* astring(args[1])).toUpperCase()
      const match = /^([+-]?)FLAGS(\.SILENT)?$/.exec(action)
      if (!match) return yield* badCommand(`Unknown STORE action ${action}`)
      const flagArg = args[2]
      const flags = yield* Either.all((flagArg?.kind === "list" ? flagArg.items : args.slice(2)).map(astring))
      if (state.readOnly) return yield* tagged(tag, "NO", "[READ-ONLY] The folder is open read-only")
      const messages = pick(state, set, byUid)
      const mode = match[1] === "+" ? "add" : match[1] === "-" ? "remove" : "replace"
      const named = (flag: string) => flags.some((given) => sameFlag(given, flag))
      // Keywords as first written (any case is the same keyword); flags with a \ other than these are not kept.
      const keywords = onceEach(flags.filter(isKeywordFlag))
      const invalid = keywords.find((keyword) => !isWellFormedKeyword(keyword))
      if (invalid !== undefined) return yield* badCommand(`Not a keyword: ${invalid}`)
      if (mode !== "remove") {
        /** How many keywords `message` would keep after this STORE. */
        const keeping = (message: FolderMessage) => onceEach([...(mode === "replace" ? [] : message.kept.filter(isKeywordFlag)), ...keywords]).length
        if (keywords.length > MAX_KEYWORDS || messages.some((message) => keeping(message) > MAX_KEYWORDS)) {
          return yield* tagged(tag, "NO", `[LIMIT] A message keeps at most ${MAX_KEYWORDS} keywords`)
        }
      }
      // Every change of the STORE made at once, all or none: a NO leaves every flag as it was (RFC 3501 §6.4.6).
      const labelChanges = PERMANENT_FLAGS.flatMap((flag) =>
        mode === "replace" ? labelStep(messages, flag, named(flag)) : named(flag) ? labelStep(messages, flag, mode === "add") : []
      )
      const given = [...KEPT_FLAGS.filter(named), ...keywords]
      const keptChange = messages.length > 0 && (mode === "replace" || given.length > 0)
        ? mode === "remove" ? { add: [], remove: given, replace: false } : { add: given, remove: [], replace: mode === "replace" }
        : undefined
      if (labelChanges.length > 0 || keptChange !== undefined) {
        const emailIds = messages.map((message) => message.emailId)
        const stored = yield* store.storeFlags(signedIn!.principal, signedIn!.mailboxId, emailIds, labelChanges, keptChange)
        showLabels(state, stored.labels)
        if (stored.kept !== undefined) {
          for (const picked of messages) {
            const seq = seqOf(picked.uid)
            if (seq !== undefined) state.messages[seq - 1] = { ...state.messages[seq - 1]!, kept: stored.kept.get(picked.emailId) ?? [] }
          }
          yield* announceKeywords(state)
        }
      }
      if (!match[2]) {
        // Written WRITE_BYTES at a time: a "mark all" on a large folder answers tens of thousands.
        const told = gathering()
        for (const picked of messages) {
          const seq = seqOf(picked.uid)
          if (seq === undefined) continue
          const message = state.messages[seq - 1]!
          const out: Array<Out> = [new Raw("FLAGS"), flagsFor(message)]
          if (byUid) out.unshift(new Raw("UID"), message.uid)
          yield* told.add(`${seq} FETCH ${serialize(out)}`)
        }
        yield* told.flush
      }
      yield* tagged(tag, "OK", `${byUid ? "UID STORE" : "STORE"} completed`)
    })

  const search = (tag: string, args: ReadonlyArray<Arg>, byUid: boolean) =>
    Effect.gen(function*() {
      const state = selected!
      let rest = args
      if (rest[0]?.kind === "atom" && rest[0].text.toUpperCase() === "CHARSET") {
        const charset = (yield* astring(rest[1])).toUpperCase()
        if (charset !== "UTF-8" && charset !== "US-ASCII") return yield* tagged(tag, "NO", "[BADCHARSET (UTF-8 US-ASCII)] Unknown charset")
        rest = rest.slice(2)
      }
      if (rest.length === 0) return yield* badCommand("SEARCH needs a key")
      const largest = state.messages.length === 0 ? 0 : state.messages[state.messages.length - 1]!.uid
      const key = yield* readSearchKeys(rest, {
        withFlag: (flag) => state.messages.filter((message) => flagsOf(message).some((has) => sameFlag(has, flag))).map((message) => message.uid),
        bySequence: (arg) => Either.map(sequenceSet(arg, state, false), (set) => pick(state, set, false).map((message) => message.uid)),
        uidRanges: (arg) =>
          Either.map(sequenceSet(arg, state, true), (set) => set.map(([a, b]) => {
            const [from, to] = [a === Infinity ? largest : a, b === Infinity ? largest : b]
            return [Math.min(from, to), Math.max(from, to)] as const
          }))
      })
      const uids = yield* store.search(signedIn!.mailboxId, state.folder, key)
      const found = byUid ? uids.filter((uid) => seqOf(uid) !== undefined) : uids.flatMap((uid) => seqOf(uid) ?? [])
      yield* untagged(`SEARCH${found.map((n) => ` ${n}`).join("")}`)
      yield* tagged(tag, "OK", `${byUid ? "UID SEARCH" : "SEARCH"} completed`)
    })

  /**
   * Delete `messages` at once; when one may not go yet (sent mail still being delivered, mail an
   * unsent draft answers: CANNOT), each on its own, so that the rest still go.
   */
  const deleteAllYouCan = (messages: ReadonlyArray<FolderMessage>) =>
    Effect.gen(function*() {
      const principal = signedIn!.principal
      /** Why these may not go yet (CANNOT), or undefined once they are deleted; any other refusal is the command's. */
      const refusedFor = (batch: ReadonlyArray<FolderMessage>) =>
        store.deleteEmails(principal, batch.map((message) => message.emailId)).pipe(
          Effect.as<string | undefined>(undefined),
          Effect.catchIf((refusal) => refusal.code === "CANNOT", (refusal) => Effect.succeed(refusal.text))
        )
      if (messages.length === 0 || (yield* refusedFor(messages)) === undefined) return { deleted: messages, kept: undefined }
      const deleted: Array<FolderMessage> = []
      let kept: { count: number; reason: string } | undefined
      for (const message of messages) {
        const reason = yield* refusedFor([message])
        if (reason === undefined) deleted.push(message)
        else kept = { count: (kept?.count ?? 0) + 1, reason: kept?.reason ?? reason }
      }
      return { deleted, kept }
    })

  /** Delete the messages marked \Deleted (those of `only`, for UID EXPUNGE), telling each as it goes unless `quiet`. */
  const expunge = (tag: string, only: SequenceSet | undefined, quiet: boolean) =>
    Effect.gen(function*() {
      const state = selected!
      if (state.readOnly) return yield* tagged(tag, "NO", "[READ-ONLY] The folder is open read-only")
      const last = state.messages[state.messages.length - 1]?.uid ?? 0
      const asked = state.messages.filter((message) => only === undefined || inSequenceSet(only, message.uid, last))
      // \Deleted as it is now: another session may have set it, or taken it away.
      const marked = asked.length === 0 ? new Set<string>() : yield* store.carrying(signedIn!.mailboxId, "\\Deleted")
      const doomed = asked.filter((message) => marked.has(message.emailId))
      const { deleted, kept } = yield* deleteAllYouCan(doomed)
      yield* leaveView(state, deleted, quiet)
      // The messages kept keep \Deleted, and the client never hears them expunged: its view stays true.
      if (tag !== "") yield* tagged(tag, "OK", kept === undefined ? "EXPUNGE completed" : `EXPUNGE completed; ${kept.count} kept: ${kept.reason}`)
    })

  /**
   * COPY or MOVE: filing is labelling (folders.ts `filing`); the messages' UIDs in the target are told
   * (UIDPLUS's COPYUID), and a MOVE's messages leave the session's view of the source.
   */
  const copyOrMove = (tag: string, args: ReadonlyArray<Arg>, byUid: boolean, move: boolean) =>
    Effect.gen(function*() {
      const state = selected!
      const set = yield* sequenceSet(args[0], state, byUid)
      const name = yield* astring(args[1])
      const command = `${byUid ? "UID " : ""}${move ? "MOVE" : "COPY"}`
      const target = yield* store.resolve(signedIn!.mailboxId, decodeMailboxName(name))
      if (target === undefined) return yield* tagged(tag, "NO", "[TRYCREATE] No such folder: label mail to make one")
      if (move && state.readOnly) return yield* tagged(tag, "NO", "[READ-ONLY] The folder is open read-only")
      const messages = pick(state, set, byUid)
      if (messages.length === 0) return yield* tagged(tag, "OK", `${command} completed: no messages`)
      const change = filing(state.folder, target, move, messages.map((message) => message.direction))
      if ("refused" in change) return yield* tagged(tag, "NO", `[CANNOT] ${change.refused}`)
      if ("deletes" in change) {
        yield* store.deleteEmails(signedIn!.principal, messages.map((message) => message.emailId))
        yield* leaveView(state, messages)
        return yield* tagged(tag, "OK", `${command} completed: deleted (Mailroom keeps no deleted mail)`)
      }
      yield* store.changeLabels(signedIn!.principal, messages.map((message) => message.emailId), change)
      const filed = yield* store.sync(signedIn!.mailboxId, target)
      const uidIn = new Map(filed.messages.map((message) => [message.emailId, message.uid]))
      const pairs = messages.flatMap((message) => {
        const uid = uidIn.get(message.emailId)
        return uid === undefined ? [] : [[message.uid, uid] as const]
      })
      const copyUid = pairs.length === 0
        ? ""
        : `[COPYUID ${filed.uidValidity} ${pairs.map(([from]) => from).join(",")} ${pairs.map(([, to]) => to).join(",")}] `
      if (!move) return yield* tagged(tag, "OK", `${copyUid}${command} completed`)
      if (copyUid !== "") yield* untagged(`OK ${copyUid}Moved`)
      // The source folder numbered afresh before the session is told the messages left it: moved back
      // later, each is a new message there with a new UID, never the one told expunged (RFC 3501 §2.3.1.1).
      yield* store.sync(signedIn!.mailboxId, state.folder)
      yield* leaveView(state, messages)
      yield* tagged(tag, "OK", `${command} completed`)
    })

  /**
   * APPEND: mail is added by receiving or sending it, so the one APPEND taken is a mail program keeping
   * its copy of a message it sent through submission, which Sent holds already: answered with that
   * message's UID, nothing stored twice.
   */
  const append = (tag: string, args: ReadonlyArray<Arg>) =>
    Effect.gen(function*() {
      const message = args[args.length - 1]
      if (args.length < 2 || message?.kind !== "string") return yield* badCommand("APPEND takes a folder and a message")
      const target = yield* store.resolve(signedIn!.mailboxId, decodeMailboxName(yield* astring(args[0])))
      if (target === undefined) return yield* tagged(tag, "NO", "[TRYCREATE] No such folder")
      const refusal = "[CANNOT] Mail is added by receiving or sending it; Sent keeps the mail sent from this mailbox already"
      if (target.kind !== "sent") return yield* tagged(tag, "NO", refusal)
      const messageId = header(parseMessage(Buffer.from(message.text, "latin1")).root, "message-id")
      const emailId = messageId === undefined ? undefined : yield* store.sentCopy(signedIn!.mailboxId, messageId)
      if (emailId === undefined) return yield* tagged(tag, "NO", `${refusal}: this message was not sent from it`)
      const sent = yield* store.sync(signedIn!.mailboxId, target)
      const uid = sent.messages.find((kept) => kept.emailId === emailId)?.uid
      yield* tagged(tag, "OK", `${uid === undefined ? "" : `[APPENDUID ${sent.uidValidity} ${uid}] `}APPEND completed: kept as sent already`)
    })

  const signIn = (tag: string, user: string, password: string): Effect.Effect<Next> =>
    Effect.gen(function*() {
      const result = yield* Effect.either(store.signIn(user, password))
      if (result._tag === "Left") {
        if (result.left.code === "AUTHENTICATIONFAILED") failedLogins++
        yield* refused(tag, result.left)
        if (failedLogins >= MAX_FAILED_LOGINS) {
          yield* untagged("BYE Too many failed sign-ins")
          return "close" as const
        }
        return "continue" as const
      }
      signedIn = { ...result.right, apiKey: password }
      yield* tagged(tag, "OK", `[CAPABILITY ${capabilities()}] Signed in as ${result.right.address}`)
      return "continue" as const
    })

  const plainResponse = (tag: string, encoded: string): Effect.Effect<Next> => {
    if (encoded === "*") return Effect.as(tagged(tag, "BAD", "Authentication cancelled"), "continue" as const)
    const parts = Buffer.from(encoded, "base64").toString("utf8").split("\u0000")
    if (parts.length !== 3) return Effect.as(tagged(tag, "BAD", "Malformed PLAIN response"), "continue" as const)
    // An authorization identity other than the user's own asks to act as another (RFC 4616 §2): no proxying here.
    if (parts[0] !== "" && parts[0]!.toLowerCase() !== parts[1]!.toLowerCase()) {
      return Effect.as(tagged(tag, "NO", "[AUTHORIZATIONFAILED] Signing in as another user is not supported"), "continue" as const)
    }
    return signIn(tag, parts[1]!, parts[2]!)
  }

  /** A line the client sent while an AUTHENTICATE or IDLE waited for it. */
  const continuation = (line: string): Effect.Effect<Next> =>
    Effect.gen(function*() {
      const pending = waiting!
      waiting = undefined
      const text = line.replace(/\r?\n$/, "")
      if (pending.kind === "authenticate") return yield* plainResponse(pending.tag, text.trim())
      if (text.toUpperCase() !== "DONE") {
        yield* tagged(pending.tag, "BAD", "Expected DONE")
        return "continue" as const
      }
      yield* tagged(pending.tag, "OK", "IDLE terminated")
      return "continue" as const
    })

  /** A command's work; the client's mistakes fail it with BadCommand, the store's refusals with ImapRefused. */
  const run = (command: Command): Effect.Effect<Next, ImapRefused | BadCommand> =>
    Effect.gen(function*() {
      const { args, name, tag } = command
      const done = (text: string) => Effect.as(tagged(tag, "OK", text), "continue" as const)
      const needs = (state: "notAuthenticated" | "authenticated" | "selected") => {
        const current = signedIn === undefined ? "notAuthenticated" : selected === undefined ? "authenticated" : "selected"
        const ok = state === "notAuthenticated"
          ? current === "notAuthenticated"
          : state === "authenticated"
          ? current !== "notAuthenticated"
          : current === "selected"
        return ok
          ? Effect.void
          : Effect.fail(badCommand(
            state === "notAuthenticated" ? "Already signed in" : state === "authenticated" ? "Sign in first" : "Select a folder first"
          ))
      }
      if (signedIn !== undefined && name !== "LOGOUT") {
        const principal = yield* store.recheck(signedIn.apiKey, signedIn.mailboxId)
        signedIn = { ...signedIn, principal }
      }
      switch (name) {
        case "CAPABILITY":
          yield* untagged(`CAPABILITY ${capabilities()}`)
          return yield* done("CAPABILITY completed")
        case "NOOP":
        case "CHECK":
          if (selected !== undefined) yield* refresh(selected)
          return yield* done(`${name} completed`)
        case "LOGOUT":
          yield* untagged("BYE Signing out")
          yield* tagged(tag, "OK", "LOGOUT completed")
          return "close"
        case "ID":
          yield* untagged(`ID ("name" "Mailroom")`)
          return yield* done("ID completed")
        case "STARTTLS":
          yield* needs("notAuthenticated")
          if (!options.canStartTls()) return yield* badCommand("STARTTLS is not available here")
          yield* tagged(tag, "OK", "Begin TLS negotiation now")
          return "startTls"
        case "LOGIN": {
          yield* needs("notAuthenticated")
          if (!options.secure() && !options.clearTextAllowed) {
            return yield* Effect.as(tagged(tag, "NO", "[PRIVACYREQUIRED] Use TLS first: this server takes API keys over TLS only"), "continue" as const)
          }
          return yield* signIn(tag, utf8(yield* astring(args[0])), utf8(yield* astring(args[1])))
        }
        case "AUTHENTICATE": {
          yield* needs("notAuthenticated")
          if ((yield* astring(args[0])).toUpperCase() !== "PLAIN") {
            return yield* Effect.as(tagged(tag, "NO", "[CANNOT] Use AUTHENTICATE PLAIN"), "continue" as const)
          }
          if (!options.secure() && !options.clearTextAllowed) {
            return yield* Effect.as(tagged(tag, "NO", "[PRIVACYREQUIRED] Use TLS first: this server takes API keys over TLS only"), "continue" as const)
          }
          if (args[1] !== undefined) {
            const initial = yield* astring(args[1])
            return yield* plainResponse(tag, initial === "=" ? "" : initial)
          }
          waiting = { tag, kind: "authenticate" }
          yield* send("+ \r\n")
          return "authenticate"
        }
        case "ENABLE":
          yield* needs("authenticated")
          yield* untagged("ENABLED")
          return yield* done("ENABLE completed")
        case "NAMESPACE":
          yield* needs("authenticated")
          yield* untagged(`NAMESPACE (("" "${HIERARCHY_DELIMITER}")) NIL NIL`)
          return yield* done("NAMESPACE completed")
        case "SELECT":
        case "EXAMINE":
          yield* needs("authenticated")
          yield* select(tag, yield* astring(args[0]), name === "EXAMINE")
          return "continue"
        case "LIST":
        case "LSUB":
          yield* needs("authenticated")
          if (args.length > 2 || args[0]?.kind === "list") return yield* badCommand("LIST takes a reference and a pattern")
          yield* list(tag, name, yield* astring(args[0]), yield* astring(args[1]))
          return "continue"
        case "STATUS":
          yield* needs("authenticated")
          yield* status(tag, yield* astring(args[0]), args[1])
          return "continue"
        case "SUBSCRIBE":
        case "UNSUBSCRIBE":
          yield* needs("authenticated")
          return yield* done(`${name} completed (every folder is listed)`)
        case "CREATE":
        case "DELETE":
        case "RENAME":
          yield* needs("authenticated")
          return yield* Effect.as(
            tagged(tag, "NO", "[CANNOT] Folders here are INBOX, Sent, Junk, Trash and the labels mail carries: label mail to make one"),
            "continue" as const
          )
        case "APPEND":
          yield* needs("authenticated")
          yield* append(tag, args)
          return "continue"
        case "IDLE":
          yield* needs("authenticated")
          waiting = { tag, kind: "idle" }
          yield* send("+ idling\r\n")
          return "idle"
        case "CLOSE":
          yield* needs("selected")
          if (!selected!.readOnly) yield* expunge("", undefined, true)
          selected = undefined
          return yield* done("CLOSE completed")
        case "UNSELECT":
          yield* needs("selected")
          selected = undefined
          return yield* done("UNSELECT completed")
        case "EXPUNGE":
          yield* needs("selected")
          yield* expunge(tag, undefined, false)
          return "continue"
        case "FETCH":
          yield* needs("selected")
          yield* fetch(tag, args, false)
          return "continue"
        case "STORE":
          yield* needs("selected")
          yield* storeFlags(tag, args, false)
          return "continue"
        case "SEARCH":
          yield* needs("selected")
          yield* search(tag, args, false)
          return "continue"
        case "COPY":
        case "MOVE":
          yield* needs("selected")
          yield* copyOrMove(tag, args, false, name === "MOVE")
          return "continue"
        case "UID": {
          yield* needs("selected")
          const sub = (yield* astring(args[0])).toUpperCase()
          const rest = args.slice(1)
          if (sub === "FETCH") yield* fetch(tag, rest, true)
          else if (sub === "STORE") yield* storeFlags(tag, rest, true)
          else if (sub === "SEARCH") yield* search(tag, rest, true)
          else if (sub === "EXPUNGE") yield* expunge(tag, yield* sequenceSet(rest[0], selected!, true), false)
          else if (sub === "COPY" || sub === "MOVE") yield* copyOrMove(tag, rest, true, sub === "MOVE")
          else return yield* badCommand(`Unknown UID command ${sub}`)
          return "continue"
        }
        default:
          return yield* badCommand(`Unknown command ${name}`)
      }
    })

  /** The key revoked or the mailbox gone since sign-in: the session ends, told why. */
  const endsSession = (refusal: ImapRefused) => refusal.code === "AUTHENTICATIONFAILED" || refusal.code === "NONEXISTENT"
  const bye = (refusal: ImapRefused) => Effect.as(untagged(`BYE ${refusal.text}`), "close" as const)

  /** Answer one command; what the connection must do next. */
  const handle = (command: Command): Effect.Effect<Next> =>
    Effect.suspend(() => {
      current = command.name === "UID" && command.args[0]?.kind === "atom" ? `UID ${command.args[0].text.toUpperCase()}` : command.name
      return run(command)
    }).pipe(
      Effect.catchTags({
        BadCommand: (bad) => Effect.as(tagged(command.tag, "BAD", bad.message), "continue" as const),
        ImapRefused: (refusal) => endsSession(refusal) ? bye(refusal) : Effect.as(refused(command.tag, refusal), "continue" as const)
      }),
      // A bug, not the client's doing: logged, and the client told the command failed.
      Effect.catchAllDefect((defect) =>
        Effect.zipRight(Effect.logError("IMAP command failed", defect), Effect.as(tagged(command.tag, "NO", "[SERVERBUG] The command failed"), "continue" as const))
      )
    )

  /**
   * While idling: the key checked as before a command (revoked, or the mailbox gone: BYE, and the
   * session ends: an idling client sends no command that would find out), then the client told what
   * changed. "close" when the session ends.
   */
  const idleTick: Effect.Effect<"continue" | "close"> = Effect.gen(function*() {
    if (signedIn === undefined) return "continue" as const
    const principal = yield* store.recheck(signedIn.apiKey, signedIn.mailboxId)
    signedIn = { ...signedIn, principal }
    if (selected !== undefined) yield* refresh(selected)
    return "continue" as const
  }).pipe(
    Effect.catchAll((refusal) => endsSession(refusal) ? bye(refusal) : Effect.succeed("continue" as const))
  )

  return {
    handle,
    continuation,
    idleTick,
    /** The account signed in to, for the server's wake-ups. */
    userId: () => Option.fromNullable(signedIn?.principal.userId),
    greeting: () => `* OK [CAPABILITY ${capabilities()}] Mailroom IMAP ready\r\n`
  } as const
}
