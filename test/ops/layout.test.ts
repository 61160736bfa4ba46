/**
 * The house's imports point inwards (README "Layout"): domain rules in services/ import neither the
 * adapters in layers/ nor the wiring in src/, and layers/ does not import src/. Read from the sources'
 * import and export lines (dynamic imports too), so that a shortcut across is caught where it is made.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { repoRoot } from "../support/process.ts"

const sources = (dir: string): Array<string> =>
  fs.readdirSync(path.join(repoRoot, dir), { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && /\.(?:ts|mts|mjs)$/.test(entry.name))
    .map((entry) => path.relative(repoRoot, path.join(entry.parentPath, entry.name)))

/** The repository's top folder each relative import of `file` reaches. */
const reached = (file: string): Array<string> => {
  const text = fs.readFileSync(path.join(repoRoot, file), "utf8")
  const specifiers = [...text.matchAll(/(?:\bfrom\s+|\bimport\s*\(\s*|^\s*import\s+)["'](\.[^"']*)["']/gm)].map((match) => match[1]!)
  return specifiers.map((specifier) => path.relative(repoRoot, path.resolve(repoRoot, path.dirname(file), specifier)).split(path.sep)[0]!)
}

const crossing = (dir: string, forbidden: ReadonlyArray<string>) =>
  sources(dir).flatMap((file) => reached(file).filter((top) => forbidden.includes(top)).map((top) => `${file} imports ${top}/`))

describe("layout", () => {
  it("services/ imports neither layers/ nor src/, and layers/ does not import src/", () => {
    expect(crossing("services", ["layers", "src"])).toEqual([])
    expect(crossing("layers", ["src"])).toEqual([])
  })

  it("reads what a file imports, so a crossing would be caught", () => {
    expect(reached(path.join("layers", "smtp-transport.ts"))).toContain("services")
    expect(reached(path.join("src", "app.ts"))).toEqual(expect.arrayContaining(["services", "layers"]))
  })
})
