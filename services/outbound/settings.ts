/**
 * The operator's outbound settings (DESIGN.md §4b), as the send path and the mta read them.
 */
import { Context, Duration, type Option } from "effect"

/** `SMTP_RELAY_URL`: every outbound message goes through this server instead of the recipients' MX. */
export interface Relay {
  readonly host: string
  readonly port: number
  /** smtps:// (TLS from the first byte); smtp:// upgrades with STARTTLS when the relay offers it. */
  readonly secure: boolean
  readonly user?: string | undefined
  readonly pass?: string | undefined
}

export interface OutboundSettingsShape {
  readonly relay: Option.Option<Relay>
  /** `OUTBOUND_SMTP_PORT`: the port the mta connects to on MX hosts (25). */
  readonly mxPort: number
  /**
   * `OUTBOUND_ALLOW_PRIVATE`: MX hosts (and a domain's own address, when it has no MX) on loopback,
   * private, link-local and other non-public addresses are connected to (local development, tests).
   * Off, a domain's DNS, which its owner controls, cannot point the mta into our own network. The relay
   * is the operator's own choice and is connected to wherever it is.
   */
  readonly allowPrivate: boolean
  /** `SMTP_HELO_NAME`: the name the mta gives in EHLO (`MX_HOST`). */
  readonly heloName: string
  /** `OUTBOUND_MAX_AGE`: how long a deferred delivery is retried before it fails (48 h). */
  readonly maxAge: Duration.Duration
  /** `OUTBOUND_RETRY_DELAYS`: the waits between attempts; the last one repeats (1, 5, 15, 30 min, then hourly). */
  readonly retryDelays: ReadonlyArray<Duration.Duration>
  /** `DKIM_SELECTOR`: the selector of the shared domains' key (`mailroom`). */
  readonly dkimSelector: string
  /** `DKIM_PRIVATE_KEY`: the shared domains' key (PEM); unset, one is generated and kept in the database. */
  readonly dkimPrivateKey: Option.Option<string>
  /** `APP_URL`: where the unsubscribe links of sent mail point (unsubscribes.ts). */
  readonly appUrl: string
  /** Per-connection time limits towards receiving servers. */
  readonly timeouts: { readonly connect: Duration.Duration; readonly command: Duration.Duration }
}

export class OutboundSettings extends Context.Tag("mailroom/OutboundSettings")<OutboundSettings, OutboundSettingsShape>() {}

export const defaultRetryDelays: ReadonlyArray<Duration.Duration> = [
  Duration.minutes(1),
  Duration.minutes(5),
  Duration.minutes(15),
  Duration.minutes(30),
  Duration.hours(1)
]

/** The wait after the `attempt`-th attempt failed for now (1-based). */
export const retryDelay = (delays: ReadonlyArray<Duration.Duration>, attempt: number): Duration.Duration =>
  delays[Math.min(Math.max(attempt, 1), delays.length) - 1] ?? Duration.hours(1)
