// `npm test`: vitest, then the one closing line CI reads: `N passed, M failed`.
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

console.log(`npm test on Node ${process.version}, ${process.env.DATABASE_URL ? "PostgreSQL + NATS" : "embedded defaults"}`)

// The suites start Mailroom as processes, a few hundred times a run: from the compiled build (what
// the production image runs), made once here, each starts in half the CPU time tsx takes to compile
// the sources again in every process. MAILROOM_TEST_BUILD=sources runs them through tsx instead.
const env = { ...process.env }
if (env.MAILROOM_TEST_BUILD === "sources") {
  delete env.MAILROOM_TEST_BUILD
} else if (env.MAILROOM_TEST_BUILD === undefined) {
  const outDir = path.resolve(".test-build")
  const build = spawnSync(process.execPath, ["scripts/build.mjs", outDir], { stdio: "inherit" })
  if (build.status !== 0) {
    console.log("the build for the suites failed (node scripts/build.mjs)")
    console.log("0 passed, 1 failed")
    process.exit(1)
  }
  env.MAILROOM_TEST_BUILD = outDir
}
const report = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "mailroom-vitest-")), "report.json")
// Every process started (servers, CLI commands, vitest's workers) compiles the same modules: on Node
// 22 they share V8's compiled code through this cache, kept beside the report for this run only
// (Node 20 ignores the setting).
env.NODE_COMPILE_CACHE ??= path.join(path.dirname(report), "compile-cache")
const result = spawnSync(
  process.execPath,
  ["node_modules/vitest/vitest.mjs", "run", "--reporter=default", "--reporter=json", `--outputFile.json=${report}`, ...process.argv.slice(2)],
  { stdio: "inherit", env }
)
let passed = 0
let failed = 0
let skipped = 0
try {
  const json = JSON.parse(fs.readFileSync(report, "utf8"))
  passed = json.numPassedTests
  failed = json.numFailedTests + (json.numRuntimeErrorTests ?? 0)
  skipped = json.numPendingTests + json.numTodoTests
  if (json.success === false && failed === 0) failed = 1 // a suite failed to load or a hook threw
  // Each failure again, a line apiece, next to the closing line: a long run's log is often read
  // from its end, where vitest's own account of it has long scrolled away.
  for (const file of json.testResults ?? []) {
    const where = path.relative(process.cwd(), file.name)
    if (file.status === "failed" && (file.assertionResults ?? []).every((test) => test.status !== "failed")) {
      console.log(`FAILED ${where}: ${told(file.message)}`)
    }
    for (const test of file.assertionResults ?? []) {
      if (test.status === "failed") console.log(`FAILED ${where} > ${test.fullName}: ${told(test.failureMessages?.[0])}`)
    }
  }
  // Where the run's time went (CI must stay under 20 minutes): the slowest files, wall time each.
  const slowest = (json.testResults ?? [])
    .map((file) => ({ where: path.relative(process.cwd(), file.name), seconds: (file.endTime - file.startTime) / 1000 }))
    .filter((file) => Number.isFinite(file.seconds))
    .sort((a, b) => b.seconds - a.seconds)
    .slice(0, 12)
  if (slowest.length > 0) console.log(`slowest files: ${slowest.map((file) => `${file.where} ${file.seconds.toFixed(0)} s`).join(", ")}`)
} catch {
  failed = Math.max(1, failed) // no report: vitest itself failed
}
// MAILROOM_TEST_REPORT=file keeps vitest's JSON report (every file's and test's time) for whoever
// next weighs where a run's time goes.
if (env.MAILROOM_TEST_REPORT && fs.existsSync(report)) fs.copyFileSync(report, env.MAILROOM_TEST_REPORT)
fs.rmSync(path.dirname(report), { recursive: true, force: true })
/**
 * A failure's message as far as its stack: the first line beside the name (what CI's summary
 * repeats), then up to 15 more, indented (an assertion's own account of what it saw, which is often
 * all there is to go on when a failure does not come again).
 */
function told(message) {
  const lines = (message ?? "").split("\n")
  const stack = lines.findIndex((line) => /^\s+at /.test(line))
  const said = (stack === -1 ? lines : lines.slice(0, stack)).map((line) => line.trimEnd()).filter((line) => line.trim() !== "")
  if (said.length === 0) return "no message"
  const more = said.slice(1, 16).map((line) => `\n    ${line.trim().slice(0, 300)}`).join("")
  const left = said.length > 16 ? `\n    (${said.length - 16} more lines)` : ""
  return `${said[0].trim().slice(0, 300)}${more}${left}`
}

console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}`)
process.exit(result.status === 0 && failed === 0 ? 0 : 1)
