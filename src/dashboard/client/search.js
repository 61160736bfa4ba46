/**
 * Search: the hybrid (words and meaning) results, best first, each with its score, a page at a time; in
 * every mailbox or one, from one sender, between two days, weak matches left out unless asked for.
 */
import { html } from "htm/preact"
import { useEffect, useRef, useState } from "preact/hooks"
import { call, fieldError } from "./api.js"
import { addressShown } from "./idn.js"
import { href, keepPageParams, pageParams } from "./router.js"
import {
  arrivedBetween,
  count,
  counterpart,
  DaySpan,
  Field,
  LoadFailed,
  MailboxesUnread,
  narrowedTo,
  useAction,
  useMailboxChoices,
  when
} from "./ui.js"

/** SPEC's reading of a score. @param {number} score */
const strength = (score) =>
  score >= 0.9 ? "highly relevant" : score >= 0.7 ? "very relevant" : score >= 0.5 ? "relevant" : score >= 0.3 ? "somewhat relevant" : "weak"

/** Below this score a result is a weak match (SPEC's bands): left out unless asked for. */
const WEAK = 0.3
const PAGE = 20

/**
 * @typedef {{ query: string, mailboxId: string, weak: boolean, from: string, since: string, until: string }} Asked
 * @typedef {Asked & { results: any[], total: number, ranking?: string }} Found
 */

/** The search the page's URL asks for (`?q=…&mailbox=…&from=…&since=…&until=…&weak=1`). @returns {Asked} */
const askedInUrl = () => {
  const params = pageParams()
  return {
    query: params.get("q") ?? "",
    mailboxId: params.get("mailbox") ?? "",
    weak: params.get("weak") === "1",
    from: params.get("from") ?? "",
    since: params.get("since") ?? "",
    until: params.get("until") ?? ""
  }
}

export const SearchPage = () => {
  // The search last made is kept in the page's URL (`?q=…&mailbox=…&from=…&since=…&until=…&weak=1`): back from a result, it is made again.
  const [first] = useState(askedInUrl)
  const [text, setText] = useState(first.query)
  const [mailboxId, setMailboxId] = useState(first.mailboxId)
  const [weak, setWeak] = useState(first.weak)
  const [from, setFrom] = useState(first.from)
  const [since, setSince] = useState(first.since)
  const [until, setUntil] = useState(first.until)
  const choices = useMailboxChoices()
  const mailboxes = choices.mailboxes
  const [found, setFound] = useState(/** @type {Found | null} */ (null))
  const { busy, error, run } = useAction()
  const more = useAction({ once: true })
  // Searches may overlap (a query typed while one runs, Back between two searches): only the latest one's answer is shown.
  const latest = useRef(0)

  /**
   * A page of `asked`'s results from `offset`; of the ranking a first page named (`ranking`), so that
   * mail indexed meanwhile neither repeats nor skips a result.
   * @param {Asked} asked @param {number} offset @param {string} [ranking]
   */
  const ask = (asked, offset, ranking) =>
    call("POST", "/api/search", {
      query: asked.query,
      limit: PAGE,
      offset,
      ...(ranking === undefined ? {} : { ranking }),
      ...(asked.mailboxId === "" ? {} : { mailbox_id: asked.mailboxId }),
      ...(asked.from.trim() === "" ? {} : { from: asked.from.trim() }),
      ...arrivedBetween(asked.since, asked.until),
      ...(asked.weak ? {} : { min_score: WEAK })
    })

  // A failed search leaves no results listed: those shown would be the previous query's.
  /** @param {Partial<Asked>} [changed] */
  const search = (changed = {}) => {
    const asked = { query: text, mailboxId, weak, from, since, until, ...changed }
    const mine = ++latest.current
    return run(async () => {
      keepPageParams({
        q: asked.query,
        mailbox: asked.mailboxId,
        from: asked.from.trim(),
        since: asked.since,
        until: asked.until,
        weak: asked.weak ? 1 : undefined
      })
      try {
        const answer = await ask(asked, 0)
        if (mine === latest.current) setFound({ ...asked, results: answer.data, total: answer.meta.total, ranking: answer.meta.ranking })
      } catch (failure) {
        if (mine !== latest.current) return
        setFound(null)
        throw failure
      }
    })
  }
  // The next page of the search shown (not of the field's text, which may have changed since), added
  // only while that search is still the one shown: a new search made meanwhile is not overwritten.
  const showMore = () =>
    more.run(async () => {
      if (found === null) return
      // A ranking no longer held (10 minutes after its last use): the next page of a new one, whose
      // results already shown are left out below.
      const answer = await ask(found, found.results.length, found.ranking).catch((/** @type {any} */ failure) => {
        if (failure?.code === "RANKING_EXPIRED") return ask(found, found.results.length)
        throw failure
      })
      const shown = new Set(found.results.map((result) => result.email_id))
      const added = answer.data.filter((/** @type {any} */ result) => !shown.has(result.email_id))
      setFound((current) =>
        current === found ? { ...found, results: [...found.results, ...added], total: answer.meta.total, ranking: answer.meta.ranking } : current
      )
    })
  useEffect(() => {
    if (text.trim() !== "") search()
    // The URL changed under the page (typed in the address bar, Back or Forward between two searches):
    // the page becomes the search it names. The page's own changes replace the URL without this event.
    const followUrl = () => {
      if (!location.hash.startsWith("#/search")) return
      const asked = askedInUrl()
      setText(asked.query)
      setMailboxId(asked.mailboxId)
      setWeak(asked.weak)
      setFrom(asked.from)
      setSince(asked.since)
      setUntil(asked.until)
      if (asked.query.trim() !== "") search(asked)
      else (++latest.current, setFound(null))
    }
    addEventListener("hashchange", followUrl)
    return () => removeEventListener("hashchange", followUrl)
  }, [])
  /** A choice of what to search: searched again at once when there is a query. @param {Partial<Asked>} changed */
  const choose = (changed) => {
    if (changed.mailboxId !== undefined) setMailboxId(changed.mailboxId)
    if (changed.weak !== undefined) setWeak(changed.weak)
    if (changed.since !== undefined) setSince(changed.since)
    if (changed.until !== undefined) setUntil(changed.until)
    if (text.trim() !== "") search(changed)
  }

  const results = found?.results ?? null
  return html`
    <h1>Search</h1>
    <form class="card row-form search-form" role="search" onSubmit=${(/** @type {Event} */ e) => (e.preventDefault(), search())}>
      <${Field} id="query" label="Search your mail by words or meaning" type="search" value=${text} onInput=${setText} required />
      <${Field} id="search-from" label="From (an address or a domain)" value=${from} onInput=${setFrom} autocomplete="off"
        error=${fieldError(error, "from")} />
      <button type="submit" disabled=${busy}>Search</button>
    </form>
    <div class="toolbar">
      ${mailboxes.length > 1 && html`
        <label for="search-mailbox">In</label>
        <select id="search-mailbox" value=${mailboxId} onChange=${(/** @type {any} */ e) => choose({ mailboxId: e.currentTarget.value })}>
          <option value="">All mailboxes</option>
          ${mailboxes.map((mailbox) => html`<option value=${mailbox.mailbox_id}>${addressShown(mailbox.email_address)}</option>`)}
        </select>`}
      <${DaySpan} id="search" since=${since} until=${until} onChange=${choose} />
      <label class="check"><input type="checkbox" checked=${weak} onChange=${(/** @type {any} */ e) => choose({ weak: e.currentTarget.checked })} />
        Weak matches too (scores below ${WEAK.toFixed(2)})</label>
      ${found && found.total > 0 && html`<span class="muted small" role="status">${count(found.total, "result", "results")}</span>`}
    </div>
    <${MailboxesUnread} failure=${choices.failure} onRetry=${choices.retry} />
    ${error && fieldError(error, "from") === undefined && html`<${LoadFailed} error=${error} onRetry=${() => search()} />`}
    ${results !== null && (results.length === 0 ? html`<p class="muted" role="status">Nothing found${found === null ? "" : narrowedTo(found)}${found?.weak ? "" : " (weak matches left out)"}.</p>` : html`
      <ol class="list" aria-label="Results">
        ${results.map((result) => {
          const who = counterpart(result)
          return html`
          <li key=${result.email_id} class="item wrap">
            <div class="grow">
              <a class="clipped" href=${href("emails", result.email_id)} title=${result.subject || undefined}><strong dir="auto">${result.subject || "(no subject)"}</strong></a>
              <div class="muted small"><span dir="auto" title=${who.title}>${who.name}</span> · ${when(result.date)}</div>
              <div class="small clipped" dir="auto" title=${result.snippet || undefined}>${result.snippet}</div>
            </div>
            <span class="tag" title=${strength(result.score)}>score ${result.score.toFixed(2)}</span>
          </li>`
        })}
      </ol>
      ${results.length < (found?.total ?? 0) && html`
        <div class="actions"><button type="button" class="secondary" disabled=${more.busy} onClick=${showMore}>More results</button></div>`}
      ${more.error && html`<${LoadFailed} error=${more.error} onRetry=${showMore} />`}`)}
  `
}
