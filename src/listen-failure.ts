/**
 * Why a listener could not start, in the operator's terms: Node says "listen EADDRINUSE: address
 * already in use 127.0.0.1:3000", which names neither the listener nor the setting to change. A
 * process may listen on up to seven ports (HTTP, SMTP, submission, IMAP and their TLS forms, metrics),
 * so the message names the listener, the variables behind its address and what to do.
 */

/** A listener's address and the variables that set it. */
export interface Listener {
  /** How the logs name it: "HTTP", "SMTP", "IMAP". */
  readonly name: string
  readonly host: string
  readonly hostVariable: string
  readonly port: number
  readonly portVariable: string
}

/** What to do about a listen error's code, if it has advice. */
const advice = (listener: Listener, code: string | undefined): string | undefined => {
  switch (code) {
    case "EADDRINUSE":
      return `another process listens on port ${listener.port}: stop it, or set ${listener.portVariable} to a free port`
    case "EACCES":
      return listener.port < 1024
        ? `ports below 1024 need privileges (root, or CAP_NET_BIND_SERVICE): grant them, or set ${listener.portVariable} to 1024 or above`
        : `this user may not listen there: set ${listener.portVariable} to another port`
    case "EADDRNOTAVAIL":
      return `${listener.host} is not an address of this machine: set ${listener.hostVariable} to one of its addresses, 127.0.0.1 or 0.0.0.0 (all)`
    case "ENOTFOUND":
    case "EAI_AGAIN":
    case "EAI_FAIL":
    case "EAI_NONAME":
      return `${listener.host} is no host name that resolves here: set ${listener.hostVariable} to an address of this machine, 127.0.0.1 or 0.0.0.0 (all)`
    default:
      return undefined
  }
}

/** The Node error (with `code`) in `error`'s chain of causes, if any. */
const systemError = (error: unknown): NodeJS.ErrnoException | undefined => {
  let current: unknown = error
  for (let depth = 0; depth < 5 && typeof current === "object" && current !== null; depth++) {
    if (typeof (current as NodeJS.ErrnoException).code === "string") return current as NodeJS.ErrnoException
    current = (current as { readonly cause?: unknown }).cause
  }
  return undefined
}

/**
 * The error to fail with: "SMTP could not listen on 127.0.0.1:2525 (SMTP_HOST, SMTP_PORT): listen
 * EADDRINUSE: address already in use 127.0.0.1:2525. Another process listens on port 2525: stop it, or
 * set SMTP_PORT to a free port".
 */
export const listenFailure = (listener: Listener, error: unknown): Error => {
  const system = systemError(error)
  const reason = system?.message ?? (error instanceof Error ? error.message : String(error))
  const todo = advice(listener, system?.code)
  const where = `${listener.host}:${listener.port} (${listener.hostVariable}, ${listener.portVariable})`
  return new Error(`${listener.name} could not listen on ${where}: ${reason}${todo === undefined ? "" : `. ${todo[0]!.toUpperCase()}${todo.slice(1)}`}`)
}
