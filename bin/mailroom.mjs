#!/usr/bin/env node
// `mailroom <command>` (`npx mailroom help`): the sources through tsx in a checkout, the compiled
// build (`npm run build`, dist/) where tsx is not installed, as in the production image.
import { existsSync } from "node:fs"

const source = new URL("../src/main.ts", import.meta.url)
const built = new URL("../dist/src/main.js", import.meta.url)

let tsx
try {
  tsx = await import("tsx/esm/api")
} catch {
  tsx = undefined
}
if (tsx !== undefined && existsSync(source)) {
  tsx.register()
  await import(source.href)
} else if (existsSync(built)) {
  await import(built.href)
} else {
  process.stderr.write("mailroom: neither tsx with the sources nor a build (npm run build) is here\n")
  process.exit(1)
}
