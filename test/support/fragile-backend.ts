/**
 * A backend whose outages a test controls: a fresh PostgreSQL database reached through a TCP proxy
 * the test can cut, and a private nats-server it can stop. The machine's shared services are never
 * touched. Runs on the machine's PostgreSQL in both test modes.
 */
import { startPrivateNats, type PrivateNats } from "./nats-server.ts"
import { createDatabase, createDataDir, testSecret, type TestDatabase } from "./services.ts"
import { startTcpProxy, type TcpProxy } from "./tcp-proxy.ts"

const adminUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"

export interface FragileBackend {
  /** Settings for a Mailroom process on this backend (its DATABASE_URL goes through the proxy). */
  readonly env: Record<string, string>
  /** The database's own address, around the proxy: for a test to look at what was stored. */
  readonly directDatabaseUrl: string
  readonly proxy: TcpProxy
  readonly nats: PrivateNats
  readonly dispose: () => Promise<void>
}

export const createFragileBackend = async (): Promise<FragileBackend> => {
  const dataDir = createDataDir()
  let database: TestDatabase | undefined
  let proxy: TcpProxy | undefined
  let nats: PrivateNats | undefined
  const dispose = async () => {
    await proxy?.close()
    await nats?.dispose()
    await database?.drop()
    dataDir.remove()
  }
  try {
    database = await createDatabase(adminUrl)
    const target = new URL(database.url)
    proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) })
    nats = await startPrivateNats()
    const proxied = new URL(database.url)
    proxied.hostname = "127.0.0.1"
    proxied.port = String(proxy.port)
    return {
      env: { DATABASE_URL: proxied.toString(), NATS_URL: nats.url, JWT_SECRET: testSecret(), DATA_DIR: dataDir.dir },
      directDatabaseUrl: database.url,
      proxy,
      nats,
      dispose
    }
  } catch (error) {
    await dispose()
    throw error
  }
}
