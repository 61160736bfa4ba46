// `npm run build [-- <outDir>]`: the production build. TypeScript compiled to JavaScript (relative
// `.ts` imports rewritten to `.js`), with what the code reads beside itself at run time: the SQL
// migrations and the worker-thread scripts. `node <outDir>/src/main.js` then runs without tsx.
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const outDir = path.resolve(root, process.argv[2] ?? "dist")

fs.rmSync(outDir, { recursive: true, force: true })
const tsc = spawnSync(process.execPath, [path.join(root, "node_modules/typescript/bin/tsc"), "-p", path.join(root, "tsconfig.build.json"), "--outDir", outDir], {
  stdio: "inherit"
})
if (tsc.status !== 0) process.exit(tsc.status ?? 1)
fs.cpSync(path.join(root, "migrations"), path.join(outDir, "migrations"), { recursive: true })
for (const file of fs.readdirSync(path.join(root, "layers")).filter((name) => name.endsWith(".mjs"))) {
  fs.copyFileSync(path.join(root, "layers", file), path.join(outDir, "layers", file))
}
// The dashboard's browser code is served as written (src/dashboard/serve.ts): copied, not compiled.
const dashboard = path.join(root, "src/dashboard/client")
for (const file of fs.readdirSync(dashboard).filter((name) => /\.(js|css|svg)$/.test(name))) {
  fs.mkdirSync(path.join(outDir, "src/dashboard/client"), { recursive: true })
  fs.copyFileSync(path.join(dashboard, file), path.join(outDir, "src/dashboard/client", file))
}
console.log(`Built into ${path.relative(root, outDir) || "."}: node ${path.relative(root, path.join(outDir, "src/main.js"))}`)
