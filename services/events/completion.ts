/**
 * Events written by an earlier version, told as this one tells them (SPEC "Events").
 *
 * Events outlive the code that wrote them: the bus keeps them (a week on JetStream) and a worker
 * upgraded while some wait reads what the old version published. Those lack the fields added since:
 * an `email.received` of round one (ae6f099) has no `from_name`, its `email.processed` and
 * `email.labels_changed` neither, and its `api_key.created` no `mailboxIds` or `permission`. The
 * consumers that only act on an event decode what they need (its id) and read the rest from the
 * database; those that pass the event on (webhooks, the event log and with it the event streams)
 * complete it here first, so every receiver gets the payload SPEC describes, whoever wrote it.
 *
 * Only what is missing is filled, and only when something is: an event this version wrote is passed
 * through as it is, with no statement. An email event's missing fields are read from the email (the
 * value it has now: a field added later, such as the From's name, does not change), a key's from what
 * every key was before the field existed. What nothing can tell (an email deleted since) is left to
 * `earlierValues`.
 */
import { SqlClient } from "@effect/sql"
import { Effect, SchemaAST } from "effect"
import { EmailReceived } from "../mail/schemas.ts"
import { emailBodyColumnList, emailColumnList, type EmailBodyRow, type EmailRow, extractedOf, toFields } from "../mail/records.ts"
import { type BusEvent, EventPayloads, type EventKind, isEventKind } from "../webhooks/schemas.ts"

/** The fields of `kind`'s data, in SPEC's order, and those it must have. */
const dataFields = (kind: EventKind) => {
  const data = SchemaAST.getPropertySignatures(EventPayloads[kind].ast).find((field) => field.name === "data")!
  const fields = SchemaAST.getPropertySignatures(data.type)
  return {
    order: fields.map((field) => String(field.name)),
    required: fields.filter((field) => !field.isOptional).map((field) => String(field.name))
  }
}

const fieldsOf = new Map<string, ReturnType<typeof dataFields>>()
const fieldsOfKind = (kind: EventKind) => {
  let found = fieldsOf.get(kind)
  if (found === undefined) fieldsOf.set(kind, found = dataFields(kind))
  return found
}

/** The fields an email event's data takes from the email itself. */
const emailFields: ReadonlySet<string> = new Set(Object.keys(EmailReceived.fields))

/**
 * What an event written before a field existed means by its absence, where nothing stored says
 * better: before keys could be narrowed every key was the whole account's, with every permission;
 * the From's name of an email deleted since is read as none.
 */
const earlierValues: Partial<Record<EventKind, Readonly<Record<string, unknown>>>> = {
  "api_key.created": { mailboxIds: null, permission: "full_access" },
  "email.received": { from_name: null },
  "email.processed": { from_name: null },
  "email.labels_changed": { from_name: null },
  "email.deleted": { from_name: null }
}

type Data = Readonly<Record<string, unknown>>

const isData = (data: unknown): data is Data => typeof data === "object" && data !== null && !Array.isArray(data)

export class EventCompletion extends Effect.Service<EventCompletion>()("mailroom/EventCompletion", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /** The email an event of the account is about, as the API shows it; undefined once it is gone. */
    const emailOf = (userId: string, emailId: string, withExtracted: boolean) =>
      (withExtracted
        ? sql<EmailBodyRow>`SELECT ${sql.literal(emailBodyColumnList)} FROM emails e WHERE e.id = ${emailId} AND e.user_id = ${userId}`
        : sql<EmailRow>`SELECT ${sql.literal(emailColumnList)} FROM emails e WHERE e.id = ${emailId} AND e.user_id = ${userId}`).pipe(
          Effect.map((rows): Data | undefined => {
            const row = rows[0]
            if (row === undefined) return undefined
            return withExtracted ? { ...toFields(row), extracted: extractedOf(row as EmailBodyRow) } : toFields(row)
          })
        )

    /**
     * `event` with the fields of its kind's data that it lacks (written by an earlier version); itself
     * when it lacks none, or is of no kind this version knows.
     */
    const complete = Effect.fn("EventCompletion.complete")(function*(event: BusEvent) {
      if (!isEventKind(event.event) || !isData(event.data)) return event
      const kind = event.event
      const data = event.data
      const { order, required } = fieldsOfKind(kind)
      const missing = required.filter((field) => !(field in data))
      if (missing.length === 0) return event
      const fromEmail = missing.filter((field) => emailFields.has(field))
      const stored = fromEmail.length > 0 && typeof data.email_id === "string"
        ? yield* emailOf(event.namespace, data.email_id, fromEmail.includes("extracted"))
        : undefined
      const earlier = earlierValues[kind] ?? {}
      const filled: Record<string, unknown> = {}
      for (const field of order) {
        if (field in data) filled[field] = data[field]
        else if (stored !== undefined && field in stored) filled[field] = stored[field]
        else if (field in earlier) filled[field] = earlier[field]
      }
      // Fields this version does not know (a later version's) stay as they came.
      for (const field of Object.keys(data)) if (!(field in filled)) filled[field] = data[field]
      const left = required.filter((field) => !(field in filled))
      if (left.length > 0) {
        yield* Effect.logWarning("An event written by an earlier version lacks fields nothing stored can fill; passed on without them", {
          event: kind,
          fields: left
        })
      }
      return { ...event, data: filled }
    })

    return { complete } as const
  })
}) {}
