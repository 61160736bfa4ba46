/** The parser the metrics tests read `/metrics` with (prom2json's output shape). */
declare module "parse-prometheus-text-format" {
  export interface Sample {
    readonly labels?: Record<string, string>
    /** Counters and gauges. */
    readonly value?: string
    /** Histograms: cumulative counts by upper bound (`le`), plus count and sum. */
    readonly buckets?: Record<string, string>
    readonly count?: string
    readonly sum?: string
  }
  export interface Family {
    readonly name: string
    readonly help: string
    readonly type: "COUNTER" | "GAUGE" | "HISTOGRAM" | "SUMMARY" | "UNTYPED"
    readonly metrics: ReadonlyArray<Sample>
  }
  const parse: (text: string) => Array<Family>
  export default parse
}
