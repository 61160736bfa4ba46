// The embedded database's own thread (layers/pglite.ts): opens PGlite (with pgvector) on
// workerData.dataDir, with workerData.settings (PostgreSQL's, by name) from its start, and serves it
// on the Unix socket workerData.socketPath with pglite-socket, so that the WebAssembly backend never
// runs on the thread that serves HTTP and SMTP. PGlite's programs come compiled (workerData.compiled).
//
// Messages to the parent: { type: "ready" } once the socket listens; { type: "failed", message }
// when opening fails (the thread then ends); { type: "stopped" } once asked to { type: "stop" } and
// the server is stopped and the database closed (closing writes PGlite's files out in full; a
// thread ended without it can leave them damaged).
// Plain JavaScript so that it starts the same under tsx, vitest and a bare node.
import { PGlite } from "@electric-sql/pglite"
import { vector } from "@electric-sql/pglite-pgvector"
import { PGLiteSocketHandler, PGLiteSocketServer } from "@electric-sql/pglite-socket"
import { parentPort, workerData } from "node:worker_threads"

const { dataDir, socketPath, settings, compiled } = workerData
const describe = (error) => (error instanceof Error ? error.message : String(error))

/**
 * Extended-protocol messages whose answers are held back until the message that ends the statement
 * (Sync, or a simple Query) has been answered: Parse, Bind, Describe, Execute, Close.
 */
const HELD = new Set(["P", "B", "D", "E", "C"].map((letter) => letter.charCodeAt(0)))

/**
 * pglite-socket writes every chunk PGlite produces to the socket as it comes: a statement's
 * ParseComplete, BindComplete, each DataRow, CommandComplete and ReadyForQuery each become a write,
 * and each write can wake the app's thread. Gathered per statement they go in one write. Safe with
 * the app's client (node-postgres), which sends a statement's messages and its Sync together and
 * reads nothing before ReadyForQuery.
 */
const answerPerStatement = (db) => {
  const execute = db.execProtocolRawStream.bind(db)
  let held = []
  db.execProtocolRawStream = async (message, options) => {
    let failed = true
    try {
      // Copied: the chunk may be a view of PGlite's memory, reused by the next message.
      const result = await execute(message, { ...options, onRawData: (data) => held.push(Buffer.from(data)) })
      failed = false
      return result
    } finally {
      const out = held
      if (failed || !HELD.has(message[0])) held = []
      // After a failure pglite-socket drops the connection: what was held goes nowhere.
      if (!failed && !HELD.has(message[0]) && out.length > 0) options.onRawData(out.length === 1 ? out[0] : Buffer.concat(out))
    }
  }
}

/**
 * pglite-socket appends each chunk the socket reads to the bytes it holds (`Buffer.concat`), so a
 * message that arrives in n chunks costs n²/2 chunks of copying: a statement binding a large email's
 * bytes (50 MB, ~800 chunks) held this thread for half a minute, and with it every other statement.
 * The chunks of a message not yet whole are gathered here instead and handed on, in one piece, once
 * it is: one copy. Only a message that starts with its type byte is gathered (every message after
 * the start-up ones, whose first byte is that of their length: 0).
 */
const gatherLargeMessages = (Handler) => {
  const handle = Handler.prototype.handleData
  Handler.prototype.handleData = function (chunk) {
    const gathering = this.gathering
    if (gathering !== undefined) {
      gathering.chunks.push(chunk)
      gathering.bytes += chunk.length
      if (gathering.bytes < gathering.needed) return Promise.resolve(0)
      this.gathering = undefined
      return handle.call(this, Buffer.concat(gathering.chunks))
    }
    const held = this.messageBuffer ?? Buffer.alloc(0)
    const bytes = held.length + chunk.length
    if (bytes >= 5) {
      const head = held.length >= 5 ? held : Buffer.concat([held, chunk.subarray(0, 5)])
      // Type byte, then the length of the rest (itself included).
      const needed = 1 + head.readInt32BE(1)
      if (head[0] !== 0 && needed > bytes) {
        this.gathering = { chunks: [chunk], bytes, needed }
        return Promise.resolve(0)
      }
    }
    return handle.call(this, chunk)
  }
}

gatherLargeMessages(PGLiteSocketHandler)

const open = async () => {
  const db = await PGlite.create({
    dataDir,
    extensions: { vector },
    // Compiled once by the process for all its databases (pglite.ts `compiledPrograms`).
    pgliteWasmModule: compiled?.pglite,
    initdbWasmModule: compiled?.initdb,
    // On the command line, not in postgresql.conf: PGlite's `postgresqlconf` replaces that file.
    startParams: [...PGlite.defaultStartParams, ...Object.entries(settings).flatMap(([name, value]) => ["-c", `${name}=${value}`])]
  })
  answerPerStatement(db)
  try {
    // One connection: PGlite is one backend, and pglite-socket interleaves several connections'
    // protocol messages (not whole statements), which would mix their prepared statements.
    const server = new PGLiteSocketServer({ db, path: socketPath, maxConnections: 1 })
    await server.start()
    return { db, server }
  } catch (error) {
    await db.close().catch(() => undefined)
    throw error
  }
}

try {
  const { db, server } = await open()
  parentPort.on("message", async (message) => {
    if (message?.type !== "stop") return
    let problem
    await server.stop().catch((error) => (problem = `stopping the socket server: ${describe(error)}`))
    await db.close().catch((error) => (problem = `closing the database: ${describe(error)}`))
    parentPort.postMessage({ type: "stopped", problem })
    parentPort.close()
  })
  parentPort.postMessage({ type: "ready" })
} catch (error) {
  parentPort.postMessage({ type: "failed", message: describe(error) })
  parentPort.close()
}
