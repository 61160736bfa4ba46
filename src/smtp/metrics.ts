/**
 * The SMTP node's metrics. Replies are counted for what this node decides, labelled by the command
 * answered (`phase`): a refused connection (`connect`), a MAIL FROM refused while draining (`mail`),
 * each RCPT TO (`rcpt`) and each DATA (`data`); not the protocol's routine 220/250 to EHLO, MAIL FROM
 * or QUIT. A transaction is its DATA reply: one 250 there is one message accepted, whatever number of
 * recipients it had. The submission server's (submission.ts) apart, by phase too: each connection it
 * refuses, each AUTH, MAIL FROM, refused RCPT TO and DATA it answers.
 */
import { Metric, MetricBoundaries, MetricLabel } from "effect"

/** The command a reply answers. */
export type SmtpPhase = "connect" | "mail" | "rcpt" | "data"

const connections = Metric.counter("mailroom_smtp_connections_total", {
  description: "SMTP connections opened to this node, admitted or refused",
  incremental: true
})
const replies = Metric.counter("mailroom_smtp_replies_total", {
  description: "SMTP replies to connections, MAIL FROM (draining), RCPT TO and DATA, by command (phase) and reply code",
  incremental: true
})

/** The command a submission reply answers. */
export type SubmissionPhase = "connect" | "auth" | "mail" | "rcpt" | "data"

const submissionReplies = Metric.counter("mailroom_submission_replies_total", {
  description: "SMTP submission replies to connections, AUTH, MAIL FROM, RCPT TO and DATA, by command (phase) and reply code",
  incremental: true
})
const dataBytes = Metric.counter("mailroom_smtp_data_bytes_total", {
  description: "Bytes received in DATA, accepted or not",
  incremental: true
})
const acceptDuration = Metric.histogram(
  "mailroom_smtp_accept_duration_seconds",
  MetricBoundaries.fromIterable([0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]),
  "From the end of DATA to the 250: storing the message and the bus taking it"
)

// Made once per phase and code: Effect finds a series by the identity of its label array.
const phaseCodeLabels = new Map<string, ReadonlyArray<MetricLabel.MetricLabel>>()
const phaseCodeLabel = (phase: SmtpPhase | SubmissionPhase, code: number) => {
  const key = `${phase} ${code}`
  let label = phaseCodeLabels.get(key)
  if (label === undefined) {
    label = [MetricLabel.make("phase", phase), MetricLabel.make("code", String(code))]
    phaseCodeLabels.set(key, label)
  }
  return label
}

/** Called from smtp-server's callbacks, outside any fiber: the unsafe updates are plain map writes. */
export const SmtpMetrics = {
  /**
   * The unlabelled counters, and DATA's 250 and 451 (the runbook's alert on transactions refused for
   * now), exported from 0 as the SMTP node starts, not from its first connection.
   */
  fromZero: () => {
    connections.unsafeUpdate(0, [])
    dataBytes.unsafeUpdate(0, [])
    replies.unsafeUpdate(0, phaseCodeLabel("data", 250))
    replies.unsafeUpdate(0, phaseCodeLabel("data", 451))
  },
  connection: () => connections.unsafeUpdate(1, []),
  reply: (phase: SmtpPhase, code: number) => replies.unsafeUpdate(1, phaseCodeLabel(phase, code)),
  data: (bytes: number) => dataBytes.unsafeUpdate(bytes, []),
  accepted: (seconds: number) => acceptDuration.unsafeUpdate(seconds, [])
} as const

export const SubmissionMetrics = {
  reply: (phase: SubmissionPhase, code: number) => submissionReplies.unsafeUpdate(1, phaseCodeLabel(phase, code))
} as const
