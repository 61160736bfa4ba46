/** Waiting in tests and benches: a pause, and polling until something holds. */

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/**
 * Poll `probe` until it returns a value (anything but `undefined`); fail once `timeoutMs` has passed,
 * naming `what` (a function is asked at that moment, so it can tell the last state it saw). The
 * pause starts at `intervalMs` and grows by half up to `maxIntervalMs`, so a slow wait costs few probes.
 */
export const until = async <T>(
  what: string | (() => string),
  probe: () => Promise<T | undefined>,
  timeoutMs = 20_000,
  intervalMs = 100,
  maxIntervalMs = intervalMs
): Promise<T> => {
  const deadline = Date.now() + timeoutMs
  let pause = intervalMs
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`${typeof what === "string" ? what : what()}: not reached within ${timeoutMs} ms`)
    await sleep(pause)
    pause = Math.min(maxIntervalMs, pause * 1.5)
  }
}

/**
 * Rate limits count in fixed windows of the clock (a minute from :00, failed logins' quarter hours):
 * start a burst that must fall in one window of `windowSeconds` with `seconds` of it left to finish.
 */
export const awayFromWindowEdge = async (windowSeconds: number, seconds: number) => {
  const into = (Date.now() / 1000) % windowSeconds
  if (into > windowSeconds - seconds) await sleep((windowSeconds + 1 - into) * 1000)
}

/** A burst that must fall in one minute's window (awayFromWindowEdge). */
export const awayFromMinuteEdge = (seconds = 10) => awayFromWindowEdge(60, seconds)
