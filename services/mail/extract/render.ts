/**
 * An HTML body as the reader sees it, rendered to text (html-to-text): what a mail client does not
 * show is left out (head, style, script, elements hidden by an inline style such as preheaders, the
 * `hidden` attribute). Table cells and rows are blocks, so a label cell and the code cell beside it
 * never run together; link targets and images are left out of the text (links are read from the
 * parsed document, links.ts). html-to-text walks the document recursively: markup nested deeper
 * than any real template is read the crude way instead, so hostile markup costs bounded time and
 * never exhausts the stack.
 */
import { type ChildNode, type Document, hasChildren } from "domhandler"
import { compile } from "html-to-text"
import { parseDocument } from "htmlparser2"
import { once } from "../../once.ts"

const block = (selector: string) => ({ selector, format: "block" as const })
const skip = (selector: string) => ({ selector, format: "skip" as const })

/** Markup nested deeper than this is read by taking its tags out (stripTags), not rendered. */
const MAX_DEPTH = 200

/*
 * The renderers are compiled on first use: compiling one parses every selector it knows (~0.2 s of
 * CPU in a starting process, the largest single cost of loading the services), which a process that
 * renders no html (an operator's command, an API node, a suite that sends none) never needs.
 */

/** How an HTML body becomes the text codes and replies are read from. */
const renderVisible = once(() =>
  compile({
    wordwrap: false,
    limits: { maxDepth: MAX_DEPTH },
    selectors: [
      { selector: "a", options: { ignoreHref: true } },
      skip("img"),
      // A rule of dashes: Outlook's line above a quoted reply, which the reply parser would keep as text.
      skip("hr"),
      skip("[hidden]"),
      skip("[style*='display:none' i]"),
      skip("[style*='display: none' i]"),
      skip("[style*='visibility:hidden' i]"),
      skip("[style*='visibility: hidden' i]"),
      skip("[style*='mso-hide:all' i]"),
      block("table"),
      block("tr"),
      block("td"),
      block("th")
    ]
  })
)

/** The html-to-text rendering mailparser uses when a message has no text part (its defaults). */
const renderLikeMailparser = once(() => compile({}))

/**
 * The text of markup html-to-text cannot walk (its walk is recursive: nesting thousands deep
 * exhausts the stack): the tags taken out, each a line break.
 */
const stripTags = (html: string) =>
  html.replace(/<(style|script|head)\b[\s\S]*?<\/\1\s*>/gi, "").replace(/<[^>]*>/g, "\n").replace(/\n{3,}/g, "\n\n")

/** How deeply the document's elements nest (walked without recursion). */
const depthOf = (document: Document) => {
  let deepest = 0
  const stack: Array<[ChildNode, number]> = document.children.map((child) => [child, 1])
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!
    if (depth > deepest) deepest = depth
    if (hasChildren(node)) for (const child of node.children) stack.push([child, depth + 1])
  }
  return deepest
}

export interface HtmlBody {
  readonly document: Document
  /** The visible text. */
  readonly text: string
  /** Whether html-to-text could read it (mailparser could then too). */
  readonly rendered: boolean
}

/** Parse and render `html`; never fails (htmlparser2 reads any input). */
export const readHtml = (html: string): HtmlBody => {
  const document = parseDocument(html, { decodeEntities: true })
  if (depthOf(document) <= MAX_DEPTH) {
    try {
      return { document, text: renderVisible()(html), rendered: true }
    } catch {
      // Read below as markup html-to-text cannot walk.
    }
  }
  return { document, text: stripTags(html), rendered: false }
}

/**
 * The text mailparser derives from `html` for a message without a text part, for the messages it
 * derives none for (an HTML body beside attachments, in multipart/mixed); markup too deep to render
 * has its tags taken out instead.
 */
export const textOfHtml = (html: string): string => {
  if (depthOf(parseDocument(html)) <= MAX_DEPTH) {
    try {
      return renderLikeMailparser()(html)
    } catch {
      // Read below as markup html-to-text cannot walk.
    }
  }
  return stripTags(html)
}

/** Whether `text` is what mailparser derived from `html` (a message without a text part). */
export const isDerivedText = (text: string, html: string) => {
  try {
    return text === renderLikeMailparser()(html)
  } catch {
    // Neither could mailparser render it: its text body says "Invalid HTML content".
    return true
  }
}
