/**
 * Extraction quality (issue 17, item 5): runs the extractor over the corpus in
 * test/fixtures/extraction and prints precision and recall of codes and links (a link counts when
 * its URL and kind are right) and how many reply texts match the expected ones, exactly and with
 * white space normalised; then each difference, and the time per message.
 *
 *   npm run bench:extraction
 */
import { Effect } from "effect"
import { extract } from "../services/mail/extract.ts"
import { parseMessage } from "../services/mail/parse.ts"
import { readCorpus, scoreCorpus } from "../test/support/extraction-corpus.ts"
import * as fs from "node:fs"
import * as path from "node:path"
import { corpusDirectory } from "../test/support/extraction-corpus.ts"

const cases = await Effect.runPromise(readCorpus)
const report = scoreCorpus(cases)
const fixed = (n: number) => n.toFixed(3)

// Time per message: extraction only (the message parsed once beforehand), over a few rounds.
const parsed = await Effect.runPromise(Effect.forEach(cases, (c) => parseMessage(fs.readFileSync(path.join(corpusDirectory, c.file)))))
const rounds = 20
const started = performance.now()
for (let round = 0; round < rounds; round++) for (const message of parsed) extract(message)
const perMessageMs = (performance.now() - started) / (rounds * parsed.length)

console.log(`messages                ${report.messages}`)
console.log(`codes  precision ${fixed(report.codes.precision)}  recall ${fixed(report.codes.recall)}  (tp ${report.codes.truePositives}, fp ${report.codes.falsePositives}, fn ${report.codes.falseNegatives})`)
console.log(`links  precision ${fixed(report.links.precision)}  recall ${fixed(report.links.recall)}  (tp ${report.links.truePositives}, fp ${report.links.falsePositives}, fn ${report.links.falseNegatives})`)
console.log(`reply_text  exact ${report.replies.exact}/${report.replies.scored} (${fixed(report.replies.exact / report.replies.scored)})  normalised ${report.replies.normalised}/${report.replies.scored} (${fixed(report.replies.normalised / report.replies.scored)})`)
console.log(`extraction time         ${perMessageMs.toFixed(2)} ms per message (mean of ${rounds} rounds)`)
if (report.misses.length > 0) console.log(`\ndifferences:\n${report.misses.map((m) => `  ${m}`).join("\n")}`)
