/**
 * A statement planned for the values it runs with, every time it runs: carried as a comment in its text
 * (`plannedForItsValues`), it makes the database client (layers/postgres.ts) send it unnamed instead of
 * preparing it. For a condition whose best plan depends on its value: after five runs of a prepared
 * statement PostgreSQL may keep a generic plan, made without the values, and such a plan cannot read
 * `LIKE $1` as the prefix of an index (it reads every row), nor tell a sender of a few emails from one
 * of nearly all.
 */
import type { SqlClient } from "@effect/sql"

export const PLANNED_FOR_ITS_VALUES = "/* planned for its values */"

/** The comment that has a statement planned for its values (a fragment of the statement, anywhere in it). */
export const plannedForItsValues = (sql: SqlClient.SqlClient) => sql.literal(PLANNED_FOR_ITS_VALUES)
