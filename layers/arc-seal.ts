/**
 * The ArcSeal port (services/outbound/arc-seal.ts) over mailauth's ARC sealer: it reads the message's
 * ARC chain so far (the new set's instance follows the last one) and signs the new set. No DNS.
 */
import { Effect, Layer } from "effect"
import type { sealMessage as SealMessage } from "mailauth"
import { ArcSeal } from "../services/outbound/arc-seal.ts"

/**
 * mailauth is loaded by the first seal rather than at every start: it is 2 MB of code (its own HTTP
 * client, Joi, encoding tables) that most processes never use here (its verifiers run in the checks
 * thread, mailauth.ts).
 */
export const layer = Layer.effect(
  ArcSeal,
  Effect.map(
    // A CommonJS package: its exports are `default` (bundled, only there).
    Effect.cached(Effect.tryPromise(() => import("mailauth").then((mailauth) => mailauth.default.sealMessage))),
    (sealer) => ({
      seal: (raw, { chain, key, results }) =>
        Effect.flatMap(sealer, (sealMessage) =>
          Effect.tryPromise({
            try: () =>
              sealMessage(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength), {
                signingDomain: key.domainName,
                selector: key.keySelector,
                privateKey: key.privateKey.export({ type: "pkcs8", format: "pem" }),
                authResults: results,
                cv: chain
                // The declarations leave out what createSeal reads: the verdicts and the chain's state so far.
              } as Parameters<typeof SealMessage>[1]),
            catch: (error) => (error instanceof Error ? error : new Error(String(error)))
          }))
    })
  )
)
