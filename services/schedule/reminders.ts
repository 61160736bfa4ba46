/**
 * Reminders of what is on mailboxes' schedules: `REMINDER_MINUTES` before an occurrence starts (a
 * meeting the mailbox organizes, an invitation it has not declined; not a whole day), its mailbox's
 * webhooks and event streams are told (`schedule.reminder`), once, so an agent can join the call or
 * prepare what the meeting needs without polling its schedule.
 *
 * Every worker looks every `EVERY` for what is due; the first to claim an occurrence
 * (`schedule_reminders`) sends its reminder, so a cluster sends one. A reminder the bus refused is
 * unclaimed and tried again at the next look, while the occurrence is still to come; one whose start
 * passed while no worker ran is not sent late.
 */
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Layer, Schedule as Every } from "effect"
import { Bus, encodeJson, subjects } from "../bus/bus.ts"
import { DependencyHealth } from "../health/dependency-health.ts"
import { MINUTE } from "./availability.ts"
import { Schedule } from "./schedule.ts"
import { REMINDER_MINUTES, type ScheduleReminderData } from "./schemas.ts"

/** How often workers look for what is due: a reminder is at most this late. */
const EVERY = Duration.seconds(15)
/** How long a claim is kept past its occurrence's start. */
const KEPT = Duration.days(1)

/** Send the reminders due at `now` that no worker has claimed yet; answers those sent. */
export const remindDue = (now: Date) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const bus = yield* Bus
    const schedule = yield* Schedule
    const due = yield* schedule.startingSoon(now, REMINDER_MINUTES * MINUTE)
    const sent: Array<ScheduleReminderData> = []
    for (const { item, userId, startsAt } of due) {
      const at = new Date(startsAt)
      const claimed = yield* sql`
        INSERT INTO schedule_reminders (mailbox_id, uid, starts_at) VALUES (${item.mailbox_id}, ${item.uid}, ${at})
        ON CONFLICT DO NOTHING RETURNING 1`
      if (claimed.length === 0) continue
      const data: ScheduleReminderData = { ...item, starts_in_minutes: Math.round((startsAt - now.getTime()) / MINUTE) }
      const published = yield* Effect.either(bus.publish(
        subjects.event("schedule.reminder"),
        encodeJson({ event: "schedule.reminder", timestamp: new Date().toISOString(), namespace: userId, data }),
        { msgId: `schedule.reminder:${item.mailbox_id}:${item.uid}:${at.toISOString()}` }
      ))
      if (published._tag === "Left") {
        yield* Effect.logWarning("A schedule reminder was not published; it is tried again", { mailboxId: item.mailbox_id, uid: item.uid, error: published.left })
        yield* sql`DELETE FROM schedule_reminders WHERE mailbox_id = ${item.mailbox_id} AND uid = ${item.uid} AND starts_at = ${at}`
        continue
      }
      sent.push(data)
    }
    yield* sql`DELETE FROM schedule_reminders WHERE starts_at < ${new Date(now.getTime() - Duration.toMillis(KEPT))}`
    return sent
  }).pipe(Effect.withSpan("ScheduleReminders.remindDue"))

/**
 * The worker's reminders: a look for what is due at start, then every `EVERY`. A failed look is
 * reported as other background work reports it (DependencyHealth: an outage is told once, by whoever
 * meets it first, not every 15 s).
 */
export const ScheduleRemindersLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const health = yield* DependencyHealth
    yield* Effect.suspend(() => remindDue(new Date())).pipe(
      Effect.catchAllCause((cause) => health.report("Could not send the schedule's reminders; looking again shortly", cause)),
      Effect.repeat(Every.spaced(EVERY)),
      Effect.forkScoped
    )
  })
)
