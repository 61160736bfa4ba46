/**
 * When mail arrived (`received_at`), as lists and search narrow to it: `received_after` (at or after)
 * and `received_before` (strictly before), each a day (2026-12-01, from its start in UTC) or an ISO 8601
 * time with its zone. One day is `received_after=2026-12-01&received_before=2026-12-02`.
 */
import { Effect, Schema } from "effect"
import { ValidationError } from "../errors.ts"
import { isRealTime } from "../outbound/schemas.ts"
import { isRealWallTime } from "../time-zones.ts"
import { rule } from "../schema-rules.ts"

const isDay = (value: string): boolean => {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value)
  return m !== null && isRealWallTime({ year: Number(m[1]), month: Number(m[2]), day: Number(m[3]), hour: 0, minute: 0, second: 0 })
}

/** A bound of arrival, decoded to its moment. */
export const ReceivedBound = Schema.String.pipe(
  rule((value) => isDay(value) || isRealTime(value), {
    message: () => "must be a day (2026-12-01, from its start in UTC) or an ISO 8601 time with a zone (2026-12-01T09:00:00Z)"
  }),
  Schema.transform(Schema.DateFromSelf, {
    strict: true,
    // The filter above has let only a day or a time with its zone through: both parse.
    decode: (value) => new Date(isDay(value) ? `${value}T00:00:00Z` : value),
    encode: (moment) => moment.toISOString()
  })
)

/** What the bounds keep, for their descriptions ("Only …", "Mailroom extension: only …"). */
export const RECEIVED_AFTER = "mail that arrived at or after this: a day (2026-12-01, from its start in UTC) or an ISO 8601 time with a zone"
export const RECEIVED_BEFORE = "mail that arrived before this: a day (2026-12-02, before its start in UTC) or an ISO 8601 time with a zone"

/** A span of arrival: from `after` (inclusive) to `before` (exclusive), either open. */
export interface ReceivedRange {
  readonly after?: Date | undefined
  readonly before?: Date | undefined
}

/** A span that holds no moment is a mistake to say, not a question whose answer is none. */
export const checkRange = (range: ReceivedRange): Effect.Effect<void, ValidationError> =>
  range.after !== undefined && range.before !== undefined && range.before.getTime() <= range.after.getTime()
    ? Effect.fail(ValidationError.field("received_before", "must be later than received_after"))
    : Effect.void
