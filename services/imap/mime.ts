/**
 * A stored message as IMAP reads it (RFC 3501 §6.4.5, §7.4.2): its MIME tree, found by scanning the raw
 * bytes once, so that BODYSTRUCTURE, ENVELOPE and every BODY[section] are cut from the message exactly
 * as it was received (never re-encoded: a signature over it stays valid).
 *
 * Strings here are byte strings (latin1: one character per byte), as the message's headers are bytes
 * in whatever charset the sender used; the IMAP writer puts them back on the wire byte for byte.
 *
 * Part numbers follow RFC 3501: a multipart's children are 1, 2, …; a message that is not multipart
 * has one part, 1 (its body); the parts of a message/rfc822 part N are N.1, N.2, ….
 */
import { isGroup, parseAddressField } from "../mail/address-fields.ts"

export interface HeaderField {
  /** Lower-case field name. */
  readonly name: string
  /** The whole field as written, folding and the line end included. */
  readonly raw: string
  /** The value unfolded, without the name and the line end. */
  readonly value: string
}

export interface MimeNode {
  /** Where the node's header starts, where its body starts (after the empty line) and ends, in bytes. */
  readonly start: number
  readonly bodyStart: number
  readonly end: number
  readonly headers: ReadonlyArray<HeaderField>
  readonly type: string
  readonly subtype: string
  readonly params: ReadonlyArray<readonly [string, string]>
  /** A multipart's parts. */
  readonly children: ReadonlyArray<MimeNode>
  /** A message/rfc822 part's message. */
  readonly message: MimeNode | undefined
}

/** At most this deep a tree is followed; deeper parts are read as opaque bodies (a hostile nesting costs nothing). */
const MAX_DEPTH = 32

/** The header fields between `start` and `end` of `text`. */
const headerFields = (text: string, start: number, end: number): Array<HeaderField> => {
  const fields: Array<HeaderField> = []
  const lines = text.slice(start, end).split(/(?<=\n)/)
  for (const line of lines) {
    if (/^[ \t]/.test(line) && fields.length > 0) {
      const last = fields[fields.length - 1]!
      fields[fields.length - 1] = { ...last, raw: last.raw + line, value: last.value + " " + line.trim() }
      continue
    }
    const colon = line.indexOf(":")
    if (colon <= 0) continue
    fields.push({ name: line.slice(0, colon).trim().toLowerCase(), raw: line, value: line.slice(colon + 1).trim() })
  }
  return fields
}

/** A structured header's value (`type/subtype; a=b; c="d"`): the value and its parameters, in order. */
export const parseParameters = (value: string): { readonly value: string; readonly params: Array<readonly [string, string]> } => {
  const params: Array<readonly [string, string]> = []
  let i = value.indexOf(";")
  const head = (i < 0 ? value : value.slice(0, i)).trim()
  while (i >= 0 && i < value.length) {
    i++
    const eq = value.indexOf("=", i)
    if (eq < 0) break
    const name = value.slice(i, eq).trim().toLowerCase()
    let j = eq + 1
    while (value[j] === " " || value[j] === "\t") j++
    let param = ""
    if (value[j] === "\"") {
      j++
      while (j < value.length && value[j] !== "\"") {
        if (value[j] === "\\" && j + 1 < value.length) j++
        param += value[j]
        j++
      }
      i = value.indexOf(";", j)
    } else {
      const next = value.indexOf(";", j)
      param = (next < 0 ? value.slice(j) : value.slice(j, next)).trim()
      i = next
    }
    if (name.length > 0) params.push([name, param])
  }
  return { value: head, params }
}

/** Where the header of the entity at `start` ends and its body begins (after the first empty line). */
const splitHeader = (text: string, start: number, end: number): { readonly headerEnd: number; readonly bodyStart: number } => {
  if (text.startsWith("\r\n", start)) return { headerEnd: start, bodyStart: start + 2 }
  if (text[start] === "\n") return { headerEnd: start, bodyStart: start + 1 }
  const crlf = text.indexOf("\r\n\r\n", start)
  const lf = text.indexOf("\n\n", start)
  const candidates = [crlf < 0 ? Infinity : crlf + 4, lf < 0 ? Infinity : lf + 2].filter((at) => at <= end)
  const bodyStart = Math.min(...candidates)
  // No empty line: all header, no body.
  return bodyStart === Infinity ? { headerEnd: end, bodyStart: end } : { headerEnd: bodyStart, bodyStart }
}

/** The byte ranges of a multipart body's parts, between its boundary lines. */
const multipartRanges = (text: string, start: number, end: number, boundary: string): Array<readonly [number, number]> => {
  const delimiter = "--" + boundary
  const ranges: Array<readonly [number, number]> = []
  let partStart: number | undefined
  let at = start
  while (at < end) {
    const lineEnd = text.indexOf("\n", at)
    const next = lineEnd < 0 || lineEnd >= end ? end : lineEnd + 1
    if (text.startsWith(delimiter, at)) {
      const rest = text.slice(at + delimiter.length, next).trimEnd()
      const closing = rest.startsWith("--")
      if (rest === "" || closing) {
        // The line end before a boundary belongs to the boundary (RFC 2046 §5.1.1).
        if (partStart !== undefined) {
          const before = text[at - 2] === "\r" && text[at - 1] === "\n" ? at - 2 : text[at - 1] === "\n" ? at - 1 : at
          ranges.push([partStart, Math.max(partStart, before)])
        }
        if (closing) return ranges
        partStart = next
      }
    }
    at = next
  }
  if (partStart !== undefined) ranges.push([partStart, end])
  return ranges
}

const parseNode = (text: string, start: number, end: number, depth: number, defaultType: readonly [string, string]): MimeNode => {
  const { bodyStart, headerEnd } = splitHeader(text, start, end)
  const headers = headerFields(text, start, headerEnd)
  const contentType = headers.find((field) => field.name === "content-type")
  const parsed = contentType === undefined ? undefined : parseParameters(contentType.value)
  const [type, subtype] = parsed !== undefined && /^[^/\s]+\/[^/\s]+$/.test(parsed.value)
    ? parsed.value.toLowerCase().split("/") as [string, string]
    : defaultType
  const params = parsed?.params ?? (type === "text" ? [["charset", "us-ascii"] as const] : [])
  const boundary = params.find(([name]) => name === "boundary")?.[1]
  const node = { start, bodyStart, end, headers, type, subtype, params, children: [] as Array<MimeNode>, message: undefined as MimeNode | undefined }
  if (depth >= MAX_DEPTH) return node
  if (type === "multipart" && boundary !== undefined && boundary.length > 0) {
    const childType = subtype === "digest" ? ["message", "rfc822"] as const : ["text", "plain"] as const
    node.children = multipartRanges(text, bodyStart, end, boundary).map(([from, to]) => parseNode(text, from, to, depth + 1, childType))
  } else if (type === "message" && (subtype === "rfc822" || subtype === "global")) {
    node.message = parseNode(text, bodyStart, end, depth + 1, ["text", "plain"])
  }
  return node
}

/** The message's MIME tree. */
export const parseMessage = (raw: Uint8Array): { readonly text: string; readonly root: MimeNode } => {
  const text = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString("latin1")
  return { text, root: parseNode(text, 0, text.length, 0, ["text", "plain"]) }
}

/** The first value of a header field, or undefined. */
export const header = (node: MimeNode, name: string): string | undefined => node.headers.find((field) => field.name === name)?.value

/**
 * The node a part number names (`[]`: the message itself), or undefined when the message has no such
 * part. A part number inside a message/rfc822 part goes on in its message.
 */
export const resolvePart = (root: MimeNode, path: ReadonlyArray<number>): MimeNode | undefined => {
  let node: MimeNode = root
  for (const n of path) {
    const container = node.message ?? node
    if (container.children.length > 0) {
      const child = container.children[n - 1]
      if (child === undefined) return undefined
      node = child
    } else if (n === 1 && (node === root || node.message !== undefined)) {
      node = container
    } else {
      return undefined
    }
  }
  return node
}

/** An IMAP value as the writer takes it: NIL, a string, a number or a parenthesised list. */
export type ImapValue = null | string | number | ImapList
export interface ImapList extends ReadonlyArray<ImapValue> {}

const nilIfEmpty = (value: string | undefined): string | null => (value === undefined || value.length === 0 ? null : value)

/** An address header's addresses as ENVELOPE lists them: (name adl mailbox host), groups around theirs. */
const envelopeAddresses = (value: string | undefined): ImapValue => {
  if (value === undefined || value.trim().length === 0) return null
  const entries = parseAddressField(value)
  const addresses: Array<ImapValue> = []
  const one = (entry: { readonly name?: string | undefined; readonly address?: string | undefined }) => {
    const address = entry.address ?? ""
    const at = address.lastIndexOf("@")
    addresses.push([nilIfEmpty(entry.name), null, at < 0 ? address : address.slice(0, at), at < 0 ? null : address.slice(at + 1)])
  }
  for (const entry of entries) {
    if (isGroup(entry)) {
      addresses.push([null, null, entry.name, null])
      for (const member of entry.group) one(member)
      addresses.push([null, null, null, null])
    } else {
      one(entry)
    }
  }
  return addresses.length === 0 ? null : addresses
}

/** ENVELOPE (RFC 3501 §7.4.2): date, subject, from, sender, reply-to, to, cc, bcc, in-reply-to, message-id. */
export const envelope = (node: MimeNode): ImapList => {
  const from = envelopeAddresses(header(node, "from"))
  return [
    nilIfEmpty(header(node, "date")),
    nilIfEmpty(header(node, "subject")),
    from,
    envelopeAddresses(header(node, "sender")) ?? from,
    envelopeAddresses(header(node, "reply-to")) ?? from,
    envelopeAddresses(header(node, "to")),
    envelopeAddresses(header(node, "cc")),
    envelopeAddresses(header(node, "bcc")),
    nilIfEmpty(header(node, "in-reply-to")),
    nilIfEmpty(header(node, "message-id"))
  ]
}

const paramList = (params: ReadonlyArray<readonly [string, string]>): ImapValue =>
  params.length === 0 ? null : params.flatMap(([name, value]) => [name, value])

/** Lines of a body, as IMAP counts them for text parts. */
const lineCount = (text: string, start: number, end: number): number => {
  let lines = 0
  for (let i = start; i < end; i++) if (text.charCodeAt(i) === 10) lines++
  return end > start && text.charCodeAt(end - 1) !== 10 ? lines + 1 : lines
}

const disposition = (node: MimeNode): ImapValue => {
  const value = header(node, "content-disposition")
  if (value === undefined) return null
  const parsed = parseParameters(value)
  return parsed.value.length === 0 ? null : [parsed.value.toLowerCase(), paramList(parsed.params)]
}

/**
 * BODYSTRUCTURE (with `extended`) or BODY of a node: for a leaf its type, parameters, id, description,
 * encoding and size (and lines for text, the envelope and structure of a message/rfc822's message);
 * for a multipart its parts and subtype.
 */
export const bodyStructure = (text: string, node: MimeNode, extended: boolean): ImapList => {
  const language = nilIfEmpty(header(node, "content-language"))
  const location = nilIfEmpty(header(node, "content-location"))
  if (node.children.length > 0) {
    const parts: Array<ImapValue> = node.children.map((child) => bodyStructure(text, child, extended))
    return extended
      ? [...parts, node.subtype, paramList(node.params), disposition(node), language, location]
      : [...parts, node.subtype]
  }
  const size = node.end - node.bodyStart
  const fields: Array<ImapValue> = [
    node.type,
    node.subtype,
    paramList(node.params),
    nilIfEmpty(header(node, "content-id")),
    nilIfEmpty(header(node, "content-description")),
    (header(node, "content-transfer-encoding") ?? "7bit").toLowerCase(),
    size
  ]
  if (node.message !== undefined) {
    fields.push(envelope(node.message), bodyStructure(text, node.message, extended), lineCount(text, node.bodyStart, node.end))
  } else if (node.type === "text") {
    fields.push(lineCount(text, node.bodyStart, node.end))
  }
  return extended ? [...fields, nilIfEmpty(header(node, "content-md5")), disposition(node), language, location] : fields
}

/** A section's text part (RFC 3501 §6.4.5): what comes after the part number. */
export type SectionText =
  | { readonly kind: "all" }
  | { readonly kind: "header" }
  | { readonly kind: "text" }
  | { readonly kind: "mime" }
  | { readonly kind: "fields"; readonly names: ReadonlyArray<string>; readonly not: boolean }

/**
 * The bytes of BODY[path.text] as a byte string, or undefined for a part the message does not have
 * (IMAP answers it as empty). HEADER, TEXT and the fields of a message/rfc822 part are its message's.
 */
export const sectionBytes = (text: string, root: MimeNode, path: ReadonlyArray<number>, section: SectionText): string | undefined => {
  const node = resolvePart(root, path)
  if (node === undefined) return undefined
  const message = path.length === 0 ? root : node.message
  switch (section.kind) {
    case "all":
      return path.length === 0 ? text : text.slice(node.bodyStart, node.end)
    case "mime":
      return path.length === 0 ? undefined : text.slice(node.start, node.bodyStart)
    case "header":
      return message === undefined ? undefined : text.slice(message.start, message.bodyStart)
    case "text":
      return message === undefined ? undefined : text.slice(message.bodyStart, message.end)
    case "fields": {
      if (message === undefined) return undefined
      const names = new Set(section.names.map((name) => name.toLowerCase()))
      const kept = message.headers.filter((field) => names.has(field.name) !== section.not)
      return kept.map((field) => (field.raw.endsWith("\n") ? field.raw : field.raw + "\r\n")).join("") + "\r\n"
    }
  }
}
