/**
 * The operator's outbound settings as in-process suites stand them in: no relay, MX on port 25, MX
 * hosts on private addresses allowed (the suites' receiving servers listen on 127.0.0.1; production
 * refuses them, OUTBOUND_ALLOW_PRIVATE), a one-minute retry, 48 hours to give up, short connection
 * time-outs, no DKIM key of the operator's (one is generated and kept in the database). A suite changes
 * what it needs: the key it publishes in its test DNS, the port its receiving server listens on.
 */
import { Duration, Layer, Option } from "effect"
import { OutboundSettings, type OutboundSettingsShape } from "../../services/outbound/settings.ts"

export const outboundSettingsOf = (changes: Partial<OutboundSettingsShape> = {}): OutboundSettingsShape => ({
  relay: Option.none(),
  mxPort: 25,
  allowPrivate: true,
  heloName: "mx.test",
  maxAge: Duration.hours(48),
  retryDelays: [Duration.minutes(1)],
  dkimSelector: "mailroom",
  dkimPrivateKey: Option.none(),
  appUrl: "http://mailroom.test",
  timeouts: { connect: Duration.seconds(5), command: Duration.seconds(5) },
  ...changes
})

export const outboundSettings = (changes: Partial<OutboundSettingsShape> = {}) => Layer.succeed(OutboundSettings, outboundSettingsOf(changes))
