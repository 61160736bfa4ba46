/**
 * The embedded vector index's buffers sized to its data (`Pglite.buffersForData`, layers/pglite.ts):
 * an HNSW search walks the graph across the whole index, so the index's PGlite holds all of its data
 * in `shared_buffers` when the memory allows. The relation files are sparse here: their size is what
 * counts, and the test writes nothing of it.
 */
import { afterEach, describe, expect, it } from "vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Pglite from "../../layers/pglite.ts"

const MB = 1024 * 1024
const GB = 1024 * MB

const dirs: Array<string> = []
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
})

/** A data directory as a PGlite leaves it, its relation files of these sizes (in two databases' directories). */
const dataDir = (...sizes: ReadonlyArray<number>) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mailroom-buffers-"))
  dirs.push(dir)
  sizes.forEach((size, i) => {
    const database = path.join(dir, "pglite", "base", String(1 + (i % 2)))
    fs.mkdirSync(database, { recursive: true })
    fs.writeFileSync(path.join(database, String(16384 + i)), "")
    fs.truncateSync(path.join(database, String(16384 + i)), size)
  })
  return dir
}

describe("the vector index's buffers", () => {
  it("are PostgreSQL's 128MB for a directory not made yet, and for data that fits in them", () => {
    expect(Pglite.buffersForData(path.join(os.tmpdir(), "mailroom-buffers-none"), 16 * GB)).toEqual({ sharedBuffers: "128MB", dataBytes: 0 })
    expect(Pglite.buffersForData(dataDir(40 * MB, 30 * MB), 16 * GB)).toEqual({ sharedBuffers: "128MB", dataBytes: 70 * MB })
  })

  it("hold all of larger data with a quarter to spare, in steps of 16MB", () => {
    // 260MB of graph, 200MB of vectors, 20MB of the rest: 480MB, so 600MB, so 608MB.
    expect(Pglite.buffersForData(dataDir(260 * MB, 200 * MB, 20 * MB), 16 * GB)).toEqual({ sharedBuffers: "608MB", dataBytes: 480 * MB })
  })

  it("take at most an eighth of the memory, and never more than 1GB", () => {
    const large = dataDir(700 * MB, 500 * MB)
    expect(Pglite.buffersForData(large, 16 * GB).sharedBuffers).toBe("1024MB")
    expect(Pglite.buffersForData(large, 2 * GB).sharedBuffers).toBe("256MB")
    // Never fewer than PostgreSQL's own, however little memory there is.
    expect(Pglite.buffersForData(large, 512 * MB).sharedBuffers).toBe("128MB")
  })
})
