/**
 * Runs once before all suites. In embedded mode, initialise one empty PGlite data directory (its
 * initdb takes seconds) that each suite's fresh DATA_DIR starts from as a copy.
 */
import { PGlite } from "@electric-sql/pglite"
import { vector } from "@electric-sql/pglite-pgvector"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

export default async function setup() {
  if (process.env.DATABASE_URL) return
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mailroom-pglite-template-"))
  const db = await PGlite.create({ dataDir: path.join(dir, "pglite"), extensions: { vector } })
  await db.query("SELECT 1")
  await db.close()
  process.env.MAILROOM_TEST_PGLITE_TEMPLATE = path.join(dir, "pglite")
  return () => fs.rmSync(dir, { recursive: true, force: true })
}
