/**
 * One layer per role (api, smtp, worker) over shared infrastructure (SQL, bus, settings).
 * `main` launches the roles the operator asked for.
 */
import { Effect, Layer, Option } from "effect"
import { AccountSettings } from "../services/accounts/settings.ts"
import { HousekeepingLive } from "../services/maintenance/housekeeping.ts"
import * as MemoryBus from "../layers/memory-bus.ts"
import * as NatsBus from "../layers/nats-bus.ts"
import { AppConfig, type AppConfigShape, type Role } from "./config.ts"
import * as Database from "./database.ts"
import { ApiServices, HttpServerLive } from "./http/server.ts"
import { jwtSecret } from "./secrets.ts"

const busLayer = (config: AppConfigShape) =>
  Option.match(config.natsUrl, {
    onSome: (url) => NatsBus.layer({ url, prefix: config.natsPrefix }),
    onNone: () => MemoryBus.layer
  })

const settingsLayer = (config: AppConfigShape) =>
  Layer.effect(AccountSettings, Effect.map(jwtSecret(config), (secret) => ({ jwtSecret: secret })))

const ApiRole = HttpServerLive.pipe(Layer.provide(ApiServices))
const WorkerRole = HousekeepingLive
/** The inbound mail path (SMTP listener, ingest) is the next piece of work; say so rather than idle silently. */
const SmtpRole = Layer.effectDiscard(Effect.logWarning("The smtp role has no listener in this version yet: no mail is received"))

/** Everything this process runs, ready for `Layer.launch`. */
export const appLayer = (config: AppConfigShape) => {
  const infrastructure = Layer.mergeAll(busLayer(config), settingsLayer(config), AppConfig.make(config)).pipe(
    Layer.provideMerge(Database.layer(config))
  )
  const when = <A, E, R>(role: Role, layer: Layer.Layer<A, E, R>) => (config.roles.includes(role) ? layer : Layer.empty)
  const roles = Layer.mergeAll(when("api", ApiRole), when("smtp", SmtpRole), when("worker", WorkerRole))
  return roles.pipe(Layer.provide(infrastructure))
}
