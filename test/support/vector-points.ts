/** Points for VectorIndex tests: 4-dimensional unit vectors placed by their similarity to `QUERY`. */
import type { VectorPoint } from "../../services/search/vector-index.ts"

export const DIMS = 4

/** A unit vector whose cosine similarity to QUERY is `similarity`. */
export const at = (similarity: number): Float32Array => Float32Array.from([similarity, Math.sqrt(1 - similarity ** 2), 0, 0])
export const QUERY = at(1)

export const point = (emailId: string, chunk: number, similarity: number, rest: Partial<VectorPoint> = {}): VectorPoint => ({
  emailId,
  chunk,
  namespace: "ns-a",
  mailboxId: "mb-1",
  domain: "a.example",
  date: new Date("2025-01-02T03:04:05.000Z"),
  vector: at(similarity),
  ...rest
})
