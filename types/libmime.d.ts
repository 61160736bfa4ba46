// libmime (a dependency of mailparser) ships no types; only what Mailroom uses is declared.
declare module "libmime" {
  const libmime: {
    /** Decode RFC 2047 encoded-words in a header value. */
    decodeWords(value: string): string
    /** Unfold one header line and split it into a lower-cased key and its value. */
    decodeHeader(line: string): { key: string; value: string }
  }
  export default libmime
}
