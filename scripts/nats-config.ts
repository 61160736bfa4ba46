/**
 * Reading deploy/nats/nats.conf, the configuration every server of docker-compose.yml's NATS cluster
 * runs: what `npm run lint:compose` checks against the compose file, and what the NATS cluster test
 * rewrites to run the same file on local ports (test/cluster/nats-cluster.test.ts).
 *
 * Only the parts Mailroom's deployment relies on are read: the client listener, the monitoring port,
 * JetStream's store directory, and the cluster's name, listener and routes. A file whose shape is not
 * the expected one is an error naming what is missing, never a silent guess.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

export const natsConfigPath = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../deploy/nats/nats.conf")

export interface NatsRoute {
  readonly host: string
  readonly port: number
}

export interface NatsClusterConfig {
  readonly text: string
  readonly clientPort: number
  readonly httpPort: number
  readonly storeDir: string
  readonly clusterName: string
  readonly clusterPort: number
  readonly routes: ReadonlyArray<NatsRoute>
}

/** The `name { … }` block's body (braces balanced), or undefined. */
const block = (text: string, name: string): { readonly start: number; readonly end: number; readonly body: string } | undefined => {
  const open = new RegExp(`^${name}\\s*\\{`, "m").exec(text)
  if (open === null) return undefined
  let depth = 0
  for (let i = open.index + open[0].length - 1; i < text.length; i++) {
    if (text[i] === "{") depth++
    else if (text[i] === "}" && --depth === 0) return { start: open.index, end: i + 1, body: text.slice(open.index + open[0].length, i) }
  }
  return undefined
}

const withoutComments = (text: string) => text.replace(/#.*$/gm, "")

const required = <A>(value: A | undefined, what: string): A => {
  if (value === undefined) throw new Error(`${path.relative(process.cwd(), natsConfigPath)}: ${what} not found`)
  return value
}

export const parseNatsConfig = (text: string): NatsClusterConfig => {
  const plain = withoutComments(text)
  const cluster = required(block(plain, "cluster"), "a cluster { … } block")
  const jetstream = required(block(plain, "jetstream"), "a jetstream { … } block")
  const outside = plain.slice(0, Math.min(cluster.start, jetstream.start)) +
    plain.slice(Math.min(cluster.end, jetstream.end), Math.max(cluster.start, jetstream.start)) +
    plain.slice(Math.max(cluster.end, jetstream.end))
  const port = (match: RegExpExecArray | null) => (match === null ? undefined : Number(match[1]))
  return {
    text,
    clientPort: required(port(/^\s*listen:\s*\S*?:(\d+)\s*$/m.exec(outside)), "the client listen: host:port"),
    httpPort: required(port(/^\s*http_port:\s*(\d+)\s*$/m.exec(outside)), "http_port"),
    storeDir: required(/^\s*store_dir:\s*(\S+)\s*$/m.exec(jetstream.body)?.[1], "jetstream store_dir"),
    clusterName: required(/^\s*name:\s*(\S+)\s*$/m.exec(cluster.body)?.[1], "the cluster's name"),
    clusterPort: required(port(/^\s*listen:\s*\S*?:(\d+)\s*$/m.exec(cluster.body)), "the cluster's listen: host:port"),
    routes: Array.from(cluster.body.matchAll(/nats-route:\/\/([^:\s/]+):(\d+)/g), (match) => ({ host: match[1]!, port: Number(match[2]) }))
  }
}

export const readNatsConfig = (): NatsClusterConfig => parseNatsConfig(fs.readFileSync(natsConfigPath, "utf8"))

export interface LocalNatsServer {
  /** The route host of this server in the committed file (a compose service name). */
  readonly host: string
  readonly clientPort: number
  readonly httpPort: number
  readonly clusterPort: number
  readonly storeDir: string
}

/**
 * The committed file with every address made local: listeners on 127.0.0.1 at this server's ports,
 * the store directory replaced, each route's host (a compose service) at the cluster port given for
 * it. Everything else (cluster name, JetStream limits, the server name read from NATS_SERVER_NAME)
 * is the file as committed.
 */
export const localNatsConfig = (config: NatsClusterConfig, self: LocalNatsServer, all: ReadonlyArray<LocalNatsServer>): string => {
  const replaceOnce = (text: string, pattern: RegExp, replacement: string, what: string) => {
    if (!pattern.test(text)) throw new Error(`nats.conf: ${what} not found to rewrite`)
    return text.replace(pattern, replacement)
  }
  let text = config.text
  text = replaceOnce(text, new RegExp(`^(\\s*listen:\\s*)\\S*:${config.clientPort}\\s*$`, "m"), `$1127.0.0.1:${self.clientPort}`, "the client listener")
  text = replaceOnce(text, /^(\s*http_port:\s*)\d+\s*$/m, `$1${self.httpPort}`, "http_port")
  text = replaceOnce(text, /^(\s*store_dir:\s*)\S+\s*$/m, `$1"${self.storeDir}"`, "store_dir")
  text = replaceOnce(text, new RegExp(`^(\\s*listen:\\s*)\\S*:${config.clusterPort}\\s*$`, "m"), `$1127.0.0.1:${self.clusterPort}`, "the cluster listener")
  for (const route of config.routes) {
    const server = all.find((candidate) => candidate.host === route.host)
    if (server === undefined) throw new Error(`nats.conf: no local server for the route to ${route.host}`)
    text = replaceOnce(text, new RegExp(`nats-route://${route.host}:${route.port}\\b`), `nats-route://127.0.0.1:${server.clusterPort}`, `the route to ${route.host}`)
  }
  return text
}
