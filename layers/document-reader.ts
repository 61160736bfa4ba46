/**
 * The DocumentReader port over Mozilla's pdf.js (PDF) and mammoth (Word .docx), in a child process of
 * its own (document-reader-process.mjs): reading a PDF costs tens of milliseconds of CPU a page,
 * which on the event loop would be time the process (in one process, every role) could answer no one.
 *
 * A stranger's document may be built to cost without bound (a PDF's streams, a .docx's ZIP), so each is read within READ_DEADLINE and the
 * reader's heap is held to MAX_HEAP_MB: a document that needs more fails `too_complex`, the reader
 * is ended, and the next document gets a new one. A process and not a worker thread, because a
 * thread's memory limit does not hold for every allocation: one large array past it ends the whole
 * server (seen in this layer's suite), where it ends only a child. The reader runs behind the
 * server's work (nice 10, a session of its own: background-priority.mjs), as the local embedder does.
 *
 * Documents are read one at a time (on two cores a second reader would take the core the rest of the
 * process needs); the reader starts on the first (~0.8 s cold: node and pdf.js loading) and is kept while the server runs, keeping
 * it alive only while it reads, and exits when the server does.
 */
import { Duration, Effect, Layer, Runtime } from "effect"
import { type ChildProcess, fork } from "node:child_process"
import { createRequire } from "node:module"
import { fileURLToPath } from "node:url"
import {
  capText,
  DocumentReader,
  type DocumentFormat,
  type DocumentText,
  DocumentUnreadable,
  MAX_PDF_PAGES,
  MAX_TEXT_CHARS
} from "../services/mail/attachment-text.ts"

/** How long reading one document may take. */
export const READ_DEADLINE = Duration.seconds(20)
/** The reader's heap: a document that needs more is `too_complex`. */
const MAX_HEAP_MB = 256
/** The reader's nice value: behind accepting mail and answering requests. */
const NICE = 10

const processUrl = new URL("./document-reader-process.mjs", import.meta.url)

type Reply =
  | { readonly id: number; readonly text: string; readonly pages: number | null; readonly truncated: boolean }
  | { readonly id: number; readonly reason: "encrypted" | "damaged"; readonly message: string }
  | { readonly id: -1; readonly niced: boolean }

/** A package's version, read from its package.json (the reader's packages are read from node_modules, not bundled). */
const versionOf = (name: string): string => {
  try {
    return (createRequire(import.meta.url)(`${name}/package.json`) as { readonly version: string }).version
  } catch {
    return "unknown"
  }
}

/** `script` is the reader's code; `deadline` how long a document may take (others only in tests). */
export const layerWith = (options: { readonly script?: URL; readonly deadline?: Duration.DurationInput } = {}): Layer.Layer<DocumentReader> =>
  Layer.scoped(DocumentReader, Effect.gen(function*() {
    const script = fileURLToPath(options.script ?? processUrl)
    const deadline = options.deadline ?? READ_DEADLINE
    const oneAtATime = yield* Effect.makeSemaphore(1)
    const log = Runtime.runFork(yield* Effect.runtime<never>())
    let reader: ChildProcess | undefined
    let nextId = 0

    /** A new reader; one that exits is forgotten, so the next document starts another. */
    const start = () => {
      const child = fork(script, [String(NICE)], {
        // A session of its own, hence an autogroup of its own (background-priority.mjs).
        detached: true,
        execArgv: [`--max-old-space-size=${MAX_HEAP_MB}`],
        serialization: "advanced",
        stdio: ["ignore", "inherit", "inherit", "ipc"]
      })
      child.unref()
      child.channel?.unref()
      child.on("message", (reply: Reply) => {
        if ("niced" in reply && !reply.niced) log(Effect.logWarning("Could not lower the document reader's CPU priority on this system"))
      })
      // Failing to start or to be signalled: 'exit' follows, or the next document starts another.
      child.on("error", () => {
        if (reader === child) reader = undefined
      })
      child.on("exit", () => {
        if (reader === child) reader = undefined
      })
      return child
    }

    /** End the reader (a document over its deadline, or given up on): the next document starts another. */
    const stop = () => {
      const child = reader
      reader = undefined
      child?.kill("SIGKILL")
    }
    yield* Effect.addFinalizer(() => Effect.sync(stop))

    const readOnce = (format: DocumentFormat, bytes: Uint8Array) =>
      Effect.async<DocumentText, DocumentUnreadable>((resume) => {
        const child = reader ??= start()
        const id = nextId++
        // The first of a reply, the reader's exit and a failed send settles the job; the others are ignored.
        let settled = false
        const detach = () => {
          settled = true
          child.off("message", onMessage)
          child.off("exit", onExit)
          child.channel?.unref()
        }
        const settle = (outcome: Effect.Effect<DocumentText, DocumentUnreadable>) => {
          if (settled) return
          detach()
          resume(outcome)
        }
        const ended = (how: string) =>
          Effect.fail(new DocumentUnreadable({ reason: "too_complex", message: `The reader ended (${how}): out of memory or failed` }))
        const onMessage = (reply: Reply) => {
          if (reply.id !== id || "niced" in reply) return
          if ("reason" in reply) {
            settle(Effect.fail(new DocumentUnreadable({ reason: reply.reason, message: reply.message })))
            return
          }
          const capped = capText(reply.text)
          settle(Effect.succeed({ text: capped.text, pages: reply.pages, truncated: reply.truncated || capped.truncated }))
        }
        // Out of memory (V8 aborts it) or otherwise gone: the document is too much to read.
        const onExit = (code: number | null, signal: NodeJS.Signals | null) => settle(ended(signal ?? `exit code ${code}`))
        child.on("message", onMessage)
        child.on("exit", onExit)
        child.channel?.ref()
        // A reader that has just gone (its channel closed before 'exit' is seen) fails the job now, not at its deadline.
        child.send({ id, format, bytes, maxPages: MAX_PDF_PAGES, maxChars: MAX_TEXT_CHARS }, (error) => {
          if (error === null) return
          if (reader === child) reader = undefined
          settle(ended(error.message))
        })
        // Given up on (its deadline, or whoever asked no longer waits): the reader is busy with it, so it goes.
        return Effect.sync(() => {
          detach()
          if (reader === child) stop()
        })
      }).pipe(
        Effect.timeoutFail({
          duration: deadline,
          onTimeout: () => new DocumentUnreadable({ reason: "too_complex", message: `Not read within ${Duration.format(deadline)}` })
        })
      )

    return {
      versions: { pdf: `pdf.js ${versionOf("pdfjs-dist")}`, docx: `mammoth ${versionOf("mammoth")}` },
      read: (format, bytes) => oneAtATime.withPermits(1)(readOnce(format, bytes))
    }
  }))

export const layer = layerWith()
