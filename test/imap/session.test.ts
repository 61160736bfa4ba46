/**
 * An IMAP session's answers in process (src/imap/session.ts), over a store stand-in: a command the
 * client got wrong is answered BAD with its tag and logged nowhere (the client's mistake, an expected
 * failure); a bug is NO [SERVERBUG] and logged. The wire around it is test/imap/imap.test.ts's.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Logger, LogLevel } from "effect"
import type { ImapStore } from "../../services/imap/store.ts"
import { parseCommand } from "../../src/imap/protocol.ts"
import { makeSession } from "../../src/imap/session.ts"

/** A store whose sign-in is a bug; nothing else of it is reached before sign-in. */
const store = { signIn: () => Effect.die(new Error("a bug in the store")) } as unknown as ImapStore

const logged: Array<{ readonly level: string; readonly message: unknown }> = []
const captured = Logger.replace(
  Logger.defaultLogger,
  Logger.make(({ logLevel, message }) => void logged.push({ level: logLevel.label, message }))
)

/** The lines a session answers to `lines`, one command at a time. */
const answers = (lines: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const sent: Array<string> = []
    const session = makeSession(store, { secure: () => false, canStartTls: () => false, clearTextAllowed: true }, (text) =>
      Effect.sync(() => void sent.push(text)))
    for (const line of lines) yield* session.handle(yield* parseCommand(line))
    return sent
  }).pipe(Effect.provide(captured), Logger.withMinimumLogLevel(LogLevel.All))

describe("an IMAP session", () => {
  it.effect("answers a client's mistakes BAD with their tags and logs nothing; a bug is NO [SERVERBUG], logged", () =>
    Effect.gen(function*() {
      logged.length = 0
      expect(yield* answers(["a1 FROB\r\n", "a2 SELECT INBOX\r\n", "a3 LOGIN\r\n", "a4 STATUS INBOX MESSAGES\r\n", "a5 UID\r\n"])).toEqual([
        "a1 BAD Unknown command FROB\r\n",
        "a2 BAD Sign in first\r\n",
        "a3 BAD Expected a string\r\n",
        "a4 BAD Sign in first\r\n",
        "a5 BAD Select a folder first\r\n"
      ])
      expect(logged).toEqual([])

      expect(yield* answers(["b1 LOGIN ann@agents.test key\r\n"])).toEqual(["b1 NO [SERVERBUG] The command failed\r\n"])
      expect(logged).toEqual([{ level: "ERROR", message: ["IMAP command failed", expect.any(Error)] }])
    }))
})
