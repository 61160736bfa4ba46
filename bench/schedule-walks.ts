/**
 * What a stranger's repeating invitation costs the schedule (services/schedule/occurrences.ts): for each
 * rule below, the worker's one walk when it keeps the calendar (`span`, within WALK_BUDGET_MS) and a
 * schedule request's expansion of a week (`occurrences`), the latter both as requests go (given the kept
 * walk's last repeat: a COUNT walked from near the range) and without it (as before the walk was kept:
 * a COUNT walked from the rule's first repeat, 10,000 steps at most). Each figure is also a ratio against the baseline measured in the same
 * run: a weekly standup's week, what an ordinary event costs a request.
 *
 *   npm run bench:schedule-walks
 */
import * as fs from "node:fs"
import { invitationOf, merge, occurrences, span, WALK_BUDGET_MS } from "../services/schedule/occurrences.ts"

const kept = (...lines: Array<string>) =>
  merge(undefined, invitationOf(["BEGIN:VCALENDAR", "VERSION:2.0", "METHOD:REQUEST", "BEGIN:VEVENT", "UID:bench", ...lines, "END:VEVENT",
    "END:VCALENDAR", ""].join("\r\n"))!)!

const rules: ReadonlyArray<readonly [string, string]> = [
  ["baseline: a weekly standup", kept("DTSTART;TZID=Europe/Paris:20261026T090000", "DURATION:PT15M", "RRULE:FREQ=WEEKLY;BYDAY=MO")],
  ["Outlook's weekly meeting (its zone's rules since 1601)", merge(undefined, invitationOf(fs.readFileSync(
    new URL("../test/fixtures/calendars/outlook-request.ics", import.meta.url), "utf8").replace("COUNT=4;", ""))!)!],
  ["last weekday of the month since 1800, COUNT=10000", kept("DTSTART:18000131T160000Z", "DURATION:PT1H",
    "RRULE:FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1;COUNT=10000")],
  ["second Tuesday since 1700, COUNT=5000", kept("DTSTART:17000112T160000Z", "DURATION:PT1H", "RRULE:FREQ=MONTHLY;BYDAY=2TU;COUNT=5000")],
  ["two rules (last weekday, first Monday) since 1800", kept("DTSTART:18000131T160000Z", "DURATION:PT1H",
    "RRULE:FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1", "RRULE:FREQ=MONTHLY;BYDAY=1MO")],
  ["last weekday since 1800 UNTIL 2100", kept("DTSTART:18000131T160000Z", "DURATION:PT1H",
    "RRULE:FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1;UNTIL=21000101T000000Z")],
  ["last weekday since 29 February 1600", kept("DTSTART:16000229T160000Z", "DURATION:PT1H", "RRULE:FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1")]
]

/** Mean milliseconds of `run` over enough rounds to take about half a second (at least one), after a tenth of one to warm up. */
const timed = (run: () => unknown) => {
  const warm = performance.now()
  do run()
  while (performance.now() - warm < 100)
  let rounds = 0
  const started = performance.now()
  while (rounds < 1 || (performance.now() - started < 500 && rounds < 1_000)) {
    run()
    rounds++
  }
  return (performance.now() - started) / rounds
}

/** The lesser of two `timed` runs of each, alternated: neither pays alone for what warms the other. */
const pair = (a: () => unknown, b: () => unknown) => {
  const first = [timed(a), timed(b)]
  return [Math.min(first[0]!, timed(a)), Math.min(first[1]!, timed(b))] as const
}

const from = new Date("2026-12-28T00:00:00Z")
const to = new Date("2027-01-05T00:00:00Z")
const rows = rules.map(([name, calendar]) => {
  const kept = span(calendar)!
  const [requestMs, beforeMs] = pair(() => occurrences(calendar, from, to, { repeatsUntil: kept.repeatsUntil }), () => occurrences(calendar, from, to))
  return {
    name,
    keepMs: timed(() => span(calendar)),
    requestMs,
    beforeMs,
    shown: occurrences(calendar, from, to, { repeatsUntil: kept.repeatsUntil }).length
  }
})
const baseline = rows[0]!.requestMs
const ms = (n: number) => `${n.toFixed(2).padStart(9)} ms`
const ratio = (n: number) => `${(n / baseline).toFixed(1).padStart(8)}×`
console.log(`walk budget when kept: ${WALK_BUDGET_MS} ms; a request expands ${from.toISOString().slice(0, 10)} to ${to.toISOString().slice(0, 10)}\n`)
console.log(`${"rule".padEnd(52)} ${"kept once".padStart(12)} ${"request".padStart(12)} ${"÷ baseline".padStart(10)} ${"without".padStart(12)} ${"÷ baseline".padStart(10)}  shown`)
for (const row of rows) {
  console.log(`${row.name.padEnd(52)} ${ms(row.keepMs)} ${ms(row.requestMs)} ${ratio(row.requestMs)} ${ms(row.beforeMs)} ${ratio(row.beforeMs)}  ${row.shown}`)
}
