// The thread that checks inbound messages' SPF, DKIM, DMARC and ARC with mailauth (layers/mailauth.ts),
// so that the ~1.5 ms of CPU a message costs runs beside the SMTP node's event loop, not on it.
//
// It answers { type: "check", id, raw, options } with { type: "checked", id, result } (only the fields
// the verdicts are read from) or { type: "checked", id, error }. mailauth's DNS questions come back to the
// server's thread as { type: "question", id, name, questionType }, answered there through the Dns port
// (DNS_SERVERS, time-outs, the answers kept a minute) with { type: "answer", id, answer } or
// { type: "answer", id, error: { message, code } }; an answer the server keeps carries `until` (ms since
// the epoch), and this thread keeps it as long, so the same sender's next message asks nothing.
//
// One message's questions share one deadline (QUESTIONS_DEADLINE after its check started), and they are
// asked together, not one after another as mailauth would: SPF beside DKIM, the From domain's DMARC record
// and the signatures' keys at once. A question not answered by then is that check's temperror alone, so
// a sender cannot spend the time the other checks need on keys nobody answers for (a forged message with
// a dozen such signatures kept its DMARC fail from being made at all). At most MAX_SIGNATURES DKIM
// signatures are checked, the From domain's first; the keys of the rest are not asked for (temperror).
// Plain JavaScript so that it starts the same under tsx, vitest and a bare node.
import { arc, dkimVerify, spf } from "mailauth"
import getDmarcRecord from "mailauth/lib/dmarc/get-dmarc-record.js"
import tools from "mailauth/lib/tools.js"
import { createRequire } from "node:module"
import { isIP } from "node:net"
import { domainToASCII } from "node:url"
import { parentPort } from "node:worker_threads"

/** The address parser mailauth reads the From with (its own nodemailer's), so both read the same authors. */
const addressparser = createRequire(createRequire(import.meta.url).resolve("mailauth"))("nodemailer/lib/addressparser")

/** The organizational domain (RFC 7489 §3.2) as mailauth reckons it: its own tldts, with its options. */
const tldts = createRequire(createRequire(import.meta.url).resolve("mailauth"))("tldts")
const organizational = (domain) => tldts.getDomain(domain, tools.TLDTS_OPTS) || domain

/**
 * The DMARC record for `domain` (its own, else its organizational domain's) as its tags, `false` when it
 * publishes none, `"temperror"` when the question went unanswered. DMARC itself is evaluated from it in
 * layers/mailauth.ts `verdictOf`: mailauth 4's ignores adkim=s and aspf=s, and fails DMARC whose SPF
 * or DKIM could not be checked.
 */
const dmarcRecord = async (domain, resolver) => {
  let ascii = domain
  try {
    ascii = domainToASCII(domain) || domain
  } catch {
    // Not a name DNS could hold: asked as written, and found nowhere.
  }
  try {
    const record = await getDmarcRecord(ascii, resolver)
    if (!record) return false
    const tag = (name) => (typeof record[name] === "string" ? record[name].trim().toLowerCase() : undefined)
    return { p: tag("p"), sp: tag("sp"), adkim: tag("adkim"), aspf: tag("aspf"), rua: tag("rua"), isOrgRecord: record.isOrgRecord === true }
  } catch {
    return "temperror"
  }
}

/** How long after a check starts its DNS questions may be answered: inside the server thread's 10 s (layers/mailauth.ts). */
const QUESTIONS_DEADLINE = 6_000
/** The DKIM signatures whose keys are asked for; real mail carries one to three. */
const MAX_SIGNATURES = 5
/** The keys of an ARC chain's seals and message signatures asked for. */
const MAX_ARC_KEYS = 10

const questions = new Map()
let nextQuestion = 0
/** Answers the server's thread keeps, by question: { answer } or { error }, with `until`. */
const kept = new Map()
/** As many as the server's thread keeps (services/dns/answers.ts), the oldest dropped first. */
const MAX_KEPT = 10_000

const settle = (reply, { resolve, reject }) =>
  reply.error ? reject(Object.assign(new Error(reply.error.message), { code: reply.error.code })) : resolve(reply.answer)

/** mailauth's resolver: node's `dns.promises.resolve` shape, asked of the server's thread unless kept here. */
const resolver = (name, questionType) =>
  new Promise((resolve, reject) => {
    const key = `${questionType} ${name.toLowerCase()}`
    const known = kept.get(key)
    if (known !== undefined && known.until > Date.now()) return settle(known, { resolve, reject })
    if (known !== undefined) kept.delete(key)
    const id = nextQuestion++
    questions.set(id, { key, resolve, reject })
    parentPort.postMessage({ type: "question", id, name, questionType })
  })

/** A question that failed for another reason than the name having no such records: its answer is unknown, not "none". */
const unanswered = (error) => error?.code !== "ENOTFOUND" && error?.code !== "ENODATA"

const timedOut = (name) => Object.assign(new Error(`${name} was not answered in time`), { code: "ETIMEOUT" })

/**
 * The resolver for one message's checks: each question asked once (the checks share its answer), given
 * up on at the check's deadline, and a DKIM key question only for the keys `keys` allows (others fail as
 * unanswered). `asked.unanswered` tells whether some question went unanswered.
 */
const resolverFor = (asked, expired, keys) => {
  const memo = new Map()
  return (name, questionType) => {
    const key = `${questionType} ${name.toLowerCase()}`
    let answer = memo.get(key)
    if (answer === undefined) {
      const allowed = !/\._domainkey\./i.test(name) || questionType !== "TXT" || keys.has(name.toLowerCase())
      answer = (allowed ? Promise.race([resolver(name, questionType), expired(name)]) : Promise.reject(timedOut(name))).catch((error) => {
        if (unanswered(error)) asked.unanswered = true
        throw error
      })
      // Asked ahead of its reader: its failure is read later, by whoever asks.
      answer.catch(() => {})
      memo.set(key, answer)
    }
    return answer
  }
}

const domainOfAddress = (address) => address.slice(address.lastIndexOf("@") + 1).trim().toLowerCase().replace(/\.$/, "")

/**
 * What the message's header says before it is checked: the From addresses, and the keys worth asking
 * for: those of at most MAX_SIGNATURES DKIM signatures (the From domain's, or its relatives', first) and
 * of its ARC headers.
 */
const preview = (message) => {
  const crlf = message.indexOf("\r\n\r\n")
  const lf = message.indexOf("\n\n")
  const end = crlf !== -1 && (lf === -1 || crlf < lf) ? crlf : lf !== -1 ? lf : message.length
  const rows = tools.parseHeaders(message.subarray(0, end)).parsed
  const value = (row) => {
    const line = row.line.toString("binary")
    return line.slice(line.indexOf(":") + 1)
  }
  const from = rows.filter((row) => row.key === "from").flatMap((row) => addressparser(value(row).trim()).flatMap((a) => (a?.address ? [a.address] : [])))
  const fromDomain = from.length === 1 ? domainOfAddress(from[0]) : undefined
  const keyOf = (row) => {
    const parsed = tools.parseDkimHeaders(row.line.toString("binary")).parsed
    const d = parsed?.d?.value
    const s = parsed?.s?.value
    return typeof d === "string" && typeof s === "string" && d && s ? { domain: d.toLowerCase(), name: `${s}._domainkey.${d}`.toLowerCase() } : undefined
  }
  const related = (domain) => fromDomain !== undefined && (domain === fromDomain || domain.endsWith(`.${fromDomain}`) || fromDomain.endsWith(`.${domain}`))
  const signatures = rows.filter((row) => row.key === "dkim-signature").map(keyOf).filter((key) => key !== undefined)
  const chosen = [...signatures.filter((key) => related(key.domain)), ...signatures.filter((key) => !related(key.domain))].slice(0, MAX_SIGNATURES)
  const sealed = rows.filter((row) => row.key === "arc-seal" || row.key === "arc-message-signature").map(keyOf).filter((key) => key !== undefined).slice(0, MAX_ARC_KEYS)
  return { fromDomain, keys: new Set([...chosen, ...sealed].map((key) => key.name)) }
}

/**
 * mailauth's `authenticate` (SPF, DKIM, ARC, DMARC; no BIMI, no sealing), with its questions asked
 * together under one deadline (the module's comment).
 */
const authenticate = async (message, options, asked) => {
  const { fromDomain, keys } = preview(message)
  let timer
  const expiry = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error("the deadline passed")), QUESTIONS_DEADLINE)
  })
  expiry.catch(() => {})
  const expired = (name) => expiry.catch(() => Promise.reject(timedOut(name)))
  try {
    const resolver = resolverFor(asked, expired, keys)
    // Asked now, read when their checks get to them.
    for (const name of keys) resolver(name, "TXT")
    if (fromDomain !== undefined) resolver(`_dmarc.${fromDomain}`, "TXT")
    const helo = options.helo || options.ip
    const [dkimResult, spfResult] = await Promise.all([
      dkimVerify(message, { resolver, sender: options.sender }),
      spf({ ip: options.ip, helo: helo && isIP(helo) ? `[${helo}]` : helo, sender: options.sender, mta: options.mta, resolver })
    ])
    const arcResult = await arc(dkimResult.arc, { resolver })
    const from = dkimResult.headerFrom ?? []
    const dmarcResult = from.length === 1 ? { record: await dmarcRecord(domainOfAddress(from[0]), resolver) } : false
    return { dkim: dkimResult, spf: spfResult, arc: arcResult, dmarc: dmarcResult }
  } finally {
    clearTimeout(timer)
  }
}

/**
 * mailauth reports every ARC problem as `fail`, a key it could not fetch too (its ARC-Message-Signature
 * then checks as temperror, its ARC-Seal fails with no comment). A chain that could not be checked for
 * want of DNS is temperror here, as SPF and DKIM are: a verdict for the next attempt, not against the mail.
 */
const arcResult = (arc, asked) =>
  arc.status?.result === "fail" &&
    (arc.signature?.status?.result === "temperror" || (arc.status?.comment === undefined && asked.unanswered))
    ? "temperror"
    : arc.status?.result

/** What the verdicts are read from (layers/mailauth.ts `verdictOf`): plain data, whatever else mailauth adds. */
const essentials = (result, asked) => ({
  spf: result.spf === false ? false : { domain: result.spf.domain, status: { result: result.spf.status?.result } },
  dkim: {
    headerFrom: result.dkim?.headerFrom ?? [],
    results: (result.dkim?.results ?? []).map((signature) => ({
      signingDomain: signature.signingDomain,
      selector: signature.selector,
      status: { result: signature.status?.result, comment: signature.status?.comment, aligned: signature.status?.aligned }
    }))
  },
  dmarc: result.dmarc,
  // Every domain DMARC compares with the From's, with its organizational domain.
  organizational: Object.fromEntries(
    [...(result.dkim?.headerFrom ?? []).map(domainOfAddress), ...(result.spf ? [result.spf.domain] : []), ...(result.dkim?.results ?? []).map((s) => s.signingDomain)]
      .filter((domain) => typeof domain === "string" && domain !== "")
      .map((domain) => [domain.toLowerCase().replace(/\.$/, ""), organizational(domain.toLowerCase().replace(/\.$/, ""))])
  ),
  // The sealer of the latest ARC set (its ARC-Seal's d=): mailauth keeps the chain out of the result's own keys.
  arc: result.arc === false ? false : { status: { result: arcResult(result.arc, asked) }, domain: result.arc.chain?.at?.(-1)?.["arc-seal"]?.parsed?.d?.value }
})

parentPort.on("message", async (message) => {
  if (message.type === "answer") {
    const question = questions.get(message.id)
    questions.delete(message.id)
    if (question === undefined) return
    if (message.until !== undefined && message.until > Date.now()) {
      if (kept.size >= MAX_KEPT) kept.delete(kept.keys().next().value)
      kept.set(question.key, message)
    }
    settle(message, question)
    return
  }
  if (message.type !== "check") return
  try {
    const asked = { unanswered: false }
    const raw = Buffer.from(message.raw.buffer, message.raw.byteOffset, message.raw.byteLength)
    const result = await authenticate(raw, message.options, asked)
    parentPort.postMessage({ type: "checked", id: message.id, result: essentials(result, asked) })
  } catch (error) {
    parentPort.postMessage({ type: "checked", id: message.id, error: error instanceof Error ? error.message : String(error) })
  }
})
