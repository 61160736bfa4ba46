/**
 * The order test files start in: the suites that take a minute or so first, then vitest's own order
 * (the slowest of the last local run first, else the largest files first). From a clean clone, as CI
 * runs, vitest knows no durations: small files with long tests (the CLI's, the database watch's) then
 * started last and ran on alone while the other workers stood idle (70 s of a 10-minute PostgreSQL +
 * NATS run). Longest first packs the workers' queues more evenly. The list is a hint, not a rule: a
 * suite missing from it only starts later.
 */
import { BaseSequencer, type TestSpecification } from "vitest/node"

/** Roughly longest first, as CI measured them (either run). */
const LONG_SUITES = [
  "test/smtp/inbound.test.ts",
  "test/outbound/send.test.ts",
  "test/dashboard/sending.test.ts",
  "test/client-package.test.ts",
  "test/bus.test.ts",
  "test/api/mcp.test.ts",
  "test/cluster/cluster.test.ts",
  "test/ops/cli.test.ts",
  "test/webhooks/delivery.test.ts",
  "test/dashboard/dashboard.test.ts",
  "test/search/crash.test.ts",
  "test/cluster/mta-crash.test.ts",
  "test/domain/database-watch.test.ts",
  "test/cluster/nats-cluster.test.ts",
  "test/cluster/crash.test.ts",
  "test/cluster/outage-logs.test.ts",
  "test/search/search.test.ts"
]

const rank = (file: TestSpecification) => {
  const found = LONG_SUITES.findIndex((suite) => file.moduleId.replaceAll("\\", "/").endsWith(suite))
  return found < 0 ? LONG_SUITES.length : found
}

export default class LongestFirst extends BaseSequencer {
  override async sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
    // Array sort is stable: the rest keep vitest's order.
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b))
  }
}
