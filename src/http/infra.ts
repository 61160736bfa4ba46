/**
 * Infrastructure failures at the HTTP edge: a database or bus that cannot be reached, or a statement
 * the database gave up for concurrent ones (a deadlock), is a 503 the client may retry; any other SQL
 * or bus failure is a bug, logged here and answered with a bare 500.
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Cause, Effect } from "effect"
import type { BusError } from "../../services/bus/bus.ts"
import { DependencyHealth, isTransientConflict } from "../../services/health/dependency-health.ts"
import { InternalError, ServiceUnavailable } from "../../services/errors.ts"
import { conflictedRetry, isUnavailable } from "./errors.ts"

const isInfrastructure = (error: unknown): error is SqlError | BusError =>
  typeof error === "object" && error !== null && "_tag" in error &&
  (error._tag === "SqlError" || error._tag === "BusError")

export const infrastructureFailure = (
  error: SqlError | BusError
): Effect.Effect<never, ServiceUnavailable | InternalError, DependencyHealth> =>
  isUnavailable(error)
    // Counted towards the outage, which is logged once when it starts and once when it ends.
    ? Effect.zipRight(
      Effect.flatMap(DependencyHealth, (health) => health.report("Dependency unavailable", Cause.fail(error))),
      Effect.fail(ServiceUnavailable.of())
    )
    : isTransientConflict(error)
    ? Effect.zipRight(Effect.logWarning("A request lost a deadlock; answered 503", error), Effect.fail(conflictedRetry()))
    : Effect.zipRight(Effect.logError("Unexpected infrastructure failure", error), Effect.fail(InternalError.of()))

export const orUnavailable = <A, E, R>(
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, Exclude<E, SqlError | BusError> | ServiceUnavailable | InternalError, R | DependencyHealth> =>
  Effect.catchIf(
    effect,
    isInfrastructure,
    infrastructureFailure
  ) as Effect.Effect<A, Exclude<E, SqlError | BusError> | ServiceUnavailable | InternalError, R | DependencyHealth>
