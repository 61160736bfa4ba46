// How a child process of the server (the local embedder's, the document reader's) puts itself behind
// the latency-sensitive work of every other process: it is started as a session of its own
// (`detached`), then lowers its priority to the nice value it is given.
//
// Linux groups the processes of a session (an autogroup) and shares the CPU between groups first:
// a thread's nice value only ranks it inside its own group, so niced threads inside the server's
// process would still take as much of the cores as PostgreSQL, NATS and the server together. Being a
// session of its own, the process gives its autogroup the nice value, and so yields the cores to
// every other session whenever they want them, and still gets every idle cycle. Where there are no
// autogroups the process's own nice value does the same. Answers whether either held.
import { writeFileSync } from "node:fs"
import { setPriority } from "node:os"

export const lowerPriority = (nice) => {
  if (nice === 0) return false
  let autogroup = false
  let own = false
  try {
    writeFileSync("/proc/self/autogroup", String(nice))
    autogroup = true
  } catch {}
  try {
    setPriority(0, nice)
    own = true
  } catch {}
  return autogroup || own
}
