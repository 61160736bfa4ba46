/**
 * A Server-Sent Events reader for tests: `fetch` with the body read as it streams, parsed into
 * frames as the SSE specification defines them (fields `id`, `event`, `data`, `retry`; `:` comments).
 */
export interface SseFrame {
  readonly id?: string
  readonly event?: string
  readonly data?: string
  readonly retry?: number
  /** A comment frame (a heartbeat). */
  readonly comment?: string
}

export interface SseStream {
  readonly status: number
  readonly headers: Headers
  /** The error envelope, when the stream was refused. */
  readonly body: unknown
  /** The next frame that is an event (comments and retry hints are kept in `seen`). */
  readonly next: (timeoutMs?: number) => Promise<SseFrame>
  /** Events arriving within `ms`, none expected beyond them. */
  readonly drain: (ms: number) => Promise<ReadonlyArray<SseFrame>>
  /** Every frame so far, comments included. */
  readonly seen: () => ReadonlyArray<SseFrame>
  readonly close: () => void
}

const parse = (block: string): SseFrame => {
  const frame: Record<string, string | number> = {}
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) frame.comment = line.slice(1).trim()
    const at = line.indexOf(":")
    if (at <= 0) continue
    const field = line.slice(0, at)
    const value = line.slice(at + 1).replace(/^ /, "")
    if (field === "retry") frame.retry = Number(value)
    else if (field === "data") frame.data = frame.data === undefined ? value : `${frame.data}\n${value}`
    else frame[field] = value
  }
  return frame as SseFrame
}

export const openEvents = async (url: string, headers: Record<string, string>): Promise<SseStream> => {
  const controller = new AbortController()
  const response = await fetch(url, { headers: { accept: "text/event-stream", ...headers }, signal: controller.signal })
  if (!response.headers.get("content-type")?.startsWith("text/event-stream")) {
    const body = await response.json()
    return {
      status: response.status,
      headers: response.headers,
      body,
      next: () => Promise.reject(new Error(`refused with ${response.status}`)),
      drain: async () => [],
      seen: () => [],
      close: () => controller.abort()
    }
  }
  const frames: Array<SseFrame> = []
  const events: Array<SseFrame> = []
  const waiters: Array<() => void> = []
  let ended = false
  void (async () => {
    const decoder = new TextDecoder()
    let buffer = ""
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true })
        let end: number
        while ((end = buffer.indexOf("\n\n")) !== -1) {
          const frame = parse(buffer.slice(0, end))
          buffer = buffer.slice(end + 2)
          frames.push(frame)
          if (frame.data !== undefined) events.push(frame)
          for (const wake of waiters.splice(0)) wake()
        }
      }
    } catch {
      // aborted by close()
    }
    ended = true
    for (const wake of waiters.splice(0)) wake()
  })()
  const wait = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms)
      waiters.push(() => {
        clearTimeout(timer)
        resolve()
      })
    })
  let taken = 0
  return {
    status: response.status,
    headers: response.headers,
    body: undefined,
    next: async (timeoutMs = 20_000) => {
      const deadline = Date.now() + timeoutMs
      while (events.length <= taken) {
        if (ended) throw new Error("the stream ended")
        const left = deadline - Date.now()
        if (left <= 0) throw new Error(`no event within ${timeoutMs} ms`)
        await wait(left)
      }
      return events[taken++]!
    },
    drain: async (ms) => {
      await new Promise((resolve) => setTimeout(resolve, ms))
      const rest = events.slice(taken)
      taken = events.length
      return rest
    },
    seen: () => [...frames],
    close: () => controller.abort()
  }
}
