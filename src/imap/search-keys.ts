/**
 * SEARCH's keys (RFC 3501 §6.4.4) read into the store's SearchKey: flags kept as labels are asked of the
 * store; the flags no label holds (\Answered, \Deleted, \Draft, keywords), sequence numbers and `*` are resolved
 * here against the session's view (the flags as the session was last told them), so the store sees UIDs only.
 */
import type { SearchKey } from "../../services/imap/views.ts"
import type { Either } from "effect"
import { type Arg, astring as readString, badCommand, type BadCommand, parseSearchDate, reading, utf8, valueOf } from "./protocol.ts"

/** What the session's view of its folder answers while its keys are read. */
export interface SearchContext {
  /** The UIDs of the messages carrying a flag no label holds (\Answered, \Deleted, \Draft, a keyword), as the session knows them. */
  readonly withFlag: (flag: string) => ReadonlyArray<number>
  /** The UIDs a sequence-number set names, or the client's mistake. */
  readonly bySequence: (arg: Arg) => Either.Either<ReadonlyArray<number>, BadCommand>
  /** A UID set's ranges, `*` resolved, or the client's mistake. */
  readonly uidRanges: (arg: Arg | undefined) => Either.Either<ReadonlyArray<readonly [number, number]>, BadCommand>
}

/** How deep keys may nest (parentheses, NOT, OR): more than any mail program writes, far less than would exhaust the stack. */
const MAX_NESTING = 100

/**
 * The SEARCH keys of `args`, as one key (a parenthesised list is one key too); sequence numbers turned
 * into UIDs. Or the client's mistake.
 */
export const readSearchKeys = (args: ReadonlyArray<Arg>, context: SearchContext): Either.Either<SearchKey, BadCommand> =>
  reading(() => keysOf(args, context, 0))

/** An argument that must be a string, inside the reader. */
const astring = (arg: Arg | undefined) => valueOf(readString(arg))

/** `depth`: how deeply these keys are nested already. */
const keysOf = (args: ReadonlyArray<Arg>, context: SearchContext, depth: number): SearchKey => {
  if (depth > MAX_NESTING) throw badCommand(`Search keys nested more than ${MAX_NESTING} deep`)
  let at = 0
  const text = () => utf8(astring(args[at++]))
  const date = () => {
    const raw = astring(args[at++])
    const day = parseSearchDate(raw)
    if (day === undefined) throw badCommand(`Not a date: ${raw}`)
    return day
  }
  const number = () => {
    const raw = astring(args[at++])
    if (!/^\d+$/.test(raw)) throw badCommand(`Not a number: ${raw}`)
    return Number(raw)
  }
  const withKeptFlag = (flag: string, set: boolean): SearchKey => {
    const key: SearchKey = { kind: "uids", ranges: context.withFlag(flag).map((uid) => [uid, uid] as const) }
    return set ? key : { kind: "not", key }
  }
  /** The key NOT or OR apply to, one level deeper. */
  let level = depth
  const nested = (): SearchKey => {
    if (++level > MAX_NESTING) throw badCommand(`Search keys nested more than ${MAX_NESTING} deep`)
    try {
      return one()
    } finally {
      level--
    }
  }
  const one = (): SearchKey => {
    const arg = args[at++]
    if (arg === undefined) throw badCommand("Missing search key")
    if (arg.kind === "list") return keysOf(arg.items, context, level + 1)
    const name = astring(arg).toUpperCase()
    switch (name) {
      case "ALL":
      case "OLD":
        return { kind: "all" }
      case "NEW":
      case "RECENT":
        return { kind: "none" }
      case "KEYWORD":
      case "UNKEYWORD":
        return withKeptFlag(astring(args[at++]), name === "KEYWORD")
      case "SEEN":
      case "UNSEEN":
        return { kind: "flag", flag: "seen", set: name === "SEEN" }
      case "FLAGGED":
      case "UNFLAGGED":
        return { kind: "flag", flag: "flagged", set: name === "FLAGGED" }
      case "ANSWERED":
      case "UNANSWERED":
        return withKeptFlag("\\Answered", name === "ANSWERED")
      case "DELETED":
      case "UNDELETED":
        return withKeptFlag("\\Deleted", name === "DELETED")
      case "DRAFT":
      case "UNDRAFT":
        return withKeptFlag("\\Draft", name === "DRAFT")
      case "FROM":
      case "TO":
      case "CC":
      case "BCC":
      case "SUBJECT":
      case "BODY":
      case "TEXT":
        return { kind: "text", field: name.toLowerCase() as "from", value: text() }
      case "HEADER": {
        const header = astring(args[at++])
        return { kind: "header", name: header, value: text() }
      }
      case "BEFORE":
      case "ON":
      case "SINCE":
        return { kind: "date", field: "internal", op: name.toLowerCase() as "on", day: date() }
      case "SENTBEFORE":
      case "SENTON":
      case "SENTSINCE":
        return { kind: "date", field: "sent", op: name.slice(4).toLowerCase() as "on", day: date() }
      case "LARGER":
      case "SMALLER":
        return { kind: "size", op: name.toLowerCase() as "larger", bytes: number() }
      case "NOT":
        return { kind: "not", key: nested() }
      case "OR": {
        const left = nested()
        return { kind: "or", left, right: nested() }
      }
      case "UID":
        return { kind: "uids", ranges: valueOf(context.uidRanges(args[at++])) }
      default:
        return { kind: "uids", ranges: valueOf(context.bySequence(arg)).map((uid) => [uid, uid] as const) }
    }
  }
  const keys: Array<SearchKey> = []
  while (at < args.length) keys.push(one())
  return keys.length === 1 ? keys[0]! : { kind: "and", keys }
}
