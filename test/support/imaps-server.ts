/**
 * A started server (useSuiteServer) that serves IMAP over TLS on a port of its own (IMAPS_PORT), with
 * a certificate made for the suite, for suites that speak IMAP on the wire (imap-wire.ts).
 */
import { beforeAll } from "vitest"
import { useCertificate } from "./certificate.ts"
import { bareImapOverTls } from "./imap-wire.ts"
import { freePort, type SuiteServer, useSuiteServer } from "./server.ts"

export const useImapsServer = (name: string, onReady: (suite: SuiteServer) => void) => {
  const certificate = useCertificate(name)
  let imapsPort: number | undefined
  beforeAll(async () => {
    imapsPort = await freePort()
  })
  useSuiteServer(onReady, {
    ...certificate.env,
    get IMAPS_PORT() {
      return String(imapsPort)
    }
  } as Record<string, string>)
  return {
    /** A bare session to the server over TLS, past its greeting (bareImapOverTls). */
    bareOverTls: () => bareImapOverTls(imapsPort!)
  }
}
