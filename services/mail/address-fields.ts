/**
 * Address fields (From, To, Cc, Reply-To, Sender, …) read as RFC 5322 writes them, by nodemailer's
 * addressparser told where quoted text sits inside angle brackets.
 *
 * Its tokenizer ends an angle-addr at the first `>`, quoted or not: `<"<ceo@bank.example>"@evil.example>`
 * (one address at evil.example, its local part quoted) was read as ceo@bank.example, so the From a
 * reader was shown, the sender a block list matched and the From a submitted message was checked by
 * were all someone else's (and it drops an angle-addr's text up to a `<` in it, quoted or not). Here
 * the `<` and `>` quoted inside `<…>` are hidden from it under characters the value does not hold,
 * and put back in what it answers.
 */
import addressparser from "nodemailer/lib/addressparser"

export type AddressEntry = addressparser.AddressOrGroup

/** Is `entry` a group (`name: a, b;`) rather than one address? */
export const isGroup = (entry: AddressEntry): entry is addressparser.Group => "group" in entry && Array.isArray(entry.group)

/** The positions of the `<` and `>` characters `value` quotes inside angle brackets (none in most fields). */
const quotedBrackets = (value: string): Array<number> => {
  const positions: Array<number> = []
  let angle = false
  let quoted = false
  let comment = 0
  for (let i = 0; i < value.length; i++) {
    const chr = value[i]
    if (quoted) {
      // As the tokenizer reads a quoted string: a backslash takes the next character as it is.
      if (chr === "\\") i++
      else if (chr === "\"") quoted = false
      else if ((chr === "<" || chr === ">") && angle) positions.push(i)
    } else if (comment > 0) {
      if (chr === "(") comment++
      else if (chr === ")") comment--
    } else if (chr === "\"") quoted = true
    else if (chr === "(") comment = 1
    else if (chr === "<") angle = true
    else if (chr === ">") angle = false
  }
  return positions
}

/**
 * Two characters of the private use area `value` does not hold (to stand for `<` and `>`), if there
 * are: found in one pass over the value, however many of them it holds.
 */
const unusedPair = (value: string): readonly [string, string] | undefined => {
  const held = new Set<number>()
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i)
    if (code >= 0xe000 && code <= 0xf8ff) held.add(code)
  }
  const unused: Array<string> = []
  for (let code = 0xe000; code <= 0xf8ff && unused.length < 2; code++) {
    if (!held.has(code)) unused.push(String.fromCharCode(code))
  }
  return unused.length === 2 ? [unused[0]!, unused[1]!] : undefined
}

const restored = (entries: ReadonlyArray<AddressEntry>, [opener, closer]: readonly [string, string]): Array<AddressEntry> => {
  const text = (hidden: string) => hidden.replaceAll(opener, "<").replaceAll(closer, ">")
  return entries.map((entry) =>
    isGroup(entry)
      ? { name: text(entry.name), group: restored(entry.group, [opener, closer]) as Array<addressparser.Address> }
      : { name: text(entry.name), address: text(entry.address) }
  )
}

/** The addresses and groups of an address field's value (unfolded; encoded words left as written). */
export const parseAddressField = (value: string): Array<AddressEntry> => {
  const brackets = quotedBrackets(value)
  if (brackets.length === 0) return addressparser(value)
  const hidden = unusedPair(value)
  // A value holding all 6,400 private use characters is no address field anyone wrote: read as it is.
  if (hidden === undefined) return addressparser(value)
  let masked = ""
  let from = 0
  for (const at of brackets) {
    masked += value.slice(from, at) + (value[at] === "<" ? hidden[0] : hidden[1])
    from = at + 1
  }
  return restored(addressparser(masked + value.slice(from)), hidden)
}

const flattened = (entries: ReadonlyArray<AddressEntry>): Array<addressparser.Address> =>
  entries.flatMap((entry) => (isGroup(entry) ? flattened(entry.group) : [entry]))

/** The addresses of an address field's value, groups flattened, in order. */
export const flatAddresses = (value: string): Array<addressparser.Address> => flattened(parseAddressField(value))
