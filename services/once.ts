/**
 * `make`'s answer, made on its first call and kept: for what costs to make and is not always needed
 * (a renderer compiled, a charset's table read, a fact several rules compare).
 */
export const once = <A>(make: () => A): () => A => {
  let made: { readonly value: A } | undefined
  return () => (made ??= { value: make() }).value
}
