/**
 * The paraphrase set (test/fixtures/paraphrase/mail.json): everyday emails and questions that mean
 * them in other words. Shared by its test (test/search/paraphrase.test.ts) and its benchmark
 * (bench/search-paraphrase.ts): the mail is sent over SMTP, each email's sender names its key, and
 * questions are asked through `POST /v1/search`.
 */
import * as fs from "node:fs"
import nodemailer from "nodemailer"
import { evaluate, type QuerySet } from "./ndcg.ts"
import type { Receiver } from "./receiver.ts"
import { withKey } from "./typed-client.ts"

interface ParaphraseMail {
  readonly emails: ReadonlyArray<{ readonly key: string; readonly from: string; readonly subject: string; readonly text: string }>
  readonly questions: ReadonlyArray<{ readonly question: string; readonly relevant: ReadonlyArray<string> }>
}

export const paraphrases: ParaphraseMail = JSON.parse(
  fs.readFileSync(new URL("../fixtures/paraphrase/mail.json", import.meta.url), "utf8")
)

/** An email's key, from the sender the fixture gave it. */
export const keyOfSender = (from: string) => paraphrases.emails.find((mail) => mail.from === from.toLowerCase())?.key ?? from

export const paraphraseSet: QuerySet = {
  name: "paraphrase",
  queries: paraphrases.questions.map((q, i) => ({ id: String(i), text: q.question })),
  qrels: new Map(paraphrases.questions.map((q, i) => [String(i), new Map(q.relevant.map((key) => [key, 1]))]))
}

/** Send every email to `address` and wait until each is announced as processed at `path`. */
export const sendParaphraseMail = async (smtpPort: number, address: string, receiver: Receiver, path: string) => {
  const transport = nodemailer.createTransport({ host: "127.0.0.1", port: smtpPort, secure: false, ignoreTLS: true })
  for (const mail of paraphrases.emails) await transport.sendMail({ from: mail.from, to: address, subject: mail.subject, text: mail.text })
  transport.close()
  await receiver.waitFor(path, paraphrases.emails.length, 300_000)
}

/** Mean nDCG@10 of the questions asked through `POST /v1/search` in `mode`. */
export const paraphraseNdcg = async (baseUrl: string, apiKey: string, mode: "hybrid" | "text" | "vector") => {
  let total = 0
  for (const query of paraphraseSet.queries) {
    const reply = await withKey(baseUrl, { apiKey }).POST("/v1/search", { body: { query: query.text, limit: 10, mode } })
    if (reply.response.status !== 200 || !reply.data) throw new Error(`search answered ${reply.response.status}: ${JSON.stringify(reply.error)}`)
    const ranked = reply.data.data.map((r) => keyOfSender(r.from))
    total += evaluate(ranked, paraphraseSet.qrels.get(query.id)!).ndcg
  }
  return total / paraphraseSet.queries.length
}
