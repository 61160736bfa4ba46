/** The directories Mailroom keeps its data in (DATA_DIR and the embedded databases' own). */
import * as fs from "node:fs"
import * as path from "node:path"

const isDirectory = (dir: string) => {
  try {
    return fs.statSync(dir).isDirectory()
  } catch {
    return false
  }
}

/**
 * A directory made with its missing parents, or an error naming it. Node's own
 * `mkdirSync(dir, { recursive: true })` never returns where the parent exists but takes no
 * directories (DATA_DIR=/proc: mkdir answers ENOENT, the parent is there, and it tries again, for
 * ever, in native code: the process spun and could not even be stopped with SIGTERM).
 */
export const makeDirectory = (dir: string): void => {
  const absolute = path.resolve(dir)
  if (isDirectory(absolute)) return
  const parent = path.dirname(absolute)
  if (parent !== absolute) makeDirectory(parent)
  try {
    fs.mkdirSync(absolute)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === "EEXIST" && isDirectory(absolute)) return // made meanwhile
    throw new Error(`Could not make the directory ${absolute}: ${error instanceof Error ? error.message : String(error)}`)
  }
}

/**
 * A directory of this process's data only (the embedded database's files: all mail, keys' hashes,
 * webhook secrets): made if missing, and closed to everyone but its owner (0700, as PostgreSQL holds
 * its own data directory). The files inside may be written readable by all (PGlite writes them so);
 * nobody else can reach them through the directory.
 */
export const ownerOnlyDirectory = (dir: string): void => {
  makeDirectory(dir)
  try {
    fs.chmodSync(dir, 0o700)
  } catch (error) {
    throw new Error(`Could not close ${path.resolve(dir)} to other users: ${error instanceof Error ? error.message : String(error)}`)
  }
}
