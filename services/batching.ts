/**
 * Group commit: requests that arrive while a batch is in flight wait and go together in the next
 * one. Under load a burst of N concurrent callers costs one round trip instead of N (fewer queries,
 * fewer system calls, fewer commits); a lone caller goes at once, with no added delay.
 *
 * Every SMTP transaction goes through here twice, so a waiting request is a callback in an array
 * rather than a queue entry and a deferred: one suspension per request and nothing else.
 */
import { Effect, Either, Exit, type Fiber, Runtime, type Scope } from "effect"

export interface GroupCommitOptions<I, O, E> {
  /** The most requests one batch takes. */
  readonly maxBatch: number
  /** Batches in flight at once. */
  readonly parallel: number
  /** Runs one batch; answers one result per request, in request order. */
  readonly run: (batch: ReadonlyArray<I>) => Effect.Effect<ReadonlyArray<O>, E>
}

interface Pending<I, O, E> {
  readonly input: I
  readonly resume: (result: Effect.Effect<O, E>) => void
}

/** A function that submits one request to the batches and waits for its result. */
export const groupCommit = <I, O, E>(
  options: GroupCommitOptions<I, O, E>
): Effect.Effect<(input: I) => Effect.Effect<O, E>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const fork = Runtime.runFork(yield* Effect.runtime<never>())
    const waiting: Array<Pending<I, O, E>> = []
    const inFlight = new Set<Fiber.RuntimeFiber<Exit.Exit<ReadonlyArray<O>, E>>>()
    let closed = false

    /** Start batches while requests wait and a slot is free. */
    const dispatch = () => {
      while (!closed && inFlight.size < options.parallel && waiting.length > 0) {
        const batch = waiting.splice(0, options.maxBatch)
        // The batch's failure is its callers' (each gets it), so the fiber itself ends with the Exit:
        // a failed fiber would also be logged as "unhandled", with a stack trace, once per batch.
        const fiber = fork(Effect.exit(options.run(batch.map((p) => p.input))))
        inFlight.add(fiber)
        fiber.addObserver((done) => {
          inFlight.delete(fiber)
          const exit = Exit.flatten(done)
          if (Exit.isSuccess(exit)) batch.forEach((p, i) => p.resume(Effect.succeed(exit.value[i]!)))
          else batch.forEach((p) => p.resume(Effect.failCause(exit.cause)))
          dispatch()
        })
      }
    }

    // On close, waiting requests are interrupted, and so are the batches in flight (and their callers).
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        closed = true
        for (const pending of waiting.splice(0)) pending.resume(Effect.interrupt)
        return Effect.forEach([...inFlight], (fiber) => fiber.interruptAsFork(fiber.id()), { discard: true })
      })
    )

    return (input: I) =>
      Effect.async<O, E>((resume) => {
        if (closed) return resume(Effect.interrupt)
        const pending: Pending<I, O, E> = { input, resume }
        waiting.push(pending)
        dispatch()
        // A caller interrupted before its batch starts leaves the queue; once sent, it just stops
        // waiting (the batch, shared with others, goes on).
        return Effect.sync(() => {
          const index = waiting.indexOf(pending)
          if (index >= 0) waiting.splice(index, 1)
        })
      })
  })

/**
 * `groupCommit` for requests that may fail on their own (a row the database refuses): a batch that
 * fails is run again a request at a time, so the request that cannot succeed fails alone and the
 * others succeed. A failure that is everyone's (the database is gone) costs one more try each.
 */
export const groupCommitIsolated = <I, O, E>(
  options: GroupCommitOptions<I, O, E>
): Effect.Effect<(input: I) => Effect.Effect<O, E>, never, Scope.Scope> =>
  Effect.map(
    groupCommit<I, Either.Either<O, E>, never>({
      ...options,
      run: (batch) =>
        options.run(batch).pipe(
          Effect.map((results) => results.map((result) => Either.right(result))),
          Effect.catchAll((error) =>
            batch.length === 1
              ? Effect.succeed([Either.left(error)])
              : Effect.forEach(batch, (input) => Effect.either(Effect.map(options.run([input]), (results) => results[0]!)))
          )
        )
    }),
    (submit) => (input: I) => Effect.flatten(submit(input))
  )

/**
 * The rows of `byKey` ordered by key: statements that run concurrently and upsert overlapping rows
 * take those rows' locks in one order, so they queue behind each other instead of deadlocking.
 */
export const inLockOrder = <V>(byKey: ReadonlyMap<string, V>): Array<V> =>
  [...byKey.keys()].sort().map((key) => byKey.get(key)!)
