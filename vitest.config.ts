import { defineConfig } from "vitest/config"
import { SUITE_NODE_FLAGS } from "./test/support/process.ts"
import LongestFirst from "./test/support/sequencer.ts"

/**
 * CI runs `npm test` twice: on the embedded defaults, then on PostgreSQL + NATS (`DATABASE_URL`
 * set). Each rule is tested once, at the cheapest level that proves it, so two kinds of suite run in
 * one of the two runs only:
 * - rules that do not depend on the backend (configuration, protocol robustness, input validation),
 *   and the black-box suites of features whose rules test/domain proves in process over both
 *   databases (there the black-box suite proves the HTTP wiring, which is the same on either),
 *   proved in the embedded run;
 * - suites that bring or force their own PostgreSQL and NATS in either run (clusters of processes,
 *   drain, the forced-PostgreSQL suites), proved in the PostgreSQL + NATS run.
 * Suites that decide for themselves (`describe.skipIf(mode …)`) are not listed here.
 */
const backendIndependent = [
  "test/config.test.ts",
  "test/smtp/robustness.test.ts",
  "test/smtp/submission-tls.test.ts",
  "test/api/fuzz.test.ts",
  "test/api/hostile-input.test.ts",
  "test/domain/extraction.test.ts",
  "test/domain/parse.test.ts",
  "test/domain/submitted.test.ts",
  "test/domain/auto-reply-rules.test.ts",
  "test/domain/imap-protocol.test.ts",
  "test/imap/session.test.ts",
  "test/domain/write-behind.test.ts", // memory only
  // The log's order (the same SQL on both databases); on the shared PostgreSQL server another suite's open
  // transaction holds the log's horizon (server-wide) below its events for as long as it runs (CI: past 60 s).
  "test/domain/event-log.test.ts",
  "test/api/webhooks.test.ts",
  "test/dashboard/dashboard.test.ts",
  "test/dashboard/sending.test.ts",
  "test/dashboard/calendar.test.ts",
  "test/outbound/relay.test.ts",
  "test/domain/database-pool.test.ts", // the embedded database's one connection
  "test/told-cache.test.ts", // a bus of its own in memory
  "test/pipeline/priority.test.ts", // a test clock
  "test/search/vector-buffers.test.ts", // a rule over file sizes
  "test/smtp/spam.test.ts", // rspamd's verdict on the SMTP node; what is stored of it is the inbound suite's
  "test/smtp/trust.test.ts", // SPF, DKIM, DMARC and ARC verdicts on the SMTP node; stored: the inbound suite's
  "test/smtp/checks-thread.test.ts", // in process, no database
  "test/search/openai-embedder.test.ts", // an embedder against a stand-in
  "test/search/local-embedder.test.ts",
  "test/search/qdrant-index.test.ts", // against the fake Qdrant
  // pure rules: no database, bus or server at all
  "test/health/dependency-health.test.ts",
  "test/api/infrastructure-errors.test.ts",
  "test/api/payment-pages.test.ts",
  "test/domain/icalendar.test.ts",
  "test/domain/schedule-occurrences.test.ts",
  "test/domain/availability.test.ts",
  "test/domain/time-zones.test.ts",
  "test/domain/totp.test.ts",
  "test/batching.test.ts",
  "test/ids.test.ts",
  "test/load-balancers.test.ts",
  "test/ops/settings.test.ts",
  "test/ops/json-log-line.test.ts",
  "test/smtp/dns-answers.test.ts",
  "test/outbound/dkim-signature.test.ts",
  "test/webhooks/signatures.test.ts",
  "test/api/screened-body.test.ts",
  "test/search/postings.test.ts",
  // wiring of features test/domain covers on both databases
  "test/api/api-keys.test.ts",
  "test/api/auth.test.ts",
  "test/api/checkout.test.ts",
  "test/api/domains.test.ts",
  "test/api/envelope.test.ts",
  "test/api/limited-keys.test.ts",
  "test/api/read-only-keys.test.ts",
  "test/api/mailboxes.test.ts",
  "test/api/openapi.test.ts",
  "test/api/stripe.test.ts",
  "test/api/sender-lists.test.ts",
  "test/imap/imap.test.ts",
  "test/api/mcp.test.ts",
  "test/api/filters.test.ts",
  "test/api/email-change.test.ts",
  "test/api/password-reset.test.ts",
  "test/api/export.test.ts",
  "test/api/account-deletion.test.ts",
  "test/smtp/sender-lists.test.ts",
  "test/outbound/meetings.test.ts",
  "test/outbound/invitations.test.ts",
  "test/outbound/auto-reply.test.ts",
  "test/outbound/submission.test.ts"
]
const bringsItsOwnServices = [
  "test/cluster/cluster.test.ts",
  "test/cluster/nats-cluster.test.ts",
  "test/ops/drain.test.ts",
  "test/search/usage.test.ts",
  "test/smtp/ingest.test.ts",
  "test/outbound/conversation.test.ts"
]

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    exclude: ["**/node_modules/**", ...(process.env.DATABASE_URL ? backendIndependent : bringsItsOwnServices)],
    globalSetup: ["test/support/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Suites start real servers, databases and NATS streams: two files at a time suits 2 cores on the
    // embedded defaults, where the run is bound by the cores (1.76 of 2 busy; with a third file the
    // files' summed time grew by 27%: the run gained little, all of it under more load). On PostgreSQL +
    // NATS four files run at once: there the suites spend much of their time waiting (clusters of
    // processes stopped, killed and restarted, outages waited out; 1.26 cores busy with two files), and
    // the files' summed time stayed the same with a fourth (917 s against 911 s with three) while the
    // run took 248 s, not 320.
    maxWorkers: process.env.DATABASE_URL ? 4 : 2,
    // As many from the start: a worker past the minimum is ended when idle, and tinypool's ending of
    // one can reject unhandled ("Terminating worker thread"), which fails the run (seen with three).
    minWorkers: process.env.DATABASE_URL ? 4 : 2,
    pool: "forks",
    // The suites that take a minute first, so that none is left running alone at the end (sequencer.ts).
    sequence: { sequencer: LongestFirst },
    // Each file in a module graph of its own (isolate), though importing effect, the services and the
    // support code again for each costs ~55 s of CPU a run: with one graph shared by a worker's files,
    // a file's tests sometimes found @effect/vitest's TestClock replaced by the live clock
    // ("testClock.adjust is not a function", "Not a valid effect: undefined"), after some other file
    // had run in that worker (CI: sessions 90 and 92, embedded and PostgreSQL + NATS; which file, and
    // what it leaves behind, not found). The workers run with the flags of the Mailroom processes the
    // suites start: their in-process PGlites' WebAssembly unoptimised (test/support/process.ts
    // `SUITE_NODE_FLAGS` says why).
    poolOptions: { forks: { isolate: true, execArgv: [...SUITE_NODE_FLAGS] } }
  }
})
