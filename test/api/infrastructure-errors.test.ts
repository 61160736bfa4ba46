/**
 * Infrastructure failures at the HTTP edge (src/http/infra.ts), in process: which are the client's to
 * retry (503) and which are faults (500).
 */
import { SqlError } from "@effect/sql/SqlError"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { infrastructureFailure } from "../../src/http/infra.ts"

const sqlFailure = (code: string, message: string) =>
  new SqlError({ message: "Failed to execute statement", cause: Object.assign(new Error(message), { code }) })

describe("infrastructure failures", () => {
  it.effect("a statement lost to a deadlock or a serialization failure is 503, to retry at once; another SQL failure is a 500", () =>
    Effect.gen(function*() {
      const answers = yield* Effect.forEach(
        [sqlFailure("40P01", "deadlock detected"), sqlFailure("40001", "could not serialize access"), sqlFailure("42601", "syntax error")],
        (error) => Effect.flip(infrastructureFailure(error))
      )
      expect(answers.map((answer) => [answer.status, answer.code, "retryAfter" in answer ? answer.retryAfter : null])).toEqual([
        [503, "SERVICE_UNAVAILABLE", 1],
        [503, "SERVICE_UNAVAILABLE", 1],
        [500, "INTERNAL_ERROR", null]
      ])
    }).pipe(Effect.provide(DependencyHealth.Default)))
})
