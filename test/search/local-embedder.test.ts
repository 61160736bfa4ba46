/**
 * The offline embedder runs behind the latency-sensitive work (issue 18): in child processes, each a
 * session of its own at the nice value it is given (and its autogroup too, where Linux groups
 * sessions), so it yields the cores to the server, PostgreSQL and NATS alike. Linux only (/proc).
 */
import { Effect } from "effect"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { spawn } from "node:child_process"
import { describe, expect, it } from "vitest"
import * as LocalEmbedder from "../../layers/local-embedder.ts"
import { Embedder } from "../../services/search/embedder.ts"
import { until } from "../support/wait.ts"

/** Fields of /proc/PID/stat after the command name: [0] state, [1] ppid, [3] session, [16] nice. */
const statOf = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ")
}

const alive = (pid: number) => existsSync(`/proc/${pid}`) && statOf(pid)[0] !== "Z"

/** The embedding processes `parent` started. */
const embeddersOf = (parent: number) =>
  readdirSync("/proc").filter((name) => /^\d+$/.test(name)).map(Number).filter((pid) => {
    try {
      return Number(statOf(pid)[1]) === parent && readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("local-embedder-process.mjs")
    } catch {
      return false // gone meanwhile
    }
  })

describe.skipIf(process.platform !== "linux")("local embedder processes", () => {
  it("embed in a session of their own at the nice value given (its autogroup too), leave this process alone, and end with the layer", async () => {
    const seen = await Effect.gen(function*() {
      const embedder = yield* Embedder
      const [vector] = yield* embedder.embed(["Your verification code is 482913"])
      const [pid] = embeddersOf(process.pid)
      const autogroup = existsSync(`/proc/${pid}/autogroup`) ? readFileSync(`/proc/${pid}/autogroup`, "utf8") : undefined
      return { dimensions: vector!.length, pid: pid!, stat: statOf(pid!), autogroup }
    }).pipe(Effect.scoped, Effect.provide(LocalEmbedder.layer({ threads: 1, nice: 7 })), Effect.runPromise)

    expect(seen.dimensions).toBe(512)
    expect(Number(seen.stat[16])).toBe(7)
    expect(Number(seen.stat[3])).not.toBe(Number(statOf(process.pid)[3]))
    expect(Number(statOf(process.pid)[16])).toBe(0)
    // Where the kernel groups sessions, the group's share is what yields to other processes.
    if (seen.autogroup !== undefined) expect(seen.autogroup.trim()).toMatch(/ nice 7$/)
    await until(() => `embedding process ${seen.pid} still running after the layer closed`, async () => (alive(seen.pid) ? undefined : true), 10_000, 100)
  }, 60_000)

  it("never outlives the process that started it, even one killed with SIGKILL", async () => {
    const parent = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", `
      import { Effect } from "effect"
      import * as LocalEmbedder from "./layers/local-embedder.ts"
      import { Embedder } from "./services/search/embedder.ts"
      await Effect.gen(function*() {
        yield* (yield* Embedder).embed(["hello"])
        console.log("embedded")
        yield* Effect.never
      }).pipe(Effect.scoped, Effect.provide(LocalEmbedder.layer({ threads: 1 })), Effect.runPromise)
    `], { stdio: ["ignore", "pipe", "inherit"] })
    let output = ""
    parent.stdout.on("data", (chunk) => (output += chunk))
    await until(() => `the parent did not embed: ${output}`, async () => (output.includes("embedded") ? true : undefined), 30_000, 100)
    const [child] = embeddersOf(parent.pid!)
    expect(child).toBeDefined()
    parent.kill("SIGKILL")
    await until(() => `embedding process ${child} outlived its parent`, async () => (alive(child!) ? undefined : true), 10_000, 100)
  }, 60_000)

  it("replaces a process whose model failed: its texts fail, the next go to a new process", async () => {
    const directory = mkdtempSync(path.join(os.tmpdir(), "embedder-stub-"))
    process.env.EMBEDDER_STUB_MARKER = path.join(directory, "broken")
    const stub = fileURLToPath(new URL("../fixtures/embedder-stub.mjs", import.meta.url))
    const [first, second, third] = await Effect.gen(function*() {
      const embedder = yield* Embedder
      return [
        yield* Effect.either(embedder.embed(["hello"])),
        yield* Effect.either(embedder.embed(["hello"])),
        yield* Effect.either(embedder.embed(["hello again"]))
      ] as const
    }).pipe(Effect.scoped, Effect.provide(LocalEmbedder.layer({ threads: 1, nice: 0, processPath: stub })), Effect.runPromise).finally(() => {
      delete process.env.EMBEDDER_STUB_MARKER
      rmSync(directory, { recursive: true, force: true })
    })
    expect(first).toMatchObject({ _tag: "Left", left: { message: "The local embedding model failed: Backend 'wasm' has not yet been initialized" } })
    expect(second).toMatchObject({ _tag: "Right" })
    expect(second._tag === "Right" && second.right[0]!.length).toBe(512)
    expect(third).toMatchObject({ _tag: "Right" })
  }, 30_000)

  it("a model that never loads is not loaded again for every text: processes start at once, then 1 s apart, doubling", async () => {
    const directory = mkdtempSync(path.join(os.tmpdir(), "embedder-stub-"))
    const marker = path.join(directory, "started")
    process.env.EMBEDDER_STUB_MARKER = marker
    process.env.EMBEDDER_STUB_BROKEN = "always"
    const stub = fileURLToPath(new URL("../fixtures/embedder-stub.mjs", import.meta.url))
    const started = () => readFileSync(marker, "utf8").split("\n").filter(Boolean).length
    const messages = await Effect.gen(function*() {
      const embedder = yield* Embedder
      const attempt = Effect.map(Effect.flip(embedder.embed(["hello"])), (error) => [error.message, started()] as const)
      const out = [yield* attempt, yield* attempt, yield* attempt]
      yield* Effect.sleep("1100 millis")
      out.push(yield* attempt, yield* attempt)
      return out
    }).pipe(Effect.scoped, Effect.provide(LocalEmbedder.layer({ threads: 1, nice: 0, processPath: stub })), Effect.runPromise).finally(() => {
      delete process.env.EMBEDDER_STUB_MARKER
      delete process.env.EMBEDDER_STUB_BROKEN
      rmSync(directory, { recursive: true, force: true })
    })
    const failed = "The local embedding model failed: Backend 'wasm' has not yet been initialized"
    expect(messages).toEqual([
      [failed, 1],
      // One failure may be a passing one: replaced at once.
      [failed, 2],
      [`The local embedding model failed 2 times in a row; the next process starts in 1 s`, 2],
      [failed, 3],
      [`The local embedding model failed 3 times in a row; the next process starts in 2 s`, 3]
    ])
  }, 30_000)
})
