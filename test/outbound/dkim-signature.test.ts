/**
 * The DKIM signer (services/outbound/dkim-signature.ts) against an independent verifier (mailauth):
 * messages whose canonical forms differ from their bytes (folded fields, runs of white space, trailing
 * blank lines, an empty body) pass; a changed body, a changed field and a field added in transit fail.
 */
import { Effect } from "effect"
import { dkimVerify } from "mailauth"
import { generateKeyPairSync } from "node:crypto"
import { describe, expect, it } from "vitest"
import { type DkimKey, dkimSign, relaxedBody } from "../../services/outbound/dkim-signature.ts"

const pair = generateKeyPairSync("rsa", { modulusLength: 2048 })
const key: DkimKey = { domainName: "agents.test", keySelector: "sel1", privateKey: pair.privateKey }
const record = `v=DKIM1; k=rsa; p=${pair.publicKey.export({ type: "spki", format: "der" }).toString("base64")}`
const resolver = async (name: string, type: string) => {
  if (name === "sel1._domainkey.agents.test" && type === "TXT") return [[record]]
  throw Object.assign(new Error(`no ${type} for ${name}`), { code: "ENOTFOUND" })
}

const message = (header: ReadonlyArray<string>, body: string) => Buffer.from(`${header.join("\r\n")}\r\n\r\n${body}`, "latin1")

const header = [
  "From: Ann <ann@agents.test>",
  "To: bob@partner.test,\r\n  carol@partner.test",
  "Subject:   Quarterly\t numbers  ",
  "Date: Thu, 26 Nov 2026 10:00:00 +0000",
  "Message-ID: <m1@agents.test>",
  "MIME-Version: 1.0",
  "Content-Type: text/plain; charset=utf-8"
]

const verdict = async (raw: Buffer) => {
  const result = await dkimVerify(raw, { resolver })
  return result.results.map((r) => ({ status: r.status.result, domain: r.signingDomain }))
}

const signed = (raw: Buffer, alsoSigned?: ReadonlyArray<string>) => Effect.runPromise(dkimSign(raw, key, new Date("2026-11-26T10:00:00Z"), alsoSigned))

/** The signed fields' names, as the h= tag lists them (folded where it is long). */
const signedNames = (raw: string) => /; h=([^;]+);/.exec(raw.replace(/\r\n\s+/g, " "))![1]!.split(":").map((name) => name.trim())

describe("DKIM signatures", () => {
  it("pass with folded fields, runs of white space, trailing blank lines, and with an empty body", async () => {
    for (const body of ["Hello  there, \t\r\nsecond line\t\r\n\r\n\r\n", "", "\r\n\r\n", "Latin-1 bytes: caf\xe9\r\n"]) {
      expect(await verdict(await signed(message(header, body)))).toEqual([{ status: "pass", domain: "agents.test" }])
    }
  })

  it("signs every listed field present, and each once more, so one added in transit fails", async () => {
    const raw = (await signed(message([...header, "Received: from somewhere"], "Hi\r\n"))).toString("latin1")
    const h = signedNames(raw)
    expect(h).toEqual([
      "from", "from", "subject", "subject", "date", "date", "message-id", "message-id", "to", "to",
      "mime-version", "mime-version", "content-type", "content-type"
    ])
    expect(raw.replace(/\r\n\s+/g, " ").startsWith("DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=agents.test; s=sel1; t=1795687200;")).toBe(true)
    expect(raw.split("\r\n").every((line) => line.length <= 998)).toBe(true)
    const added = raw.replace("\r\n\r\n", "\r\nSubject: Pay this invoice\r\n\r\n")
    expect((await verdict(Buffer.from(added, "latin1")))[0]!.status).toBe("fail")
  })

  it("fails when the body or a signed field changes, not when an unsigned one does", async () => {
    const raw = (await signed(message([...header, "X-Trace: 1"], "The figures: 42\r\n"))).toString("latin1")
    expect((await verdict(Buffer.from(raw.replace("The figures: 42", "The figures: 43"), "latin1")))[0]!.status).toBe("neutral")
    expect((await verdict(Buffer.from(raw.replace("Quarterly", "Annual"), "latin1")))[0]!.status).toBe("fail")
    expect((await verdict(Buffer.from(raw.replace("X-Trace: 1", "X-Trace: 2"), "latin1")))[0]!.status).toBe("pass")
  })

  it("signs the further fields it is given (a sender's X- fields) as they are: a changed one fails, one added beside them does not", async () => {
    const raw = (await signed(message([...header, "X-Ticket: T-42", "X-Trace: 1"], "Hi\r\n"), ["X-Ticket", "Subject"])).toString("latin1")
    const h = signedNames(raw)
    // Subject is signed once more than it occurs, as ever; X-Ticket once; X-Trace not at all.
    expect(h.filter((name) => name === "subject")).toHaveLength(2)
    expect(h.filter((name) => name === "x-ticket")).toHaveLength(1)
    expect(h).not.toContain("x-trace")
    expect((await verdict(Buffer.from(raw, "latin1")))[0]!.status).toBe("pass")
    expect((await verdict(Buffer.from(raw.replace("X-Ticket: T-42", "X-Ticket: T-43"), "latin1")))[0]!.status).toBe("fail")
    // A filter's own field of that name, added on top (as fields are), leaves the signed one to be found.
    expect((await verdict(Buffer.from(`X-Ticket: spam-filter-note\r\n${raw}`, "latin1")))[0]!.status).toBe("pass")
  })

  it("folds its field so that no line passes 78 characters, however many fields a sender signs: it still passes", async () => {
    const names = Array.from({ length: 25 }, (_, i) => `X-Acme-Agent-Correlation-Identifier-${i}`)
    const raw = (await signed(message([...header, ...names.map((name) => `${name}: ${name.length}`)], "Hi\r\n"), names)).toString("latin1")
    const field = raw.slice(0, raw.indexOf("\r\nFrom:"))
    expect(field.split("\r\n").map((line) => line.length).filter((length) => length > 78)).toEqual([])
    expect(signedNames(raw).filter((name) => name.startsWith("x-acme"))).toEqual(names.map((name) => name.toLowerCase()))
    expect(await verdict(Buffer.from(raw, "latin1"))).toEqual([{ status: "pass", domain: "agents.test" }])
  })

  it("canonicalizes a body as RFC 6376 §3.4.4's examples do", () => {
    expect(relaxedBody(" C \r\nD \t E\r\n\r\n\r\n")).toBe(" C\r\nD E\r\n")
    expect(relaxedBody("")).toBe("")
    expect(relaxedBody("\r\n")).toBe("")
    expect(relaxedBody("no line end")).toBe("no line end\r\n")
  })
})
