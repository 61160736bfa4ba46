/**
 * The send path in process (no server, no delivery): Outbound with its drafts, replies, mailboxes, DKIM
 * signing and an in-memory bus, over the suite's database (provided by the caller). Domain suites of
 * what sends mail (send limits, meetings) stand on it.
 */
import { Effect, Layer, Option } from "effect"
import { generateKeyPairSync } from "node:crypto"
import * as MemoryBus from "../../layers/memory-bus.ts"
import { Bus, type BusShape } from "../../services/bus/bus.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { RecipientDirectory } from "../../services/mail/directory.ts"
import { Mailboxes, MailboxSettings } from "../../services/mailboxes/mailboxes.ts"
import { DkimKeys } from "../../services/outbound/dkim.ts"
import { Drafts } from "../../services/outbound/drafts.ts"
import { Replies } from "../../services/outbound/replies.ts"
import { Outbound } from "../../services/outbound/send.ts"
import { outboundSettings } from "./outbound-settings.ts"
import { DOMAIN } from "./seed-mail.ts"

const settings = outboundSettings({
  dkimPrivateKey: Option.some(generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({ type: "pkcs8", format: "pem" }).toString())
})

const mailboxSettings = Layer.succeed(MailboxSettings, { sharedDomains: [DOMAIN], disallowedNames: [] })

/**
 * Outbound, Replies, Drafts, Mailboxes, the bus and DependencyHealth, as the services built on sending need
 * them; the bus in memory, or one a suite makes of it (`over`: one that refuses, say).
 */
export const inProcessOutboundOver = (over: (bus: BusShape) => BusShape) =>
  Layer.merge(Drafts.Default, Mailboxes.Default).pipe(
    Layer.provideMerge(Replies.Default),
    Layer.provideMerge(Outbound.Default),
    Layer.provide(RecipientDirectory.Default),
    Layer.provideMerge(Layer.mergeAll(
      DkimKeys.Default.pipe(Layer.provideMerge(settings)),
      Layer.effect(Bus, Effect.map(Bus, over)).pipe(Layer.provide(MemoryBus.layer)),
      mailboxSettings
    )),
    Layer.provideMerge(DependencyHealth.Default)
  )

export const inProcessOutbound = inProcessOutboundOver((bus) => bus)
