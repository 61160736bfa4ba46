/**
 * Group commit: requests that arrive while a batch is in flight wait and go together in the next
 * one. Under load a burst of N concurrent callers costs one round trip instead of N (fewer queries,
 * fewer system calls, fewer commits); a lone caller goes at once, with no added delay.
 */
import { Deferred, Effect, Exit, Queue, type Scope } from "effect"

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
  readonly result: Deferred.Deferred<O, E>
}

/** A function that submits one request to the batches and waits for its result. */
export const groupCommit = <I, O, E>(
  options: GroupCommitOptions<I, O, E>
): Effect.Effect<(input: I) => Effect.Effect<O, E>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const queue = yield* Effect.acquireRelease(Queue.unbounded<Pending<I, O, E>>(), Queue.shutdown)

    const settle = (batch: ReadonlyArray<Pending<I, O, E>>) =>
      options.run(batch.map((p) => p.input)).pipe(
        Effect.exit,
        Effect.flatMap((exit) =>
          Exit.isFailure(exit)
            ? Effect.forEach(batch, (p) => Deferred.failCause(p.result, exit.cause), { discard: true })
            : Effect.forEach(batch, (p, i) => Deferred.succeed(p.result, exit.value[i]!), { discard: true })
        )
      )

    const worker = Queue.take(queue).pipe(
      Effect.flatMap((first) => Effect.map(Queue.takeUpTo(queue, options.maxBatch - 1), (rest) => [first, ...rest])),
      Effect.flatMap(settle),
      Effect.forever
    )
    yield* Effect.forkScoped(
      Effect.all(Array.from({ length: options.parallel }, () => worker), { concurrency: "unbounded", discard: true })
    )

    return (input: I) =>
      Effect.flatMap(Deferred.make<O, E>(), (result) =>
        Queue.offer(queue, { input, result }).pipe(Effect.zipRight(Deferred.await(result))))
  })
