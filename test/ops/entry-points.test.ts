/**
 * The repository's own programs (`npm run screenshots`, `gen:client`, the benches: scripts/ and
 * bench/) run under plain Node with tsx, not under vitest: nothing they import, however deeply, may
 * import vitest, which throws when loaded outside a test run ("Vitest failed to access its internal
 * state"). Read from the sources' import statements, so a support module shared with the suites
 * that gains a vitest hook is caught here rather than by the next person who takes screenshots.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { repoRoot } from "../support/process.ts"

/** An import or re-export that loads its module at run time (not `import type`), or a dynamic import(). */
const IMPORTS = /(?:^|\n)\s*(?:import|export)\s(?!type\s)(?:[^"';]*?\sfrom\s)?\s*["']([^"']+)["']|\bimport\(\s*["']([^"']+)["']\s*\)/g

/** Every package a source file reaches through its relative imports (itself included), by the file that names it. */
const packagesReached = (entry: string): Map<string, string> => {
  const packages = new Map<string, string>()
  const seen = new Set<string>()
  const visit = (file: string) => {
    if (seen.has(file)) return
    seen.add(file)
    for (const match of fs.readFileSync(file, "utf8").matchAll(IMPORTS)) {
      const specifier = match[1] ?? match[2]!
      if (specifier.startsWith(".")) {
        const target = path.resolve(path.dirname(file), specifier)
        if (fs.existsSync(target) && fs.statSync(target).isFile()) visit(target)
      } else if (!packages.has(specifier)) {
        packages.set(specifier, path.relative(repoRoot, file))
      }
    }
  }
  visit(entry)
  return packages
}

const programs = ["scripts", "bench"].flatMap((dir) =>
  fs.readdirSync(path.join(repoRoot, dir))
    .filter((name) => /\.(ts|mjs)$/.test(name))
    .map((name) => path.join(repoRoot, dir, name))
)

describe("the repository's programs", () => {
  it("are found (the walk reads imports)", () => {
    expect(programs.length).toBeGreaterThan(5)
    expect([...packagesReached(path.join(repoRoot, "scripts/screenshots.ts")).keys()]).toContain("playwright-core")
  })

  it.each(programs.map((file) => [path.relative(repoRoot, file), file]))("%s loads outside vitest", (_name, file) => {
    const reached = packagesReached(file)
    const vitest = [...reached].filter(([specifier]) => specifier === "vitest" || specifier.startsWith("vitest/") || specifier === "@effect/vitest")
    expect(vitest.map(([specifier, by]) => `${specifier} (imported by ${by})`)).toEqual([])
  })
})
