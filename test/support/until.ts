/** Poll `probe` until it returns a value; fail with `what` once the deadline passes. */
export const until = async <T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 20_000, intervalMs = 100): Promise<T> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`${what}: not reached within ${timeoutMs} ms`)
    await new Promise((resolve) => setTimeout(resolve, intervalMs))
  }
}
