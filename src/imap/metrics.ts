/** The IMAP server's metrics: connections opened, and commands answered by command and status. */
import { Metric, MetricLabel } from "effect"

const connections = Metric.counter("mailroom_imap_connections_total", {
  description: "IMAP connections opened to this node, admitted or refused",
  incremental: true
})
const commands = Metric.counter("mailroom_imap_commands_total", {
  description: "IMAP commands answered, by command and status (OK, NO, BAD)",
  incremental: true
})

/** The commands a client may name; anything else is counted as OTHER (a client cannot grow the label set). */
const known = new Set([
  "CAPABILITY", "NOOP", "CHECK", "LOGOUT", "ID", "STARTTLS", "LOGIN", "AUTHENTICATE", "ENABLE", "NAMESPACE", "SELECT",
  "EXAMINE", "LIST", "LSUB", "STATUS", "SUBSCRIBE", "UNSUBSCRIBE", "CREATE", "DELETE", "RENAME", "APPEND", "IDLE",
  "CLOSE", "UNSELECT", "EXPUNGE", "FETCH", "STORE", "SEARCH", "COPY", "MOVE", "UID FETCH", "UID STORE", "UID SEARCH",
  "UID EXPUNGE", "UID COPY", "UID MOVE", "TOO_LONG", "UNPARSED"
])
const labels = new Map<string, ReadonlyArray<MetricLabel.MetricLabel>>()

/** Called outside any fiber (socket callbacks) as well as in one: the unsafe updates are plain map writes. */
export const ImapMetrics = {
  connection: () => connections.unsafeUpdate(1, []),
  command: (name: string, status: "OK" | "NO" | "BAD") => {
    const key = `${known.has(name) ? name : "OTHER"} ${status}`
    let label = labels.get(key)
    if (label === undefined) {
      label = [MetricLabel.make("command", known.has(name) ? name : "OTHER"), MetricLabel.make("status", status)]
      labels.set(key, label)
    }
    commands.unsafeUpdate(1, label)
  }
} as const
