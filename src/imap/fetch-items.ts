/**
 * FETCH's items (RFC 3501 §6.4.5) as a client names them: the macros, the message's attributes, and
 * BODY[section]<partial> with its part number, text part and header field names.
 */
import type { SectionText } from "../../services/imap/mime.ts"
import type { Either } from "effect"
import { badCommand, type BadCommand, reading } from "./protocol.ts"

export type FetchItem =
  | { readonly kind: "uid" | "flags" | "internaldate" | "size" | "envelope" | "bodystructure" | "body" }
  | {
    readonly kind: "section"
    /** The name the answer carries: BODY[…]<origin>, RFC822, RFC822.HEADER, RFC822.TEXT. */
    readonly label: string
    readonly path: ReadonlyArray<number>
    readonly text: SectionText
    readonly peek: boolean
    readonly partial: readonly [number, number] | undefined
  }

const sectionPattern = /^(BODY\.PEEK|BODY)\[([^\]]*)\](?:<(\d+)(?:\.(\d+))?>)?$/i

/**
 * A section spec with its literals read: a field name of HEADER.FIELDS is an astring, so a client may
 * send it as `{7}` CRLF `Subject` (or `{7+}`), which the command's reader keeps in the spec's text.
 */
const withLiteralsRead = (spec: string): string => {
  let read = ""
  let rest = spec
  for (let literal = /\{(\d+)\+?\}\r\n/.exec(rest); literal !== null; literal = /\{(\d+)\+?\}\r\n/.exec(rest)) {
    const start = literal.index + literal[0].length
    read += `${rest.slice(0, literal.index)}"${rest.slice(start, start + Number(literal[1]))}"`
    rest = rest.slice(start + Number(literal[1]))
  }
  return read + rest
}

const parseSection = (raw: string): { path: Array<number>; text: SectionText } => {
  const spec = withLiteralsRead(raw)
  const match = /^((?:\d+\.)*\d+)?(?:^|\.)?(HEADER\.FIELDS\.NOT|HEADER\.FIELDS|HEADER|TEXT|MIME)?\s*(?:\((.*)\))?$/i.exec(spec.trim())
  if (!match) throw badCommand(`Unknown section ${spec}`)
  const path = match[1] === undefined ? [] : match[1].split(".").map(Number)
  if (path.some((n) => n === 0)) throw badCommand("Part numbers start at 1")
  const name = match[2]?.toUpperCase()
  if (name === undefined) {
    if (match[3] !== undefined) throw badCommand(`Unknown section ${spec}`)
    return { path, text: { kind: "all" } }
  }
  if (name === "MIME" && path.length === 0) throw badCommand("MIME needs a part number")
  if (name === "HEADER.FIELDS" || name === "HEADER.FIELDS.NOT") {
    const names = (match[3] ?? "").split(/\s+/).map((field) => field.replace(/^"|"$/g, "")).filter((field) => field.length > 0)
    if (names.length === 0) throw badCommand("HEADER.FIELDS needs field names")
    return { path, text: { kind: "fields", names, not: name === "HEADER.FIELDS.NOT" } }
  }
  if (match[3] !== undefined) throw badCommand(`Unknown section ${spec}`)
  return { path, text: { kind: name === "HEADER" ? "header" : name === "TEXT" ? "text" : "mime" } }
}

/** A FETCH item as the client named it, or its mistake. */
export const parseFetchItem = (text: string): Either.Either<Array<FetchItem>, BadCommand> => reading(() => fetchItem(text))

const fetchItem = (text: string): Array<FetchItem> => {
  const upper = text.toUpperCase()
  switch (upper) {
    case "ALL":
      return [{ kind: "flags" }, { kind: "internaldate" }, { kind: "size" }, { kind: "envelope" }]
    case "FAST":
      return [{ kind: "flags" }, { kind: "internaldate" }, { kind: "size" }]
    case "FULL":
      return [{ kind: "flags" }, { kind: "internaldate" }, { kind: "size" }, { kind: "envelope" }, { kind: "body" }]
    case "UID":
      return [{ kind: "uid" }]
    case "FLAGS":
      return [{ kind: "flags" }]
    case "INTERNALDATE":
      return [{ kind: "internaldate" }]
    case "RFC822.SIZE":
      return [{ kind: "size" }]
    case "ENVELOPE":
      return [{ kind: "envelope" }]
    case "BODYSTRUCTURE":
      return [{ kind: "bodystructure" }]
    case "BODY":
      return [{ kind: "body" }]
    case "RFC822":
      return [{ kind: "section", label: "RFC822", path: [], text: { kind: "all" }, peek: false, partial: undefined }]
    case "RFC822.HEADER":
      return [{ kind: "section", label: "RFC822.HEADER", path: [], text: { kind: "header" }, peek: true, partial: undefined }]
    case "RFC822.TEXT":
      return [{ kind: "section", label: "RFC822.TEXT", path: [], text: { kind: "text" }, peek: false, partial: undefined }]
  }
  const match = sectionPattern.exec(text)
  if (!match) throw badCommand(`Unknown FETCH item ${text}`)
  const { path, text: section } = parseSection(match[2]!)
  const origin = match[3] === undefined ? undefined : Number(match[3])
  const partial = origin === undefined ? undefined : [origin, match[4] === undefined ? Infinity : Number(match[4])] as const
  return [{
    kind: "section",
    label: `BODY[${match[2]}]${origin === undefined ? "" : `<${origin}>`}`,
    path,
    text: section,
    peek: match[1]!.toUpperCase() === "BODY.PEEK",
    partial
  }]
}
