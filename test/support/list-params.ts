/**
 * SPEC's common list parameters, refused: the values every list route must answer with 400
 * VALIDATION_ERROR naming the parameter (limit 1-100 and whole, offset >= 0 and whole), plus the
 * `sort` values a suite's route must refuse. One table, so every list route is held to the same rules.
 */
export type ListParam = "limit" | "offset" | "sort"

export const refusedListParams = (...refusedSorts: ReadonlyArray<string>): Array<[ListParam, string]> => [
  ["limit", "0"],
  ["limit", "101"],
  ["limit", "2.5"],
  ["limit", "abc"],
  ["limit", ""],
  // Other spellings of a number are not read as one.
  ["limit", "0x10"],
  ["limit", "1e1"],
  ["offset", "-1"],
  ["offset", "1.5"],
  ...refusedSorts.map((sort): [ListParam, string] => ["sort", sort])
]
