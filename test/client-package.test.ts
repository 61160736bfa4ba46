/**
 * The clients as another project meets them: packages/client is built and packed (`npm pack`), the
 * tarball is installed into a fresh project, a TypeScript program there is type-checked against the
 * package's declarations and run against a started server: the promise client registers, logs in,
 * makes a key and a mailbox; the Effect client lists it and meets a named error; the webhook verifier
 * accepts a signed delivery and refuses a tampered one. The package's README ships, and its examples
 * type-check against it. The generated types must match the contract.
 * Runs once per CI (the PostgreSQL + NATS run, the shorter one): the package is the same whichever
 * database the server uses.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { generateClientTypes, typesFile } from "../scripts/gen-client.ts"
import { signingHeaders } from "../services/webhooks/signatures.ts"
import { repoRoot, useSuiteServer } from "./support/server.ts"
import { mode } from "./support/services.ts"

const packageDir = path.join(repoRoot, "packages/client")
/**
 * Asynchronous on purpose: a synchronous `npm install` blocks this vitest worker's event loop for as
 * long as it takes, and the worker's own calls to the runner then time out ("Timeout calling
 * onTaskUpdate"), which fails the whole run.
 */
const execFileAsync = promisify(execFile)
const run = async (command: string, args: ReadonlyArray<string>, cwd: string) =>
  (await execFileAsync(command, [...args], { cwd, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 })).stdout

/** The consumer: what a user of the package writes, in TypeScript. */
const consumer = `
import { FetchHttpClient } from "@effect/platform"
import { Effect } from "effect"
import * as fs from "node:fs"
import { makeClient } from "mailroom/client"
import { createClient } from "mailroom/fetch-client"
import { verifyWebhook } from "mailroom/webhooks"

const baseUrl = process.argv[2]!
const signed = JSON.parse(fs.readFileSync("signed.json", "utf8")) as { body: string; headers: Record<string, string>; secret: string }

const anonymous = createClient({ baseUrl })
const email = \`packed-\${Date.now()}@example.com\`
const registered = await anonymous.POST("/api/auth/register", { body: { email, password: "correct horse", name: "Packed" } })
if (!registered.data) throw new Error(\`register: \${JSON.stringify(registered.error)}\`)
const login = await anonymous.POST("/api/auth/login", { body: { email, password: "correct horse" } })
if (!login.data) throw new Error(\`login: \${JSON.stringify(login.error)}\`)
const asUser = createClient({ baseUrl, accessToken: login.data.data.accessToken })
const key = await asUser.POST("/v1/api-keys", { body: { name: "packed" } })
if (!key.data) throw new Error(\`key: \${JSON.stringify(key.error)}\`)
const mailroom = createClient({ baseUrl, apiKey: key.data.data.apiKey })
const created = await mailroom.POST("/v1/api/mailboxes", { body: { local_part: \`packed\${Date.now().toString(36)}\`, domain: "agents.localhost" } })
if (!created.data) throw new Error(\`mailbox: \${JSON.stringify(created.error)}\`)
const refused = await mailroom.POST("/v1/api/mailboxes", { body: { local_part: "abc", domain: "agents.localhost" } })
// The declarations carry real types, not \`any\` (the consumer is compiled with skipLibCheck, so a
// declaration that lost an import would otherwise pass unnoticed): each misuse below must be refused.
// @ts-expect-error local_part is a string
void (() => mailroom.POST("/v1/api/mailboxes", { body: { local_part: 42, domain: "agents.localhost" } }))
// @ts-expect-error no such route
void (() => mailroom.GET("/v1/no-such-route"))
// An error's details are typed as its code names them: LOCAL_TOO_SHORT's min_length is a number.
const minLength: number | undefined = refused.error && "error" in refused.error && refused.error.error.code === "LOCAL_TOO_SHORT"
  ? refused.error.error.details?.min_length
  : undefined

const listed = await Effect.runPromise(
  Effect.gen(function*() {
    const client = yield* makeClient({ baseUrl, apiKey: key.data!.data.apiKey })
    const list = yield* client.mailboxes.list({ urlParams: {} })
    const missing = yield* Effect.flip(client.apiKeys.revoke({ path: { id: "key_missing" } }))
    // A free key's 20 requests a minute run out: the refusal says, typed, how long to wait.
    let limited: { tag: string; retryAfter: number } | undefined
    for (let i = 0; i < 25 && limited === undefined; i++) {
      const refused = yield* Effect.flip(client.mailboxes.list({ urlParams: {} })).pipe(Effect.option)
      if (refused._tag === "Some") limited = { tag: refused.value._tag, retryAfter: refused.value._tag === "RateLimited" ? refused.value.retryAfter : -1 }
    }
    // @ts-expect-error a mailbox has no such field
    void list.mailboxes.map((m) => m.no_such_field)
    return { addresses: list.mailboxes.map((m) => m.email_address), missing: missing._tag, limited }
  }).pipe(Effect.provide(FetchHttpClient.layer))
)

console.log(JSON.stringify({
  created: created.data.mailbox.email_address,
  refused: { status: refused.response.status, code: refused.error && "error" in refused.error ? refused.error.error.code : null, minLength },
  listed,
  verified: verifyWebhook({ secret: signed.secret, body: signed.body, headers: signed.headers }),
  tampered: verifyWebhook({ secret: signed.secret, body: signed.body + " ", headers: signed.headers })
}))
`

describe.skipIf(mode !== "postgres")("the client package", () => {
  let url = ""
  useSuiteServer((suite) => (url = suite.url))
  // Made in beforeAll, not here: a skipped suite's body still runs (to collect its tests), its hooks do not.
  let project = ""
  beforeAll(() => {
    project = fs.mkdtempSync(path.join(os.tmpdir(), "mailroom-consumer-"))
  })
  afterAll(() => {
    if (project !== "") fs.rmSync(project, { recursive: true, force: true })
  })

  it("has the types the contract generates today (npm run gen:client)", async () => {
    expect(fs.readFileSync(typesFile, "utf8"), "packages/client/src/openapi.ts is stale: run npm run gen:client").toBe(
      await generateClientTypes()
    )
  })

  it("packs, installs into a fresh project, type-checks and calls the running server", async () => {
    await run("npm", ["run", "build"], packageDir)
    const tarball = (await run("npm", ["pack", "--silent", "--pack-destination", project], packageDir)).trim().split("\n").pop()!
    const root = JSON.parse(fs.readFileSync(path.join(repoRoot, "package.json"), "utf8")) as { dependencies: Record<string, string> }
    fs.writeFileSync(path.join(project, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }))
    await run("npm", [
      "install",
      "--no-audit",
      "--no-fund",
      "--ignore-scripts",
      path.join(project, tarball),
      `effect@${root.dependencies.effect}`,
      `@effect/platform@${root.dependencies["@effect/platform"]}`,
      "@types/node@20"
    ], project)
    // Only the built package is installed: nothing of this repository's sources came along.
    const installed = path.join(project, "node_modules/mailroom")
    expect(fs.existsSync(path.join(installed, "dist/packages/client/src/client.d.ts"))).toBe(true)
    expect(fs.readdirSync(path.join(installed, "dist"), { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts")))
      .toEqual([])

    fs.writeFileSync(path.join(project, "use.ts"), consumer)
    const secret = "whsec_" + Buffer.alloc(32, 7).toString("base64")
    const body = JSON.stringify({ event: "email.received", data: { email_id: "eml_1" } })
    const headers = signingHeaders({ secret, id: "evt_1", timestamp: Math.floor(Date.now() / 1000), body })
    fs.writeFileSync(path.join(project, "signed.json"), JSON.stringify({ secret, body, headers }))

    // The package's README ships with it, and its examples compile against it as written, as the
    // program above does, under the strictest options a user may have (this repository's own among
    // them): one compilation (tsc reads the package's and Effect's declarations once).
    const readme = fs.readFileSync(path.join(installed, "README.md"), "utf8")
    const examples = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1]!)
    expect(examples.length).toBe(3)
    examples.forEach((example, i) => fs.writeFileSync(path.join(project, `readme-${i}.ts`), `export {}\n${example}`))
    fs.writeFileSync(path.join(project, "tsconfig.json"), JSON.stringify({
      compilerOptions: {
        target: "ES2022",
        module: "NodeNext",
        moduleResolution: "NodeNext",
        strict: true,
        exactOptionalPropertyTypes: true,
        outDir: "out",
        types: ["node"],
        skipLibCheck: true
      },
      files: ["use.ts", ...examples.map((_, i) => `readme-${i}.ts`)]
    }))
    await run(process.execPath, [path.join(repoRoot, "node_modules/typescript/bin/tsc"), "-p", project], project)
    const output = JSON.parse((await run(process.execPath, [path.join(project, "out/use.js"), url], project)).trim())
    expect(output.listed.limited.retryAfter).toBeGreaterThan(0)
    expect(output).toEqual({
      created: expect.stringMatching(/^packed[a-z0-9]+@agents\.localhost$/),
      refused: { status: 422, code: "LOCAL_TOO_SHORT", minLength: 5 },
      listed: { addresses: [output.created], missing: "NotFound", limited: { tag: "RateLimited", retryAfter: expect.any(Number) } },
      verified: true,
      tampered: false
    })
  }, 240_000)
})
