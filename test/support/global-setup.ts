/**
 * Runs once before all suites. Make the PGlite data directories that each suite's fresh DATA_DIR
 * starts from as a copy, since an initdb takes seconds:
 * - an empty one (initialised only), for the vector index (in either mode: beside a PostgreSQL without
 *   pgvector it is a PGlite too) and for suites that build their database themselves;
 * - in embedded mode, the same with the app's migrations applied, for the app database of a server a
 *   suite starts (createBackend): the schema is what every server's first start makes, and making it
 *   once saves each start ~1.5 s of CPU. Only the schema: nothing a server writes at its start (keys,
 *   secrets) is shared.
 */
import { PGlite } from "@electric-sql/pglite"
import { vector } from "@electric-sql/pglite-pgvector"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Pglite from "../../layers/pglite.ts"
import { migrate } from "../../src/database.ts"
import { dataDirRoot } from "./services.ts"

export default async function setup() {
  const dir = fs.mkdtempSync(path.join(dataDirRoot, "mailroom-pglite-template-"))
  const db = await PGlite.create({ dataDir: path.join(dir, "pglite"), extensions: { vector } })
  await db.query("SELECT 1")
  await db.close()
  process.env.MAILROOM_TEST_PGLITE_TEMPLATE = path.join(dir, "pglite")
  const done = () => fs.rmSync(dir, { recursive: true, force: true })
  // On PostgreSQL the empty one still serves the vector index beside a PostgreSQL without pgvector.
  if (process.env.DATABASE_URL) return done
  // Pglite.layer opens DATA_DIR/pglite.
  const migrated = path.join(dir, "migrated")
  fs.cpSync(path.join(dir, "pglite"), path.join(migrated, "pglite"), { recursive: true })
  await Effect.runPromise(Effect.scoped(Effect.provide(migrate, Pglite.layer({ dataDir: migrated, preparedStatements: true }))))
  process.env.MAILROOM_TEST_PGLITE_MIGRATED = path.join(migrated, "pglite")
  return done
}
