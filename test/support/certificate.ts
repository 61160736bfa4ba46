/**
 * A self-signed certificate for `localhost` (openssl), made in a directory of the suite's own before its
 * server starts and removed after it: SMTP_TLS_CERT / SMTP_TLS_KEY for suites that test TLS.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll } from "vitest"

/** Register before `useSuiteServer`, so that the files exist when the server starts. */
export const useCertificate = (name: string) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `mailroom-${name}-`))
  const cert = path.join(dir, "cert.pem")
  const key = path.join(dir, "key.pem")
  beforeAll(() => {
    execFileSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-days", "1", "-keyout", key, "-out", cert], {
      stdio: "ignore"
    })
  })
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))
  return { cert, key, env: { SMTP_TLS_CERT: cert, SMTP_TLS_KEY: key } } as const
}
