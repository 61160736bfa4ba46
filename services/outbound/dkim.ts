/**
 * DKIM keys: which key signs mail from a domain, and the DNS record that publishes it.
 *
 * Shared domains sign with the operator's key: `DKIM_PRIVATE_KEY` when set, else one generated on
 * first use and kept in the database (`dkim_keys`, owner `shared`), so that every node of a cluster
 * signs with the key the DNS publishes. A custom domain signs with a key of its own, kept the same
 * way under the domain's id. Generating is race-free: the first insert wins and everyone reads it.
 * Each process remembers the keys it has read.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import { createPrivateKey, createPublicKey, generateKeyPair, type KeyObject } from "node:crypto"
import { promisify } from "node:util"
import type { DkimKey } from "./dkim-signature.ts"
import { OutboundSettings } from "./settings.ts"

const generate = promisify(generateKeyPair)

/** Custom domains' selector: dated, so a later rotation can publish a second one beside it. */
export const CUSTOM_DOMAIN_SELECTOR = "mailroom1"

/** A new 2048-bit RSA key (RFC 8301's floor is 1024; 2048 is what receivers expect today), PKCS#8 PEM. */
const newPrivateKey = Effect.promise(() =>
  generate("rsa", { modulusLength: 2048, privateKeyEncoding: { type: "pkcs8", format: "pem" }, publicKeyEncoding: { type: "spki", format: "pem" } })
).pipe(Effect.map(({ privateKey }) => privateKey as string))

/** The TXT value publishing `privateKey`'s public half: `v=DKIM1; k=rsa; p=<base64 SPKI>`. */
export const dkimRecordValue = (privateKey: string | KeyObject): string => {
  const der = createPublicKey(privateKey).export({ type: "spki", format: "der" })
  return `v=DKIM1; k=rsa; p=${Buffer.from(der).toString("base64")}`
}

export interface DkimRecord {
  readonly name: string
  readonly value: string
}

export class DkimKeys extends Effect.Service<DkimKeys>()("mailroom/DkimKeys", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const settings = yield* OutboundSettings

    // Keys never change once kept (an owner's id is never reused), so each process reads one once: a
    // send does not pay a round trip for its signing key.
    const known = new Map<string, { readonly selector: string; readonly privateKey: string }>()
    // Each key parsed once: parsing a PEM costs more than the signature it makes.
    const parsed = new Map<string, KeyObject>()
    const keyObject = (pem: string) => {
      const cached = parsed.get(pem)
      if (cached !== undefined) return cached
      const key = createPrivateKey(pem)
      parsed.set(pem, key)
      return key
    }

    /** The key kept for `owner`, made now if there is none. */
    const stored = (owner: string, selector: string) =>
      Effect.suspend(() => {
        const cached = known.get(owner)
        return cached !== undefined ? Effect.succeed(cached) : Effect.tap(load(owner, selector), (key) => Effect.sync(() => known.set(owner, key)))
      })

    const load = (owner: string, selector: string) =>
      Effect.gen(function*() {
        const found = yield* sql<{ selector: string; privateKey: string }>`SELECT selector, private_key FROM dkim_keys WHERE owner = ${owner}`
        if (found[0]) return found[0]
        const privateKey = yield* newPrivateKey
        yield* sql`INSERT INTO dkim_keys (owner, selector, private_key) VALUES (${owner}, ${selector}, ${privateKey}) ON CONFLICT (owner) DO NOTHING`
        const kept = yield* sql<{ selector: string; privateKey: string }>`SELECT selector, private_key FROM dkim_keys WHERE owner = ${owner}`
        return kept[0]!
      })

    /** The operator's key for the shared domains. */
    const shared = Option.match(settings.dkimPrivateKey, {
      onSome: (privateKey) => Effect.succeed({ selector: settings.dkimSelector, privateKey }),
      onNone: () => stored("shared", settings.dkimSelector)
    })

    /** The signer for mail from `domain`: a custom domain's own key (by `domainId`), else the shared key. */
    const signer = (domain: string, domainId: string | undefined) =>
      Effect.map(domainId === undefined ? shared : stored(domainId, CUSTOM_DOMAIN_SELECTOR), (key): DkimKey => ({
        domainName: domain,
        keySelector: key.selector,
        privateKey: keyObject(key.privateKey)
      }))

    /** The TXT record to publish for `domain`'s key. */
    const record = (domain: string, domainId: string | undefined) =>
      Effect.map(signer(domain, domainId), (key): DkimRecord => ({
        name: `${key.keySelector}._domainkey.${domain}`,
        value: dkimRecordValue(key.privateKey)
      }))

    return { signer, record } as const
  })
}) {}
