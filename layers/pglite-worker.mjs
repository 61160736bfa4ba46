// The embedded database's own thread (layers/pglite.ts): opens PGlite (with pgvector) on
// workerData.dataDir and serves it on the Unix socket workerData.socketPath with pglite-socket, so
// that the WebAssembly backend never runs on the thread that serves HTTP and SMTP.
//
// Messages to the parent: { type: "ready" } once the socket listens; { type: "failed", message }
// when opening fails (the thread then ends); { type: "stopped" } once asked to { type: "stop" } and
// the server is stopped and the database closed (closing writes PGlite's files out in full; a
// thread ended without it can leave them damaged).
// Plain JavaScript so that it starts the same under tsx, vitest and a bare node.
import { PGlite } from "@electric-sql/pglite"
import { vector } from "@electric-sql/pglite-pgvector"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import { parentPort, workerData } from "node:worker_threads"

const { dataDir, socketPath } = workerData
const describe = (error) => (error instanceof Error ? error.message : String(error))

const open = async () => {
  const db = await PGlite.create({ dataDir, extensions: { vector } })
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
