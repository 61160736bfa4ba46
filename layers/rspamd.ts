/**
 * The SpamFilter port over rspamd's HTTP protocol (`POST /checkv2`, the message as the body and the
 * envelope in headers). Any failure (refused, slow, an answer that is not rspamd's) is an
 * `unchecked` verdict and a warning: the message is kept either way. Without RSPAMD_URL, `none`.
 */
import { Duration, Effect, Layer, Schema } from "effect"
import { SpamFilter, type ScannedMessage, unchecked } from "../services/mail/spam.ts"

/** How long rspamd may take over one message (it does DNS look-ups of its own). */
const CHECK_TIMEOUT = Duration.seconds(10)

const Answer = Schema.Struct({
  score: Schema.Number,
  action: Schema.String,
  symbols: Schema.optionalWith(Schema.Record({ key: Schema.String, value: Schema.Unknown }), { default: () => ({}) })
})

export const layer = (options: { readonly url: string; readonly hostname: string }): Layer.Layer<SpamFilter> =>
  Layer.succeed(SpamFilter, {
    check: (message: ScannedMessage) =>
      Effect.tryPromise(async (signal) => {
        const headers = new Headers({ IP: message.clientIp, From: message.mailFrom, Hostname: options.hostname })
        if (message.helo) headers.set("Helo", message.helo)
        for (const recipient of message.recipients) headers.append("Rcpt", recipient)
        const response = await fetch(`${options.url}/checkv2`, {
          method: "POST",
          headers,
          body: message.raw,
          signal: AbortSignal.any([signal, AbortSignal.timeout(Duration.toMillis(CHECK_TIMEOUT))])
        })
        if (!response.ok) throw new Error(`rspamd answered ${response.status}`)
        return (await response.json()) as unknown
      }).pipe(
        Effect.flatMap(Schema.decodeUnknown(Answer)),
        Effect.map((answer) => ({
          status: "checked" as const,
          score: answer.score,
          action: answer.action,
          symbols: Object.keys(answer.symbols).sort()
        })),
        Effect.catchAll((error) =>
          Effect.as(Effect.logWarning("rspamd could not check a message; it is kept as unchecked", error), unchecked)
        )
      )
  })

/** No RSPAMD_URL: nothing is scored. */
export const none: Layer.Layer<SpamFilter> = Layer.succeed(SpamFilter, { check: () => Effect.succeed(undefined) })
