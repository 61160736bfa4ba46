/**
 * A private nats-server with JetStream on a spare port, so a test can stop the bus without
 * touching the machine's shared one.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { freePort } from "./server.ts"

export interface PrivateNats {
  readonly url: string
  readonly stop: () => Promise<void>
  readonly start: () => Promise<void>
  /** Freeze the server (SIGSTOP): its connections stay open and nothing on them is answered. */
  readonly pause: () => void
  /** Let a frozen server run again (SIGCONT). */
  readonly resume: () => void
  readonly dispose: () => Promise<void>
}

const reachable = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect(port, "127.0.0.1")
    socket.once("connect", () => {
      socket.destroy()
      resolve(true)
    })
    socket.once("error", () => resolve(false))
  })

export const startPrivateNats = async (): Promise<PrivateNats> => {
  const port = await freePort()
  const storeDir = fs.mkdtempSync(path.join(os.tmpdir(), "mailroom-nats-"))
  let child: ChildProcess | undefined

  const start = async () => {
    child = spawn("/usr/sbin/nats-server", ["-a", "127.0.0.1", "-p", String(port), "-js", "-sd", storeDir], { stdio: "ignore" })
    const deadline = Date.now() + 10_000
    while (Date.now() < deadline) {
      if (await reachable(port)) return
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    throw new Error("private nats-server did not start")
  }
  const stop = async () => {
    if (!child || child.exitCode !== null) return
    const exited = new Promise((resolve) => child!.once("exit", resolve))
    child.kill("SIGKILL")
    await exited
  }
  await start()
  return {
    url: `nats://127.0.0.1:${port}`,
    start,
    stop,
    pause: () => void child?.kill("SIGSTOP"),
    resume: () => void child?.kill("SIGCONT"),
    dispose: async () => {
      await stop()
      fs.rmSync(storeDir, { recursive: true, force: true })
    }
  }
}
