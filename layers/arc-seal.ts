/**
 * The ArcSeal port (services/outbound/arc-seal.ts) over mailauth's ARC sealer: it reads the message's
 * ARC chain so far (the new set's instance follows the last one) and signs the new set. No DNS.
 */
import { Effect, Layer } from "effect"
import { sealMessage } from "mailauth"
import { ArcSeal } from "../services/outbound/arc-seal.ts"

export const layer = Layer.succeed(ArcSeal, {
  seal: (raw, { chain, key, results }) =>
    Effect.tryPromise({
      try: () =>
        sealMessage(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength), {
          signingDomain: key.domainName,
          selector: key.keySelector,
          privateKey: key.privateKey.export({ type: "pkcs8", format: "pem" }),
          authResults: results,
          cv: chain
          // The declarations leave out what createSeal reads: the verdicts and the chain's state so far.
        } as Parameters<typeof sealMessage>[1]),
      catch: (error) => (error instanceof Error ? error : new Error(String(error)))
    })
})
