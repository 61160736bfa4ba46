/**
 * The README's quick tour runs as written (issue 15, item 8): a newcomer pastes its blocks into bash,
 * top to bottom, with a fresh server running, and every step works.
 *
 * Which blocks: a ```sh fence whose previous non-blank line is `<!-- tour -->`. Every shell fence under
 * "## Quick tour" carries that marker or `<!-- not in the tour -->` (starting the server, say), so a
 * block added there is never left untested by accident.
 *
 * How: the tour blocks, joined in order, run with `bash -euo pipefail` in a temporary directory (the
 * tour writes mail.txt, body.json and the like), against a server of this suite's own, with
 * localhost:3000, localhost:2525 and the webhook receiver's 127.0.0.1:4000 rewritten to this run's
 * ports. A failing command is named with its README line. Then:
 * - every line `# → <output>` in a tour block is printed by the script, in order (`…` stands for any
 *   text): the README's example answers are the server's;
 * - every HTTP answer is 2xx or 3xx (so the tour stays inside its plan's rate limits), except the
 *   refusals the tour shows on purpose; no variable the tour assigns is empty or `null`;
 * - the delivery the tour's webhook receiver saved verifies with `verifyWebhook` and the tour's secret.
 *
 * Embedded mode only: the tour documents `npm start` on its embedded defaults. The PostgreSQL and NATS
 * mode serves the same HTTP and SMTP, which the API suites cover there.
 */
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { verifyWebhook } from "../services/webhooks/signatures.ts"
import { type DnsServer, startDnsServer } from "./support/dns-server.ts"
import { type Backend, createBackend, freePort, repoRoot, type Server, startServer } from "./support/server.ts"
import { mode } from "./support/services.ts"

const README = path.join(repoRoot, "README.md")

// ---------------------------------------------------------------------------------------------------
// Reading the tour out of the README

interface ShellBlock {
  /** README line of the opening fence (1-based). */
  readonly line: number
  readonly section: string
  readonly marker: "tour" | "not in the tour" | undefined
  /** The block's lines, each with its README line. */
  readonly body: ReadonlyArray<{ readonly text: string; readonly line: number }>
}

const SHELL = new Set(["sh", "bash", "shell"])

const shellBlocks = (markdown: string): Array<ShellBlock> => {
  const lines = markdown.split("\n")
  const blocks: Array<ShellBlock> = []
  let section = ""
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!
    const heading = /^## (.+)$/.exec(line)
    if (heading) section = heading[1]!.trim()
    const fence = /^```(\S*)\s*$/.exec(line)
    if (!fence) continue
    const end = lines.findIndex((l, j) => j > i && /^```\s*$/.test(l))
    if (end < 0) throw new Error(`README.md:${i + 1}: a code fence is never closed`)
    if (SHELL.has(fence[1]!)) {
      let previous = i - 1
      while (previous >= 0 && lines[previous]!.trim() === "") previous--
      const comment = /^<!--\s*(tour|not in the tour)\s*-->$/.exec(lines[previous]?.trim() ?? "")
      blocks.push({
        line: i + 1,
        section,
        marker: comment ? (comment[1] as ShellBlock["marker"]) : undefined,
        body: lines.slice(i + 1, end).map((text, k) => ({ text, line: i + 2 + k }))
      })
    }
    i = end
  }
  return blocks
}

const tourBlocks = (markdown: string) => shellBlocks(markdown).filter((block) => block.marker === "tour")

interface Expectation {
  readonly pattern: string
  readonly line: number
}

/** `# → <output>` lines: what the script must print, in order. */
const expectationsOf = (blocks: ReadonlyArray<ShellBlock>): Array<Expectation> =>
  blocks.flatMap((block) =>
    block.body.flatMap(({ text, line }) => {
      const match = /^\s*# → (.*)$/.exec(text)
      return match ? [{ pattern: match[1]!.trimEnd(), line }] : []
    })
  )

/** A full-line match where `…` stands for any text. */
const matcher = (pattern: string) =>
  new RegExp(`^${pattern.split("…").map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join(".*")}$`)

/** Match expectations in order against the output's lines; one message per expectation not found. */
const unmet = (expectations: ReadonlyArray<Expectation>, output: ReadonlyArray<string>): Array<string> => {
  const problems: Array<string> = []
  let from = 0
  for (const expected of expectations) {
    const re = matcher(expected.pattern)
    const at = output.findIndex((line, index) => index >= from && re.test(line))
    if (at >= 0) {
      from = at + 1
      continue
    }
    const next = output.slice(from, from + 6).map((line) => `    | ${line}`).join("\n")
    problems.push(`README.md:${expected.line}: the tour never printed\n    ${expected.pattern}\n  its output from there on:\n${next || "    (nothing)"}`)
  }
  return problems
}

// ---------------------------------------------------------------------------------------------------
// Running it

interface Ports {
  readonly http: number
  readonly smtp: number
  readonly receiver: number
}

const rewrite = (text: string, ports: Ports) =>
  text
    .replaceAll("localhost:3000", `localhost:${ports.http}`)
    .replaceAll("localhost:2525", `localhost:${ports.smtp}`)
    .replaceAll("127.0.0.1:4000", `127.0.0.1:${ports.receiver}`)

interface TourRun {
  readonly ports: Ports
  readonly exitCode: number | null
  readonly timedOut: boolean
  readonly stdout: string
  readonly stderr: string
  readonly trace: string
  /** The variables the tour assigned, as the script left them. */
  readonly variables: Record<string, string>
  /** Every HTTP (and SMTP) answer curl got: `<code> <method> <url>`. */
  readonly answers: Array<{ readonly code: number; readonly method: string; readonly url: string }>
  /** Script line → README line. */
  readonly readmeLine: (scriptLine: number) => number | undefined
}

const runTour = async (blocks: ReadonlyArray<ShellBlock>, ports: Ports, cwd: string, timeoutMs: number): Promise<TourRun> => {
  const tourLines = blocks.flatMap((block) => block.body)
  const variables = [
    ...new Set(tourLines.flatMap(({ text }) => [...text.matchAll(/(?:^|\s|\()([A-Z][A-Z0-9_]*)=/g)].map((m) => m[1]!)))
  ]
  const prelude = [
    // Named for the README reader when a command fails; the test maps the line to README.md.
    `trap 'echo "tour failed at line $LINENO: $BASH_COMMAND" >&2' ERR`,
    // Every answer's status, on stderr: the tour's own output is left as a reader sees it.
    `curl() { command curl -w '%{stderr}@@answer %{response_code} %{method} %{url_effective}\\n' "$@"; }`,
    `exec 9>>tour.trace; BASH_XTRACEFD=9; PS4='+ line $LINENO: '; set -x`
  ]
  const epilogue = [
    "set +x",
    `for name in ${variables.join(" ")}; do printf '%s=%s\\n' "$name" "\${!name}"; done > tour.variables`
  ]
  const script = [...prelude, ...tourLines.map(({ text }) => rewrite(text, ports)), ...epilogue].join("\n") + "\n"
  fs.writeFileSync(path.join(cwd, "tour.sh"), script)
  const readmeLine = (scriptLine: number) => tourLines[scriptLine - prelude.length - 1]?.line

  const child = spawn("bash", ["-euo", "pipefail", "tour.sh"], {
    cwd,
    // A clean environment: nothing the tour forgets to assign can come from the test's shell (or ~/.curlrc).
    env: { PATH: `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH ?? ""}`, HOME: cwd, LANG: "C.UTF-8" },
    // Its own process group, so the webhook receiver it starts in the background goes with it.
    detached: true,
    stdio: ["ignore", "pipe", "pipe"]
  })
  let stdout = ""
  let stderr = ""
  child.stdout!.on("data", (chunk) => (stdout += chunk))
  child.stderr!.on("data", (chunk) => (stderr += chunk))
  const closed = new Promise<void>((resolve) => child.once("close", () => resolve()))
  const killGroup = () => {
    try {
      process.kill(-child.pid!, "SIGKILL")
    } catch {
      // The group is gone already: nothing left to stop.
    }
  }
  let timedOut = false
  const timer = setTimeout(() => {
    timedOut = true
    killGroup()
  }, timeoutMs)
  const exitCode = await new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  clearTimeout(timer)
  killGroup() // a receiver left running by a failed tour
  await closed

  const read = (name: string) => (fs.existsSync(path.join(cwd, name)) ? fs.readFileSync(path.join(cwd, name), "utf8") : "")
  const assigned = Object.fromEntries(
    read("tour.variables").split("\n").filter(Boolean).map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)])
  )
  const answers = [...stderr.matchAll(/^@@answer (\d{3}) (\S*) (\S+)$/gm)].map((m) => ({ code: Number(m[1]), method: m[2]!, url: m[3]! }))
  return {
    ports,
    exitCode,
    timedOut,
    stdout,
    stderr: stderr.replace(/^@@answer .*\n/gm, ""),
    trace: read("tour.trace"),
    variables: assigned,
    answers,
    readmeLine
  }
}

/** `line 12` (of tour.sh) → `README.md:345`, in whatever bash printed. */
const inReadmeTerms = (text: string, run: TourRun) =>
  text.replace(/\bline (\d+)\b/g, (whole, n: string) => {
    const line = run.readmeLine(Number(n))
    return line === undefined ? whole : `README.md:${line}`
  })

const failureReport = (run: TourRun) => {
  const tail = (text: string, lines: number) => text.trimEnd().split("\n").slice(-lines).join("\n")
  return [
    run.timedOut ? "The tour did not finish in time (a wait that never ends?)." : `The tour exited with ${run.exitCode}.`,
    "--- stderr (last lines) ---",
    inReadmeTerms(tail(run.stderr, 15), run),
    "--- commands run (last lines) ---",
    // Only the README's own commands: the test's curl wrapper and trap are noise to a README editor.
    tail(inReadmeTerms(run.trace, run).split("\n").filter((line) => /^\++ README\.md:\d+: /.test(line)).join("\n"), 12),
    "--- stdout (last lines) ---",
    tail(run.stdout, 10)
  ].join("\n")
}

// ---------------------------------------------------------------------------------------------------

describe("the README's shell blocks", () => {
  const blocks = shellBlocks(fs.readFileSync(README, "utf8"))

  it("every shell block of the Quick tour is marked `<!-- tour -->` or `<!-- not in the tour -->`", () => {
    const unmarked = blocks.filter((block) => block.section === "Quick tour" && block.marker === undefined)
    expect(unmarked.map((block) => `README.md:${block.line}`), "put <!-- tour --> (or <!-- not in the tour -->) on the line before").toEqual([])
    expect(tourBlocks(fs.readFileSync(README, "utf8")).length).toBeGreaterThanOrEqual(5)
  })

  it("the tour names no port the test cannot point at its own server", () => {
    const ports: Ports = { http: 1, smtp: 2, receiver: 3 }
    const offending = tourBlocks(fs.readFileSync(README, "utf8"))
      .flatMap((block) => block.body)
      .filter(({ text }) => /:(3000|2525|4000)\b/.test(rewrite(text, ports)))
      .map(({ line, text }) => `README.md:${line}: ${text.trim()}`)
    expect(offending, "write the API as localhost:3000, SMTP as localhost:2525, the receiver as 127.0.0.1:4000").toEqual([])
  })
})

describe.skipIf(mode !== "embedded")("the quick tour, pasted into bash against a fresh server", () => {
  let dns: DnsServer
  let backend: Backend
  let server: Server
  let workDir: string
  let run: TourRun
  const blocks = tourBlocks(fs.readFileSync(README, "utf8"))

  beforeAll(async () => {
    const missing = ["bash", "curl", "jq", "openssl"].filter((tool) => spawnSync(tool, ["--version"]).error !== undefined)
    if (missing.length > 0) throw new Error(`The README tour needs ${missing.join(", ")} on PATH`)
    // Verification must answer "not verified yet" the same way everywhere: a DNS server that knows no names.
    dns = await startDnsServer()
    backend = await createBackend()
    server = await startServer({ ...backend.env, WEBHOOK_ALLOW_PRIVATE: "true", DNS_SERVERS: dns.address })
    workDir = fs.mkdtempSync(path.join(os.tmpdir(), "mailroom-readme-tour-"))
    run = await runTour(blocks, { http: server.port, smtp: server.smtpPort, receiver: await freePort() }, workDir, 60_000)
  }, 150_000)

  afterAll(async () => {
    await server?.stop()
    await backend?.dispose()
    await dns?.close()
    if (workDir) fs.rmSync(workDir, { recursive: true, force: true })
  })

  it("runs top to bottom: exit 0", () => {
    expect(run.exitCode, failureReport(run)).toBe(0)
  })

  it("prints every `# → …` answer the README shows, in order", () => {
    const expectations = expectationsOf(blocks).map((e) => ({ ...e, pattern: rewrite(e.pattern, run.ports) }))
    expect(expectations.length).toBeGreaterThanOrEqual(20)
    const output = run.stdout.split("\n").map((line) => line.replace(/\r$/, ""))
    expect(unmet(expectations, output).join("\n\n")).toBe("")
  })

  it("gets 2xx or 3xx for every request but the refusals it shows; SMTP answers 250", () => {
    expect(run.answers.length).toBeGreaterThan(30)
    const refusals = run.answers
      .filter((answer) => !answer.url.startsWith("smtp:") && !(answer.code >= 200 && answer.code < 400))
      .map((answer) => `${answer.code} ${answer.method} ${new URL(answer.url).pathname.replace(/(dom|mbx)_[0-9a-zA-Z]+/, "$1_…")}`)
    expect(refusals).toEqual([
      "404 GET /v1/api/mailboxes/mbx_…/emails",
      "403 GET /v1/api-keys",
      "400 POST /v1/api/domains/dom_…/verify",
      "422 POST /v1/api/mailboxes"
    ])
    const smtp = run.answers.filter((answer) => answer.url.startsWith("smtp:"))
    expect(smtp.map((answer) => answer.code)).toEqual([250, 250])
    // The checkout's confirm step is a POST answered 303, as the payment page's button gets.
    expect(run.answers.some((answer) => answer.code === 303 && /\/billing\/checkout\/pay_co_/.test(answer.url))).toBe(true)
  })

  it("assigns every variable it uses", () => {
    expect(Object.keys(run.variables)).toEqual(expect.arrayContaining(["TOKEN", "KEY", "MBX", "EMAIL", "ATT", "THREAD", "HOOK", "SECRET", "DOM"]))
    const empty = Object.entries(run.variables).filter(([, value]) => value === "" || value === "null").map(([name]) => name)
    expect(empty).toEqual([])
    expect(run.variables.KEY).toMatch(/^mr_/)
    expect(run.variables.EMAIL).toMatch(/^eml_/)
  })

  it("its webhook receiver got a delivery signed with the webhook's secret", () => {
    const body = fs.readFileSync(path.join(workDir, "body.json"))
    const headers = JSON.parse(fs.readFileSync(path.join(workDir, "headers.json"), "utf8")) as Record<string, string>
    expect(verifyWebhook({ secret: run.variables.SECRET!, body, headers, toleranceSeconds: 600 })).toBe(true)
    expect(JSON.parse(body.toString("utf8"))).toMatchObject({
      event: "email.received",
      data: { subject: "Re: Invoice 42", thread_id: run.variables.THREAD }
    })
  })
})
