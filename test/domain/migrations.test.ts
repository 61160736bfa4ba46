/**
 * The migrations runner (src/database.ts `migrate`) refuses a database a newer Mailroom migrated: one
 * whose `mailroom_migrations` holds a migration past the last of migrations/ (as after an upgrade
 * rolled back to the older code). That code would otherwise run on tables it does not know and write
 * rows that break the newer version's rules. The refusal names the newest migration applied and the
 * newest this version knows, says what to do, and changes nothing; a database at this version's last
 * migration (or before it) is migrated as ever. Over both databases; the command line's refusal (exit
 * 1, the message alone) is test/ops/cli.test.ts.
 */
import { layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { MigrationError } from "@effect/sql/Migrator"
import { Effect } from "effect"
import { expect } from "vitest"
import * as fs from "node:fs"
import { migrate, migrationsDirectory } from "../../src/database.ts"
import { testDatabase } from "../support/database.ts"

/** The last migration of migrations/, as `1_accounts` names it. */
const lastKnown = () => {
  const [file] = fs.readdirSync(migrationsDirectory).filter((name) => /^\d+_.+\.sql$/.test(name)).sort().slice(-1)
  const [, id, name] = /^(\d+)_(.+)\.sql$/.exec(file!)!
  return { id: Number(id), name: `${Number(id)}_${name}` }
}

layer(testDatabase, { timeout: "120 seconds" })("migrations", (it) => {
  it.effect("a database migrated past this version's last migration is refused, naming both, and left as it was", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const known = lastKnown()
      // Every migration of this version is applied: nothing to do.
      expect(yield* migrate).toEqual([])
      const future = known.id + 3
      yield* sql`INSERT INTO mailroom_migrations (migration_id, name) VALUES (${future}, 'from_a_newer_version')`
      const count = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM mailroom_migrations`
      try {
        const refused = yield* Effect.flip(migrate)
        expect(refused).toBeInstanceOf(MigrationError)
        expect(refused.message).toBe(
          `This database was migrated by a newer Mailroom (its newest migration is ${future}_from_a_newer_version; ` +
            `this version knows up to ${known.name}): start that version, or restore a backup taken before the upgrade`
        )
        // Nothing written: the rows are as they were.
        expect(yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM mailroom_migrations`).toEqual(count)
      } finally {
        yield* sql`DELETE FROM mailroom_migrations WHERE migration_id = ${future}`
      }
      // At this version's last migration again: migrated as ever.
      expect(yield* migrate).toEqual([])
    }))
})
