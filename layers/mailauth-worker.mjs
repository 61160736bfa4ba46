// The thread that checks inbound messages' SPF, DKIM, DMARC and ARC with mailauth (layers/mailauth.ts),
// so that the ~1.5 ms of CPU a message costs runs beside the SMTP node's event loop, not on it.
//
// It answers { type: "check", id, raw, options } with { type: "checked", id, result } (only the fields
// the verdicts are read from) or { type: "checked", id, error }. mailauth's DNS questions come back to the
// server's thread as { type: "question", id, name, questionType }, answered there through the Dns port
// (DNS_SERVERS, time-outs, the answers kept a minute) with { type: "answer", id, answer } or
// { type: "answer", id, error: { message, code } }; an answer the server keeps carries `until` (ms since
// the epoch), and this thread keeps it as long, so the same sender's next message asks nothing.
// Plain JavaScript so that it starts the same under tsx, vitest and a bare node.
import { authenticate } from "mailauth"
import { parentPort } from "node:worker_threads"

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

/** The resolver for one message's checks: `asked.unanswered` tells whether some question of theirs went unanswered. */
const resolverFor = (asked) => (name, questionType) =>
  resolver(name, questionType).catch((error) => {
    if (unanswered(error)) asked.unanswered = true
    throw error
  })

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
  dmarc: result.dmarc === false ? false : {
    policy: result.dmarc.policy,
    alignment: { spf: { strict: result.dmarc.alignment?.spf?.strict === true } },
    status: { result: result.dmarc.status?.result }
  },
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
    const result = await authenticate(Buffer.from(message.raw.buffer, message.raw.byteOffset, message.raw.byteLength), {
      ...message.options,
      resolver: resolverFor(asked)
    })
    parentPort.postMessage({ type: "checked", id: message.id, result: essentials(result, asked) })
  } catch (error) {
    parentPort.postMessage({ type: "checked", id: message.id, error: error instanceof Error ? error.message : String(error) })
  }
})
