/**
 * The new text of a message: what its sender wrote for it, without the quoted history and the
 * signature. Crisp's parsers do the reading (email-reply-parser: quote headers of Gmail, Outlook,
 * Apple Mail and a dozen languages, `>` quotes, signatures and mobile sign-offs; email-forward-parser:
 * forwarded messages of the common clients, whose note above the forwarded mail is the new text).
 *
 * One rule of ours on top: an attribution line the parser does not know ("2026年11月23日(月) 10:14
 * Bob <bob@example.com>:"), left as the last line right above the quoted history it introduces, is
 * dropped. It is recognised by its form, not its language: it ends with the quoted author's address
 * and a colon.
 */
import EmailForwardParser from "email-forward-parser"
import EmailReplyParser from "email-reply-parser"

/** Replies are short; reading more only costs time. */
const MAX_INPUT = 64 * 1024
/**
 * The parsers' patterns take time growing with the square of a line's length (a 32 KB line takes
 * a second): longer lines are broken at a space first. Prose lines are far shorter.
 */
const MAX_LINE = 1000

const breakLongLines = (text: string) =>
  text
    .split("\n")
    .map((line) => {
      if (line.length <= MAX_LINE) return line
      const pieces: Array<string> = []
      let rest = line
      while (rest.length > MAX_LINE) {
        const space = rest.lastIndexOf(" ", MAX_LINE)
        const cut = space > 0 ? space : MAX_LINE
        pieces.push(rest.slice(0, cut))
        rest = rest.slice(cut).trimStart()
      }
      return [...pieces, rest].join("\n")
    })
    .join("\n")

const replies = new EmailReplyParser()
const forwards = new EmailForwardParser()

const ATTRIBUTION = /<[^<>\s]+@[^<>\s]+>\)?\s*[:：]\s*$/

const withoutAttribution = (visible: string) => {
  const lines = visible.trimEnd().split("\n")
  return ATTRIBUTION.test(lines[lines.length - 1] ?? "") ? lines.slice(0, -1).join("\n") : visible
}

export const extractReplyText = (text: string, subject: string): string | null => {
  const input = breakLongLines(text.slice(0, MAX_INPUT).replace(/\r\n/g, "\n"))
  if (input.trim() === "") return null
  const forwarded = forwards.read(input, subject)
  const own = forwarded.forwarded ? (forwarded.message ?? "") : input
  const email = replies.read(own)
  const visible = email.getVisibleText()
  const quoted = email.getQuotedText().trim() !== ""
  const reply = (quoted ? withoutAttribution(visible) : visible).trim()
  return reply === "" ? null : reply
}
