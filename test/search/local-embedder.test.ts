/**
 * The offline embedder's threads run behind the latency-sensitive work (issue 18): each worker
 * thread lowers its own CPU priority, and only its own. Linux only (a thread's nice value is per task
 * there; elsewhere the threads keep the process's priority).
 */
import { Effect } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import * as LocalEmbedder from "../../layers/local-embedder.ts"
import { Embedder } from "../../services/search/embedder.ts"

/** Nice value of every thread of this process, by thread id (field 19 of /proc/self/task/TID/stat). */
const threadNices = () =>
  new Map(readdirSync("/proc/self/task").map((tid) => {
    const stat = readFileSync(`/proc/self/task/${tid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return [Number(tid), Number(fields[16])] as const
  }))

const embedOnce = (nice: number) =>
  Effect.gen(function*() {
    const embedder = yield* Embedder
    const [vector] = yield* embedder.embed(["Your verification code is 482913"])
    return { dimensions: vector!.length, nices: threadNices() }
  }).pipe(Effect.provide(LocalEmbedder.layer({ threads: 1, nice })), Effect.runPromise)

describe.skipIf(process.platform !== "linux")("local embedder thread priority", () => {
  it("runs its worker thread at the nice value it is given, and leaves the rest of the process alone", async () => {
    const before = threadNices()
    const { dimensions, nices } = await embedOnce(7)
    expect(dimensions).toBe(512)
    const added = [...nices].filter(([tid]) => !before.has(tid))
    expect(added.map(([, nice]) => nice)).toContain(7)
    expect(nices.get(process.pid)).toBe(0)
    expect([...before.keys()].every((tid) => nices.get(tid) === undefined || nices.get(tid) === 0)).toBe(true)
  }, 60_000)

  it("keeps the process's priority with nice 0", async () => {
    const before = threadNices()
    const { nices } = await embedOnce(0)
    expect([...nices].filter(([tid]) => !before.has(tid)).every(([, nice]) => nice === 0)).toBe(true)
  }, 60_000)
})
