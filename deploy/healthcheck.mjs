// The image's HEALTHCHECK (and docker-compose.yml's): node itself, as node:22-slim has no curl.
// Asks the listener this container's roles open, read from the same settings the server reads:
// - with the api role (ROLES unset means every role): GET /healthz on PORT;
// - otherwise, with METRICS_PORT set: GET /healthz there (served beside /metrics and /readyz);
// - otherwise, with the smtp role: a TCP connection to SMTP_PORT is accepted;
// - otherwise the process has no listener to ask, and its being alive is all there is to check.
// Exits 0 when healthy, 1 when not (within 4 s, under Docker's usual 5 s time-out).
import * as net from "node:net"

/** A setting as the server reads it: a variable set to nothing is not set. */
const setting = (name) => (process.env[name]?.trim() ? process.env[name] : undefined)
const roles = (setting("ROLES") ?? "api,smtp,worker,indexer,mta").split(",").map((role) => role.trim())
const port = (name, fallback) => Number(setting(name) ?? fallback)
const TIMEOUT_MS = 4_000

const httpOk = (url) =>
  fetch(url, { signal: AbortSignal.timeout(TIMEOUT_MS) }).then(
    (response) => response.ok,
    () => false
  )

const accepts = (tcpPort) =>
  new Promise((resolve) => {
    const socket = net.connect(tcpPort, "127.0.0.1")
    socket.setTimeout(TIMEOUT_MS, () => {
      socket.destroy()
      resolve(false)
    })
    socket.on("connect", () => {
      socket.destroy()
      resolve(true)
    })
    socket.on("error", () => resolve(false))
  })

let healthy = true
if (roles.includes("api")) {
  healthy = await httpOk(`http://127.0.0.1:${port("PORT", 3000)}/healthz`)
} else if (setting("METRICS_PORT") !== undefined) {
  healthy = await httpOk(`http://127.0.0.1:${port("METRICS_PORT", 0)}/healthz`)
} else if (roles.includes("smtp")) {
  healthy = await accepts(port("SMTP_PORT", 2525))
}
process.exit(healthy ? 0 : 1)
