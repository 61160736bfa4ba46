/**
 * The word ranking's postings held in memory (ranker.ts, `wordsFromMemory`): per namespace, the
 * postings of the lexemes its searches read, packed in typed arrays, so that ranking a query sums a
 * few tens of thousands of postings in a loop instead of the database grouping them row by row.
 *
 * What is held follows the database, never the other way round: every search reads, in one
 * statement, each chosen lexeme's count of documents (the lexicon) and the postings of documents
 * numbered above the last one held (`search_terms.doc`, in the order documents were indexed).
 * After those are added a lexeme holds exactly its count, or its postings are read whole again:
 * a document numbered below the last one held that committed later, an email forgotten
 * (`Indexer.forget`) or indexed again all show as a count that differs.
 *
 * Bounded by `capacity` postings in all, per process: the lexemes least recently searched go first.
 */

/** One lexeme's postings: parallel arrays, the first `size` entries used, in document order. */
export interface LexemePostings {
  /** The namespace's own number of each email (`NamespacePostings.ids`). */
  emails: Int32Array
  frequencies: Float32Array
  lengths: Int32Array
  size: number
  /** The highest document number (`search_terms.doc`) held, 0 for none. */
  last: number
  used: number
}

export interface NamespacePostings {
  /** Email ids by the namespace's number, and the numbers by id. */
  readonly ids: Array<string>
  readonly numbers: Map<string, number>
  readonly lexemes: Map<string, LexemePostings>
}

/** Postings read from the database for one lexeme, in document order. */
export interface PostingsRead {
  readonly emailIds: ReadonlyArray<string>
  readonly frequencies: ReadonlyArray<number>
  readonly lengths: ReadonlyArray<number>
  readonly last: number
}

/** A lexeme of a query as the ranking weighs it: its postings, and its weight times its IDF. */
export interface ScoredLexeme {
  readonly postings: LexemePostings
  readonly weight: number
}

export interface Scored {
  readonly emailId: string
  readonly bm25: number
}

const grow = <A extends Int32Array | Float32Array>(array: A, size: number, make: (n: number) => A): A => {
  if (array.length >= size) return array
  const next = make(Math.max(size, Math.ceil(array.length * 1.5), 16))
  next.set(array)
  return next
}

export class PostingsMemory {
  private readonly namespaces = new Map<string, NamespacePostings>()
  private held = 0
  private clock = 0

  constructor(readonly capacity: number) {}

  /** Postings held in all, for tests and metrics. */
  get size() {
    return this.held
  }

  private namespace(namespace: string) {
    let found = this.namespaces.get(namespace)
    if (found === undefined) {
      found = { ids: [], numbers: new Map(), lexemes: new Map() }
      this.namespaces.set(namespace, found)
    }
    return found
  }

  /** The lexeme as held (for its `last` document and `size`), or undefined. */
  postingsOf(namespace: string, lexeme: string): LexemePostings | undefined {
    return this.namespaces.get(namespace)?.lexemes.get(lexeme)
  }

  /** Forget a lexeme's postings (its count disagreed with the database's). */
  drop(namespace: string, lexeme: string) {
    const space = this.namespaces.get(namespace)
    const postings = space?.lexemes.get(lexeme)
    if (space === undefined || postings === undefined) return
    space.lexemes.delete(lexeme)
    this.held -= postings.size
    if (space.lexemes.size === 0) this.namespaces.delete(namespace)
  }

  /**
   * Add postings read after the lexeme's `last` document (all of them when it holds none). Answers
   * the lexeme's postings as now held.
   */
  add(namespace: string, lexeme: string, read: PostingsRead): LexemePostings {
    const space = this.namespace(namespace)
    let postings = space.lexemes.get(lexeme)
    if (postings === undefined) {
      const n = read.emailIds.length
      postings = { emails: new Int32Array(n), frequencies: new Float32Array(n), lengths: new Int32Array(n), size: 0, last: 0, used: 0 }
      space.lexemes.set(lexeme, postings)
    }
    const size = postings.size + read.emailIds.length
    postings.emails = grow(postings.emails, size, (n) => new Int32Array(n))
    postings.frequencies = grow(postings.frequencies, size, (n) => new Float32Array(n))
    postings.lengths = grow(postings.lengths, size, (n) => new Int32Array(n))
    for (let i = 0; i < read.emailIds.length; i++) {
      const id = read.emailIds[i]!
      let number = space.numbers.get(id)
      if (number === undefined) {
        number = space.ids.length
        space.ids.push(id)
        space.numbers.set(id, number)
      }
      const at = postings.size + i
      postings.emails[at] = number
      postings.frequencies[at] = read.frequencies[i]!
      postings.lengths[at] = read.lengths[i]!
    }
    this.held += read.emailIds.length
    postings.size = size
    postings.last = Math.max(postings.last, read.last)
    postings.used = ++this.clock
    return postings
  }

  /** Mark lexemes used now (a search read them), so that they are the last to go. */
  touch(postings: LexemePostings) {
    postings.used = ++this.clock
  }

  /**
   * Keep within `capacity`: the least recently used lexemes go, in any namespace, never those of
   * `keep` (the search under way).
   */
  evict(keep: ReadonlySet<LexemePostings>) {
    if (this.held <= this.capacity) return
    const all: Array<{ namespace: string; lexeme: string; postings: LexemePostings }> = []
    for (const [namespace, space] of this.namespaces) {
      for (const [lexeme, postings] of space.lexemes) if (!keep.has(postings)) all.push({ namespace, lexeme, postings })
    }
    all.sort((a, b) => a.postings.used - b.postings.used)
    // Down to nine tenths, so that eviction is not a part of every search at the bound.
    const target = this.capacity * 0.9
    for (const entry of all) {
      if (this.held <= target) break
      this.drop(entry.namespace, entry.lexeme)
    }
  }

  /**
   * BM25's best `depth` emails of a namespace for the given lexemes (each posting's impact
   * f (k1 + 1) / (f + k1 (1 - b + b len / avgLength)) times its lexeme's weight, summed per
   * email), best first, ties by email id: what `exhaustive` (ranker.ts) answers.
   */
  rank(
    namespace: string,
    lexemes: ReadonlyArray<ScoredLexeme>,
    options: { readonly k1: number; readonly b: number; readonly avgLength: number; readonly depth: number }
  ): Array<Scored> {
    const space = this.namespaces.get(namespace)
    if (space === undefined || lexemes.length === 0 || options.depth <= 0) return []
    const { avgLength, b, depth, k1 } = options
    const scores = new Float64Array(space.ids.length)
    const seen = new Uint8Array(space.ids.length)
    const touched: Array<number> = []
    const lengthPart = k1 * b / avgLength
    const constant = k1 * (1 - b)
    for (const { postings, weight } of lexemes) {
      const { emails, frequencies, lengths, size } = postings
      const lift = weight * (k1 + 1)
      for (let i = 0; i < size; i++) {
        const email = emails[i]!
        const f = frequencies[i]!
        scores[email]! += lift * f / (f + constant + lengthPart * lengths[i]!)
        if (seen[email] === 0) {
          seen[email] = 1
          touched.push(email)
        }
      }
    }
    const better = (x: number, y: number) => scores[x]! > scores[y]! || (scores[x] === scores[y] && space.ids[x]! < space.ids[y]!)
    // A heap of the best `depth` so far, its worst at the root.
    const heap: Array<number> = []
    const down = (at: number) => {
      for (;;) {
        const left = 2 * at + 1
        const right = left + 1
        let worst = at
        if (left < heap.length && better(heap[worst]!, heap[left]!)) worst = left
        if (right < heap.length && better(heap[worst]!, heap[right]!)) worst = right
        if (worst === at) return
        ;[heap[at], heap[worst]] = [heap[worst]!, heap[at]!]
        at = worst
      }
    }
    for (const email of touched) {
      if (heap.length < depth) {
        heap.push(email)
        for (let at = heap.length - 1; at > 0;) {
          const parent = (at - 1) >> 1
          if (!better(heap[parent]!, heap[at]!)) break
          ;[heap[at], heap[parent]] = [heap[parent]!, heap[at]!]
          at = parent
        }
      } else if (better(email, heap[0]!)) {
        heap[0] = email
        down(0)
      }
    }
    return heap.sort((x, y) => (better(x, y) ? -1 : 1)).map((email) => ({ emailId: space.ids[email]!, bm25: scores[email]! }))
  }
}
