/**
 * The word ranking's postings held in memory (ranker.ts, `reading: "memory"`): per namespace, the
 * postings of the lexemes its searches read, packed in typed arrays in document order, so that
 * ranking a query merges a few tens of thousands of postings in a loop instead of the database
 * grouping them row by row.
 *
 * Postings name documents by their number (`search_documents.doc`, given in the order documents are
 * indexed): numbers parse and compare cheaply, and a lexeme's postings read in number order stay in
 * order as later documents are added. Emails are named only for the best of a ranking
 * (`emailIdsOf`, remembered per namespace).
 *
 * What is held follows the database, never the other way round: every search reads, in one
 * statement, each chosen lexeme's count of documents (the lexicon) and its postings of documents
 * numbered above the last one held. After those are added a lexeme holds exactly its count, or its
 * postings are read whole again: a document numbered below the last one held that committed later,
 * an email forgotten (`Indexer.forget`) or indexed again all show as a count that differs.
 *
 * Bounded by `capacity` postings in all, per process: the lexemes least recently searched go first.
 */

/** One lexeme's postings: parallel arrays, the first `size` entries used, in increasing document number. */
export interface LexemePostings {
  documents: Float64Array
  frequencies: Float32Array
  lengths: Int32Array
  size: number
  used: number
}

/** Postings read from the database for one lexeme, in increasing document number. */
export interface PostingsRead {
  readonly documents: ReadonlyArray<number>
  readonly frequencies: ReadonlyArray<number>
  readonly lengths: ReadonlyArray<number>
}

/**
 * A lexeme of a query as the ranking weighs it: its postings, its weight times its IDF, and whether
 * it is one of the query's own (not one feedback or the thesaurus added; false unless said).
 */
export interface ScoredLexeme {
  readonly postings: LexemePostings
  readonly weight: number
  readonly original?: boolean
}

export interface ScoredDocument {
  readonly document: number
  readonly bm25: number
  /** How many of the query's own lexemes (`ScoredLexeme.original`) it holds. */
  readonly originals: number
}

/** Email ids remembered per namespace before they are forgotten all at once (a few MB). */
const EMAIL_IDS_KEPT = 200_000

interface Namespace {
  readonly lexemes: Map<string, LexemePostings>
  emailIds: Map<number, string>
}

const grow = <A extends Float64Array | Float32Array | Int32Array>(array: A, size: number, make: (n: number) => A): A => {
  if (array.length >= size) return array
  const next = make(Math.max(size, Math.ceil(array.length * 1.5), 16))
  next.set(array)
  return next
}

export class PostingsMemory {
  private readonly namespaces = new Map<string, Namespace>()
  private held = 0
  private clock = 0

  constructor(readonly capacity: number) {}

  /** Postings held in all. */
  get size() {
    return this.held
  }

  private namespace(namespace: string) {
    let found = this.namespaces.get(namespace)
    if (found === undefined) {
      found = { lexemes: new Map(), emailIds: new Map() }
      this.namespaces.set(namespace, found)
    }
    return found
  }

  /** A lexeme's postings as held, or undefined. */
  postingsOf(namespace: string, lexeme: string): LexemePostings | undefined {
    return this.namespaces.get(namespace)?.lexemes.get(lexeme)
  }

  /** The highest document number a lexeme holds, 0 for none. */
  lastOf(namespace: string, lexeme: string): number {
    const postings = this.postingsOf(namespace, lexeme)
    return postings === undefined || postings.size === 0 ? 0 : postings.documents[postings.size - 1]!
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
   * Add postings of documents numbered above the lexeme's last (all of them when it holds none).
   * Answers the lexeme's postings as now held, or undefined when the read does not follow on from
   * what is held (then the lexeme is dropped, to be read whole).
   */
  add(namespace: string, lexeme: string, read: PostingsRead): LexemePostings | undefined {
    const space = this.namespace(namespace)
    let postings = space.lexemes.get(lexeme)
    if (postings === undefined) {
      const n = read.documents.length
      postings = { documents: new Float64Array(n), frequencies: new Float32Array(n), lengths: new Int32Array(n), size: 0, used: 0 }
      space.lexemes.set(lexeme, postings)
    }
    const from = postings.size
    const size = from + read.documents.length
    postings.documents = grow(postings.documents, size, (n) => new Float64Array(n))
    postings.frequencies = grow(postings.frequencies, size, (n) => new Float32Array(n))
    postings.lengths = grow(postings.lengths, size, (n) => new Int32Array(n))
    // In number order as read (the index's), else put in it.
    let order: ReadonlyArray<number> | undefined
    for (let i = 1; i < read.documents.length; i++) {
      if (read.documents[i]! <= read.documents[i - 1]!) {
        order = read.documents.map((_, k) => k).sort((x, y) => read.documents[x]! - read.documents[y]!)
        break
      }
    }
    if (from > 0 && read.documents.length > 0 && read.documents[order?.[0] ?? 0]! <= postings.documents[from - 1]!) {
      this.drop(namespace, lexeme)
      return undefined
    }
    for (let i = 0; i < read.documents.length; i++) {
      const k = order === undefined ? i : order[i]!
      postings.documents[from + i] = read.documents[k]!
      postings.frequencies[from + i] = read.frequencies[k]!
      postings.lengths[from + i] = read.lengths[k]!
    }
    this.held += read.documents.length
    postings.size = size
    postings.used = ++this.clock
    return postings
  }

  /** Mark a lexeme used now (a search read it), so that it is among the last to go. */
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

  /** The email ids of documents as remembered for a namespace (undefined where not known). */
  emailIdsOf(namespace: string, documents: ReadonlyArray<number>): Array<string | undefined> {
    const ids = this.namespaces.get(namespace)?.emailIds
    return documents.map((document) => ids?.get(document))
  }

  /** Remember documents' email ids (as read from the database). */
  rememberEmailIds(namespace: string, pairs: ReadonlyArray<readonly [document: number, emailId: string]>) {
    const space = this.namespaces.get(namespace)
    if (space === undefined) return
    if (space.emailIds.size + pairs.length > EMAIL_IDS_KEPT) space.emailIds = new Map()
    for (const [document, emailId] of pairs) space.emailIds.set(document, emailId)
  }

  /**
   * BM25's best `depth` documents for the given lexemes (each posting's impact
   * f (k1 + 1) / (f + k1 (1 - b + b len / avgLength)) times its lexeme's weight, summed per
   * document), best first; of equal scores the latest indexed (the highest number) first.
   */
  rank(
    lexemes: ReadonlyArray<ScoredLexeme>,
    options: { readonly k1: number; readonly b: number; readonly avgLength: number; readonly depth: number }
  ): Array<ScoredDocument> {
    const { avgLength, b, depth, k1 } = options
    const lists = lexemes.filter((lexeme) => lexeme.postings.size > 0)
    if (lists.length === 0 || depth <= 0) return []
    const lengthPart = k1 * b / avgLength
    const constant = k1 * (1 - b)
    const total = lists.reduce((sum, lexeme) => sum + lexeme.postings.size, 0)
    const documents = new Float64Array(total)
    const scores = new Float64Array(total)
    const originals = new Int32Array(total)
    let n = 0
    // Document at a time: the lists' cursors advance together through increasing numbers.
    const cursors = new Int32Array(lists.length)
    for (;;) {
      let next = Infinity
      for (let l = 0; l < lists.length; l++) {
        const postings = lists[l]!.postings
        if (cursors[l]! < postings.size && postings.documents[cursors[l]!]! < next) next = postings.documents[cursors[l]!]!
      }
      if (next === Infinity) break
      let score = 0
      let held = 0
      for (let l = 0; l < lists.length; l++) {
        const { original, postings, weight } = lists[l]!
        const at = cursors[l]!
        if (at < postings.size && postings.documents[at] === next) {
          const f = postings.frequencies[at]!
          score += weight * (k1 + 1) * f / (f + constant + lengthPart * postings.lengths[at]!)
          if (original === true) held++
          cursors[l] = at + 1
        }
      }
      documents[n] = next
      scores[n] = score
      originals[n] = held
      n++
    }
    const least = depthBest(scores, n, depth)
    const top: Array<number> = []
    for (let i = 0; i < n; i++) if (scores[i]! >= least) top.push(i)
    top.sort((x, y) => scores[y]! - scores[x]! || documents[y]! - documents[x]!)
    return top.slice(0, depth).map((i) => ({ document: documents[i]!, bm25: scores[i]!, originals: originals[i]! }))
  }
}

/**
 * The `depth`-th best of the first `n` scores (the worst when there are fewer): a min-heap of
 * scores alone, since ties need no order to find it. Many documents tie (one occurrence of the
 * same words in mail of the same length); only those at least this good are then ordered.
 */
const depthBest = (scores: Float64Array, n: number, depth: number): number => {
  if (n <= depth) {
    let least = Infinity
    for (let i = 0; i < n; i++) least = Math.min(least, scores[i]!)
    return least
  }
  const heap = scores.slice(0, depth)
  const down = (from: number) => {
    let at = from
    const value = heap[at]!
    for (;;) {
      const left = 2 * at + 1
      if (left >= depth) break
      const child = left + 1 < depth && heap[left + 1]! < heap[left]! ? left + 1 : left
      if (heap[child]! >= value) break
      heap[at] = heap[child]!
      at = child
    }
    heap[at] = value
  }
  for (let i = (depth >> 1) - 1; i >= 0; i--) down(i)
  for (let i = depth; i < n; i++) {
    if (scores[i]! > heap[0]!) {
      heap[0] = scores[i]!
      down(0)
    }
  }
  return heap[0]!
}
