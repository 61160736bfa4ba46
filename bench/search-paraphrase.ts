/**
 * `npm run bench:search-paraphrase`: search on everyday mail asked about in other words
 * (test/fixtures/paraphrase/mail.json: 32 emails, 34 questions that share few or no words with
 * the email they mean).
 *
 * A fresh Mailroom (all roles, embedded defaults, the offline embedder unless OPENAI_BASE_URL or
 * OPENAI_API_KEY is set) receives the emails over SMTP; the questions are asked through
 * `POST /v1/search` in each mode and nDCG@10 printed. Then, the server stopped, the same ranking
 * in-process (bench/search-ranking.ts): round one's ranking (before) against each technique and
 * the product's default (after), and a sweep of meaning's weight. Exit status 1 when the run is invalid.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { upgrade } from "../test/support/billing.ts"
import { newBox } from "../test/support/mailboxes.ts"
import { keyOfSender, paraphraseNdcg, paraphraseSet, sendParaphraseMail } from "../test/support/paraphrase.ts"
import { startServer } from "../test/support/process.ts"
import { startReceiver } from "../test/support/receiver.ts"
import { withKey } from "../test/support/typed-client.ts"
import { DEFAULT_RANKING } from "../services/search/ranker.ts"
import { ablation, openRanking } from "./search-ranking.ts"

const env: Record<string, string> = {}
if (process.env.OPENAI_BASE_URL) {
  env.OPENAI_BASE_URL = process.env.OPENAI_BASE_URL
  env.OPENAI_API_KEY = process.env.OPENAI_API_KEY ?? "unused"
  if (process.env.EMBEDDING_MODEL) env.EMBEDDING_MODEL = process.env.EMBEDDING_MODEL
} else if (process.env.OPENAI_API_KEY) {
  env.OPENAI_API_KEY = process.env.OPENAI_API_KEY
}

const main = async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "mailroom-bench-paraphrase-"))
  const receiver = await startReceiver()
  try {
    const server = await startServer({ ...env, DATA_DIR: dataDir, WEBHOOK_ALLOW_PRIVATE: "true", LOG_LEVEL: "warn" })
    try {
      const box = await newBox(server.url)
      await upgrade(server.url, box.user.apiKey, "enterprise")
      await withKey(server.url, box.user).POST("/v1/api/webhooks", { body: { url: `${receiver.url}/processed`, events: ["email.processed"] } })
      await sendParaphraseMail(server.smtpPort, box.address, receiver, "/processed")
      console.log(`paraphrase set: ${paraphraseSet.queries.length} questions over HTTP, embedder: ${env.OPENAI_API_KEY ? `OpenAI-compatible ${env.EMBEDDING_MODEL ?? "text-embedding-3-small"}` : "the offline model (USE lite)"}`)
      for (const mode of ["text", "vector", "hybrid"] as const) {
        console.log(`  ${mode.padEnd(7)} nDCG@10 ${(await paraphraseNdcg(server.url, box.user.apiKey, mode)).toFixed(3)}`)
      }
    } finally {
      await server.stop()
    }
    const ranking = await openRanking(dataDir, env, (from) => keyOfSender(from))
    try {
      await ablation(ranking, [paraphraseSet])
      // Meaning's weight against words, swept: what the set would choose (the product's is chosen on SciFact's train queries).
      console.log("")
      for (const meaningWeight of [0.3, 0.4, 0.5, 0.6, 0.7, 0.8]) {
        const r = await ranking.run(paraphraseSet, { ...DEFAULT_RANKING, meaningWeight }, "hybrid")
        console.log(`meaning weight ${meaningWeight}: hybrid nDCG@10 ${r.ndcg.toFixed(3)}`)
      }
      // The thesaurus's weight, swept the same way (words alone and hybrid).
      console.log("")
      for (const senses of [1, 2]) {
        for (const weight of [0.1, 0.2, 0.3, 0.5]) {
          const options = { ...DEFAULT_RANKING, thesaurus: { senses, weight } }
          const text = await ranking.run(paraphraseSet, options, "text")
          const hybrid = await ranking.run(paraphraseSet, options, "hybrid")
          console.log(`thesaurus ${senses} sense${senses === 1 ? "" : "s"}, weight ${weight}: text nDCG@10 ${text.ndcg.toFixed(3)}, hybrid ${hybrid.ndcg.toFixed(3)}`)
        }
      }
    } finally {
      await ranking.close()
    }
  } finally {
    await receiver.close()
    fs.rmSync(dataDir, { recursive: true, force: true })
  }
}

await main().catch((error) => {
  console.error(error)
  process.exit(1)
})
