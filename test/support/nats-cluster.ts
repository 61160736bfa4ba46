/**
 * docker-compose.yml's NATS cluster, run locally: three nats-server processes started from the
 * committed deploy/nats/nats.conf (scripts/nats-config.ts rewrites only its addresses: each server's
 * listeners on 127.0.0.1 at free ports, each route's compose host at the matching server's cluster
 * port, a temporary store directory), named as compose names them (NATS_SERVER_NAME). A server can
 * be killed (SIGKILL) to test losing one; `dispose` stops them all and removes every directory.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { type LocalNatsServer, localNatsConfig, readNatsConfig } from "../../scripts/nats-config.ts"
import { freePort } from "./process.ts"
import { until } from "./wait.ts"

const NATS_SERVER = "/usr/sbin/nats-server"

export interface NatsClusterServer extends LocalNatsServer {
  /** Its server name: the compose service it stands for (nats-1, …). */
  readonly name: string
  readonly url: string
  readonly running: () => boolean
  /** SIGKILL: the server dies with whatever it held in memory. */
  readonly kill: () => Promise<void>
}

export interface NatsCluster {
  readonly servers: ReadonlyArray<NatsClusterServer>
  /** Every server's client address, comma-separated: a NATS_URL as the compose file writes it. */
  readonly url: string
  readonly server: (name: string) => NatsClusterServer
  readonly output: () => string
  readonly dispose: () => Promise<void>
}

const healthy = async (httpPort: number) => {
  try {
    // Without js-enabled-only, /healthz is 200 only once this server's JetStream is current with
    // the cluster (a meta leader elected): the cluster is usable, not merely listening.
    return (await fetch(`http://127.0.0.1:${httpPort}/healthz`)).status === 200
  } catch {
    return false
  }
}

export const startNatsCluster = async (): Promise<NatsCluster> => {
  const config = readNatsConfig()
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "mailroom-nats-cluster-"))
  const locals: Array<LocalNatsServer> = []
  for (const route of config.routes) {
    const storeDir = path.join(root, route.host, "store")
    fs.mkdirSync(storeDir, { recursive: true })
    locals.push({ host: route.host, clientPort: await freePort(), httpPort: await freePort(), clusterPort: await freePort(), storeDir })
  }
  let output = ""
  const children = new Map<string, ChildProcess>()
  const servers = locals.map((local): NatsClusterServer => {
    const file = path.join(root, local.host, "nats.conf")
    fs.writeFileSync(file, localNatsConfig(config, local, locals))
    const child = spawn(NATS_SERVER, ["-c", file], {
      env: { ...process.env, NATS_SERVER_NAME: local.host },
      stdio: ["ignore", "pipe", "pipe"]
    })
    child.stdout!.on("data", (chunk) => (output += `[${local.host}] ${chunk}`))
    child.stderr!.on("data", (chunk) => (output += `[${local.host}] ${chunk}`))
    children.set(local.host, child)
    const running = () => child.exitCode === null && child.signalCode === null
    return {
      ...local,
      name: local.host,
      url: `nats://127.0.0.1:${local.clientPort}`,
      running,
      kill: async () => {
        if (!running()) return
        const exited = new Promise((resolve) => child.once("exit", resolve))
        child.kill("SIGKILL")
        await exited
      }
    }
  })
  const dispose = async () => {
    await Promise.all(servers.map((server) => server.kill()))
    fs.rmSync(root, { recursive: true, force: true })
  }
  try {
    await until(
      () => `the NATS cluster did not become healthy:\n${output}`,
      async () => {
        const dead = servers.find((server) => !server.running())
        if (dead !== undefined) throw new Error(`nats-server ${dead.name} exited:\n${output}`)
        return (await Promise.all(servers.map((server) => healthy(server.httpPort)))).every(Boolean) ? true : undefined
      },
      60_000,
      200
    )
  } catch (error) {
    await dispose()
    throw error
  }
  return {
    servers,
    url: servers.map((server) => server.url).join(","),
    server: (name) => {
      const found = servers.find((server) => server.name === name)
      if (found === undefined) throw new Error(`no NATS server named ${name} (have ${servers.map((server) => server.name).join(", ")})`)
      return found
    },
    output: () => output,
    dispose
  }
}
