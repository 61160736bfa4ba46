/**
 * PostgreSQL through @effect/sql-pg: the production SqlClient (`DATABASE_URL`).
 */
import { PgClient } from "@effect/sql-pg"
import { Duration, type Layer, type Redacted, String } from "effect"
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"

export interface PostgresOptions {
  readonly url: Redacted.Redacted
  readonly maxConnections?: number
  readonly applicationName?: string
}

/** Shared client settings: snake_case columns in SQL, camelCase in TypeScript. */
export const clientSettings = {
  transformResultNames: String.snakeToCamel,
  transformQueryNames: String.camelToSnake,
  connectTimeout: Duration.seconds(5),
  idleTimeout: Duration.seconds(30)
} as const

export const layer = (options: PostgresOptions): Layer.Layer<PgClient.PgClient | SqlClient, SqlError> =>
  PgClient.layer({
    ...clientSettings,
    url: options.url,
    maxConnections: options.maxConnections ?? 10,
    applicationName: options.applicationName ?? "mailroom"
  })
