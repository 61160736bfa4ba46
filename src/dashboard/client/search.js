/** Search: the hybrid (words and meaning) results, best first, each with its score. */
import { html } from "htm/preact"
import { useEffect, useState } from "preact/hooks"
import { call } from "./api.js"
import { href, keepPageParams, pageParams } from "./router.js"
import { counterpart, Field, LoadFailed, useAction, when } from "./ui.js"

/** SPEC's reading of a score. @param {number} score */
const strength = (score) =>
  score >= 0.9 ? "highly relevant" : score >= 0.7 ? "very relevant" : score >= 0.5 ? "relevant" : score >= 0.3 ? "somewhat relevant" : "weak"

export const SearchPage = () => {
  // The query searched last is kept in the page's URL: back from a result, it is searched again.
  const [text, setText] = useState(() => pageParams().get("q") ?? "")
  const [results, setResults] = useState(/** @type {any[] | null} */ (null))
  const { busy, error, run } = useAction()

  // A failed search leaves no results listed: those shown would be the previous query's.
  const search = (query = text) =>
    run(async () => {
      keepPageParams({ q: query })
      try {
        setResults((await call("POST", "/api/search", { query, limit: 20 })).data)
      } catch (failure) {
        setResults(null)
        throw failure
      }
    })
  useEffect(() => {
    if (text.trim() !== "") search(text)
  }, [])

  return html`
    <h1>Search</h1>
    <form class="card row-form" role="search" onSubmit=${(/** @type {Event} */ e) => (e.preventDefault(), search())}>
      <${Field} id="query" label="Search your mail by words or meaning" type="search" value=${text} onInput=${setText} required />
      <button type="submit" disabled=${busy}>Search</button>
    </form>
    ${error && html`<${LoadFailed} error=${error} onRetry=${() => search()} />`}
    ${results !== null && (results.length === 0 ? html`<p class="muted" role="status">Nothing found.</p>` : html`
      <ol class="list" aria-label="Results">
        ${results.map((result) => {
          const who = counterpart(result)
          return html`
          <li key=${result.email_id} class="item wrap">
            <div class="grow">
              <a href=${href("emails", result.email_id)}><strong>${result.subject || "(no subject)"}</strong></a>
              <div class="muted small"><span title=${who.title}>${who.name}</span> · ${when(result.date)}</div>
              <div class="small">${result.snippet}</div>
            </div>
            <span class="tag" title=${strength(result.score)}>score ${result.score.toFixed(2)}</span>
          </li>`
        })}
      </ol>`)}
  `
}
