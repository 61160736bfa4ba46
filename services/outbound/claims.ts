/**
 * One attempt at a time on a delivery (mta.ts). The bus may hand a job out twice at once: redelivered
 * while its first copy still runs (its ack_wait passed, a requeued duplicate), and each copy would
 * send the message. So an attempt claims the rows it tries (`claim`, until `claimed_until`) in the
 * statement that reads them, and keeps the claim alive while it runs; a copy that finds them held goes
 * back to the bus until the claim ends (DeliveryHeld), and then finds them settled, or tries them
 * itself when their attempt's process died.
 *
 * A claim ends with the attempt's record (which clears it), when the attempt fails before its record
 * (released at once), or CLAIM_SECONDS after its process died (renewed no more).
 */
import type { SqlClient } from "@effect/sql"
import { Data, Duration, Effect, Exit } from "effect"
import { newId } from "../accounts/tokens.ts"
import { type ComeBackAfter, ComeBackAfterTypeId } from "../bus/bus.ts"
import { type Backpressure, BackpressureTypeId } from "../health/dependency-health.ts"

/** How long a claim lasts unless renewed; its attempt renews it every third of that. */
export const CLAIM_SECONDS = 30
const RENEWAL = Duration.seconds(CLAIM_SECONDS / 3)

/**
 * Another copy of the job holds its recipients now: this one comes back once that claim has ended, to
 * find them settled (or, its holder dead, to try them). Flow control, not a fault: the bus boundary
 * logs it at debug only.
 */
export class DeliveryHeld extends Data.TaggedError("DeliveryHeld")<{
  readonly emailId: string
  readonly domain: string
  readonly until: Date
}> implements Backpressure, ComeBackAfter {
  readonly [BackpressureTypeId] = true as const
  get [ComeBackAfterTypeId]() {
    // Just past the claim's end, so that a claim not renewed is found ended.
    return Duration.millis(Math.max(0, this.until.getTime() - Date.now()) + 1000)
  }
  override get message() {
    return `delivery of ${this.emailId} to ${this.domain} held by another attempt until ${this.until.toISOString()}`
  }
}

/**
 * SQL: whether the row of the claimed table under `alias` has an attempt under way now (a claim not
 * ended; one whose process died stops counting when it runs out), as a read of the delivery shows it.
 */
export const underWay = (alias: "d" | "f") => `COALESCE(${alias}.claimed_until >= now(), false)`

/** The tables whose rows are claimed: sent mail's recipients and received mail's forwarded copies. */
type ClaimedTable = "outbound_deliveries" | "forward_deliveries"

/**
 * Run `attempt` under a new claim on the email's rows in `table`, which it takes as it reads them (given
 * the claim's id) and ends with its record. Meanwhile the claim is renewed; should the attempt end
 * otherwise (a failure, a defect, an interruption), the claim is given up at once, so that the next copy
 * of the job need not wait for it (after a record it holds nothing more, and this changes nothing).
 */
export const underClaim = <A, E, R>(
  sql: SqlClient.SqlClient,
  table: ClaimedTable,
  emailId: string,
  attempt: (claim: string) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> => {
  const claim = newId("att")
  const renewing = sql`
    UPDATE ${sql(table)} SET claimed_until = now() + make_interval(secs => ${CLAIM_SECONDS})
    WHERE email_id = ${emailId} AND claim = ${claim}`.pipe(
    // A renewal that fails (the database away a moment) is tried again at the next.
    Effect.ignore,
    Effect.delay(RENEWAL),
    Effect.forever
  )
  const release = sql`UPDATE ${sql(table)} SET claim = NULL, claimed_until = NULL WHERE email_id = ${emailId} AND claim = ${claim}`
  return Effect.scoped(
    Effect.forkScoped(renewing).pipe(
      Effect.zipRight(attempt(claim)),
      Effect.onExit((exit) => Exit.isSuccess(exit) ? Effect.void : Effect.ignore(release))
    )
  )
}
