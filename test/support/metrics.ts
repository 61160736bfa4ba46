/**
 * Reading `/metrics` as Prometheus does: the text format parsed by a Prometheus text-format parser,
 * then one sample looked up by metric name and labels.
 */
import parse, { type Family, type Sample } from "parse-prometheus-text-format"

export interface Scrape {
  readonly text: string
  readonly families: ReadonlyArray<Family>
  /** A counter's or gauge's value; 0 when the series does not exist yet. */
  readonly value: (name: string, labels?: Record<string, string>) => number
  /** A histogram's observation count; 0 when the series does not exist yet. */
  readonly count: (name: string, labels?: Record<string, string>) => number
  /** Whether a series of that name (and labels) is exported at all: a counter is from 0, before its first increase. */
  readonly exported: (name: string, labels?: Record<string, string>) => boolean
}

const matches = (sample: Sample, labels: Record<string, string>) =>
  Object.entries(labels).every(([key, value]) => sample.labels?.[key] === value)

export const scrape = async (url: string): Promise<Scrape> => {
  const response = await fetch(url)
  if (response.status !== 200) throw new Error(`${url}: ${response.status}`)
  const contentType = response.headers.get("content-type") ?? ""
  if (!contentType.startsWith("text/plain") || !contentType.includes("version=0.0.4")) {
    throw new Error(`${url}: content-type ${contentType}`)
  }
  const text = await response.text()
  const families = parse(text)
  const samples = (from: ReadonlyArray<Family>, name: string, labels: Record<string, string>) =>
    (from.find((family) => family.name === name)?.metrics ?? []).filter((sample) => matches(sample, labels))
  const sum = (of: ReadonlyArray<Sample>) => of.reduce((total, sample) => total + Number(sample.value ?? 0), 0)
  return {
    text,
    families,
    value: (name, labels = {}) => sum(samples(families, name, labels)),
    exported: (name, labels = {}) => samples(families, name, labels).length > 0,
    // The parser folds a histogram's labelled series into one (it keeps labels for unlabelled
    // histograms only), so a series' `_count` is read by parsing those lines as a family of their own.
    count: (name, labels = {}) => {
      const counts = text.split("\n").filter((line) => line.startsWith(`${name}_count{`) || line.startsWith(`${name}_count `))
      return sum(samples(parse(`# TYPE ${name}_count untyped\n${counts.join("\n")}\n`), `${name}_count`, labels))
    }
  }
}
