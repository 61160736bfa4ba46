/**
 * Secrets the operator did not set are generated once into DATA_DIR (embedded single-node mode),
 * so tokens survive restarts. With DATABASE_URL set they must be configured (see config.ts).
 */
import { Effect, Option, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { makeDirectory } from "../layers/directories.ts"
import type { AppConfigShape } from "./config.ts"

export const jwtSecret = (config: AppConfigShape) =>
  Option.match(config.jwtSecret, {
    onSome: Effect.succeed,
    onNone: () =>
      Effect.try(() => {
        const file = path.resolve(config.dataDir, "jwt-secret")
        makeDirectory(config.dataDir)
        if (!fs.existsSync(file)) {
          fs.writeFileSync(file, randomBytes(48).toString("base64url"), { mode: 0o600, flag: "wx" })
        }
        return Redacted.make(fs.readFileSync(file, "utf8").trim())
      })
  })
