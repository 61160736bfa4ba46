/** The inbox: one mailbox's mail with paging and sort, or the newest mail across all mailboxes; live. */
import { html } from "htm/preact"
import { useEffect, useState } from "preact/hooks"
import { call, fieldError, findMailbox, isNotFound, query } from "./api.js"
import { coalesced, onMail } from "./live.js"
import { addressShown } from "./idn.js"
import { href, keepPageParams, pageParams } from "./router.js"
import { ThreadLink } from "./threads.js"
import {
  arrivedBetween,
  ConfirmDelete,
  count,
  counterpart,
  DaySpan,
  ErrorNote,
  LoadFailed,
  MailboxNotFound,
  narrowedTo,
  Pager,
  useAction,
  when
} from "./ui.js"

const PAGE = 20
const SORTS = [
  ["received_at:desc", "Newest first"],
  ["received_at:asc", "Oldest first"],
  ["subject:asc", "Subject A–Z"]
]
/** A conversation's order: by its newest message. */
const THREAD_SORTS = [
  ["last_received_at:desc", "Newest first"],
  ["last_received_at:asc", "Oldest first"]
]

/**
 * Which mail a list shows (`?show=sent`), as the API's list filters: every email, or unread, received or sent
 * mail only; conversations by their unread mail only. Each with what an empty list says.
 * @type {ReadonlyArray<{ value: string, label: string, filter: Record<string, string>, empty: string }>}
 */
const SHOWS = [
  { value: "", label: "All mail", filter: {}, empty: "No mail yet. It appears here as soon as it arrives." },
  { value: "unread", label: "Unread", filter: { unread: "true" }, empty: "No unread mail." },
  { value: "received", label: "Received", filter: { direction: "inbound" }, empty: "No received mail." },
  { value: "sent", label: "Sent", filter: { direction: "outbound" }, empty: "No sent mail." }
]
const THREAD_SHOWS = SHOWS.slice(0, 2)

/** What the list shows: `value` among `shows`, or all mail. @param {typeof SHOWS} shows @param {string | null} value */
const showOf = (shows, value) => shows.find((show) => show.value === value) ?? shows[0]

/**
 * The list's Show choice.
 * @param {{ shows: typeof SHOWS, value: string, onChange: (value: string) => void }} props
 */
const ShowSelect = ({ shows, value, onChange }) => html`
  <label for="show">Show</label>
  <select id="show" value=${value} onChange=${(/** @type {any} */ e) => onChange(e.currentTarget.value)}>
    ${shows.map((show) => html`<option value=${show.value}>${show.label}</option>`)}
  </select>`

/** @param {number} n */
const emailsCount = (n) => count(n, "email", "emails")
/** @param {number} n */
const conversationsCount = (n) => count(n, "conversation", "conversations")

/** One email of a list, a link to read it. @param {{ item: any }} props */
const EmailLink = ({ item: email }) => {
  const who = counterpart(email)
  return html`
  <a class="mail-link" href=${href("emails", email.email_id)}>
    <span class="from" title=${who.title}>${email.labels.includes("unread") && html`<span class="dot" aria-label="Unread"></span>`}<span dir="auto">${who.name}</span></span>
    <span class="subject"><span class="clip" dir="auto" title=${email.subject || undefined}>${email.subject || "(no subject)"}</span>${email.has_attachments && html` <span class="tag" aria-label="Has attachments">attachment</span>`}</span>
    <span class="snippet muted" dir="auto" title=${email.snippet || undefined}>${email.snippet}</span>
    <time class="muted small" datetime=${email.received_at}>${when(email.received_at)}</time>
  </a>
`
}

/**
 * What a list of mail holds, emails or conversations (threads), and the routes that act on a batch of
 * them (`{batch}/batch-update`, `{batch}/batch-delete`, taking `field`): the same choices and actions
 * for both, a conversation's reaching every email of it.
 * @typedef {{
 *   name: string, every: string, idOf: (item: any) => string, unread: (item: any) => boolean,
 *   choose: (item: any) => string, counted: (n: number) => string, batch: string, field: string,
 *   goes: (n: number) => string, deleted: (chosen: number, emails: number) => string, Item: (props: { item: any }) => any
 * }} Kind
 */
/** @type {Record<"emails" | "threads", Kind>} */
const KINDS = {
  emails: {
    name: "Emails",
    every: "Choose every email on this page",
    idOf: (email) => email.email_id,
    unread: (email) => email.labels.includes("unread"),
    choose: (email) => `Choose "${email.subject || "(no subject)"}" ${email.direction === "outbound" ? counterpart(email).name.replace(/^To/, "to") : `from ${email.from_name || email.from}`}`,
    counted: emailsCount,
    batch: "/api/emails",
    field: "email_ids",
    goes: (n) => `${n === 1 ? "The email goes" : `These ${n} emails go`} for good, with their attachments and search data.`,
    deleted: (_chosen, emails) => `${emailsCount(emails)} deleted`,
    Item: EmailLink
  },
  threads: {
    name: "Conversations",
    every: "Choose every conversation on this page",
    idOf: (thread) => thread.thread_id,
    unread: (thread) => thread.unread_count > 0,
    choose: (thread) => `Choose the conversation "${thread.subject || "(no subject)"}" with ${thread.senders.join(", ")}`,
    counted: conversationsCount,
    batch: "/api/threads",
    field: "thread_ids",
    goes: (n) => `${n === 1 ? "The conversation goes" : `These ${n} conversations go`} for good: every message, with its attachments and search data.`,
    deleted: (chosen, emails) => `${conversationsCount(chosen)} deleted (${emailsCount(emails)})`,
    Item: ThreadLink
  }
}

/**
 * What to do with the emails or conversations chosen on a page, all at once (one request each:
 * batch-update, batch-delete): mark them read or unread, or delete them after asking again. A refusal
 * (a 409: a draft answers one, or sent mail is still being delivered) shows here, and nothing changed.
 * @param {{ kind: Kind, chosen: string[], onDone: (said: string) => void }} props
 */
const Selection = ({ kind, chosen, onDone }) => {
  const { busy, error, run } = useAction()
  /** @param {"add_labels" | "remove_labels"} change @param {string} said */
  const mark = (change, said) =>
    run(async () => {
      await call("POST", `${kind.batch}/batch-update`, { [kind.field]: chosen, [change]: ["unread"] })
      onDone(`${kind.counted(chosen.length)} marked ${said}`)
    })
  return html`
    <div class="toolbar selection" role="group" aria-label=${`Chosen ${kind.name.toLowerCase()}`}>
      <strong>${chosen.length} chosen</strong>
      <button type="button" class="secondary" disabled=${busy} onClick=${() => mark("remove_labels", "read")}>Mark read</button>
      <button type="button" class="secondary" disabled=${busy} onClick=${() => mark("add_labels", "unread")}>Mark unread</button>
      <${ConfirmDelete} key=${chosen.join()} what=${kind.counted(chosen.length)} warning=${kind.goes(chosen.length)}
        onConfirm=${async () => {
          const answer = await call("POST", `${kind.batch}/batch-delete`, { [kind.field]: chosen })
          onDone(kind.deleted(chosen.length, answer.data.deleted))
        }} />
      <${ErrorNote} error=${error} />
    </div>
  `
}

/**
 * A page of emails or conversations, each one a link to read it and a box to choose it by; what is
 * chosen can be acted on together (Selection). Choices last while their items are on the page.
 * @param {{ kind: Kind, items: any[], onChanged: () => void }} props
 */
const MailList = ({ kind, items, onChanged }) => {
  const [chosen, setChosen] = useState(/** @type {string[]} */ ([]))
  const [said, setSaid] = useState("")
  const shown = items.map(kind.idOf)
  useEffect(() => setChosen((ids) => ids.filter((id) => shown.includes(id))), [shown.join()])
  const picked = chosen.filter((id) => shown.includes(id))
  const every = picked.length === shown.length
  /** @param {string} id @param {boolean} on */
  const choose = (id, on) => setChosen((ids) => (on ? [...ids.filter((x) => x !== id), id] : ids.filter((x) => x !== id)))
  return html`
    <div class="toolbar">
      <label class="check choose-all"><input type="checkbox" checked=${every} indeterminate=${picked.length > 0 && !every}
        onChange=${(/** @type {any} */ e) => setChosen(e.currentTarget.checked ? shown : [])} />${kind.every}</label>
      <span class="muted small" role="status">${said}</span>
    </div>
    ${picked.length > 0 && html`<${Selection} kind=${kind} chosen=${picked} onDone=${(/** @type {string} */ what) => (setSaid(what), setChosen([]), onChanged())} />`}
    <ul class="list mail" aria-label=${kind.name}>
      ${items.map((item) => {
        const id = kind.idOf(item)
        return html`
          <li key=${id} class=${kind.unread(item) ? "item unread" : "item"}>
            <input type="checkbox" class="pick" checked=${picked.includes(id)} aria-label=${kind.choose(item)}
              onChange=${(/** @type {any} */ e) => choose(id, e.currentTarget.checked)} />
            <${kind.Item} item=${item} />
          </li>`
      })}
    </ul>
  `
}

/**
 * A page of what `path` lists (emails or threads, with `params`), read again whenever they or the page change,
 * whenever new mail is announced and on `retry`. Reads may overlap (mail arriving in bursts, a page
 * turned meanwhile): only the latest read of a page still shown sets it. A page left empty by mail
 * deleted meanwhile moves to the last page there is. What another `path` listed is not shown as this
 * one's (emails are not threads): until its first read, the page is loading.
 * The page shown is kept in the page's URL (`?page=2`), so that Back from an email returns to it.
 * @param {string} path
 * @param {Record<string, string>} [params]
 * @param {number} [firstOffset] where it opens (the URL's page)
 */
const usePage = (path, params = {}, firstOffset = 0) => {
  const [shown, setShown] = useState(/** @type {{ path: string, items: any[] } | null} */ (null))
  const [total, setTotal] = useState(0)
  const [offset, setOffset] = useState(firstOffset)
  const [failure, setFailure] = useState(/** @type {unknown} */ (null))
  const [attempt, setAttempt] = useState(0)
  const asked = path + query({ limit: PAGE, offset, ...params })
  useEffect(() => {
    let latest = 0
    let current = true
    const read = async () => {
      const mine = ++latest
      const isCurrent = () => current && mine === latest
      try {
        const answer = await call("GET", asked)
        if (!isCurrent()) return
        if (answer.data.length === 0 && offset > 0) return setOffset(Math.max(0, Math.floor((answer.meta.total - 1) / PAGE) * PAGE))
        setShown({ path, items: answer.data })
        setTotal(answer.meta.total)
        setFailure(null)
      } catch (failed) {
        if (isCurrent()) setFailure(failed)
      }
    }
    read()
    const stop = onMail(coalesced(read))
    return () => {
      current = false
      stop()
    }
  }, [asked, attempt])
  const retry = () => {
    setFailure(null)
    setAttempt((n) => n + 1)
  }
  return { items: shown?.path === path ? shown.items : null, total, offset, setOffset, failure, retry }
}

/** The page the URL asks for (`?page=2`), as an offset. @param {URLSearchParams} params */
const offsetIn = (params) => {
  const page = Number(params.get("page"))
  return Number.isInteger(page) && page > 1 ? (page - 1) * PAGE : 0
}

/** A day the URL names (`2026-12-01`), or none: a date field takes no other value. @param {string | null} day */
const dayIn = (day) => (day !== null && /^\d{4}-\d{2}-\d{2}$/.test(day) ? day : "")

/**
 * What a list of mail is narrowed to, from the page's URL and as the person changes it: a sender
 * (`from`: typed, or an email's "All mail from them") and the days it arrived between (`since`,
 * `until`). `params` is what the list asks the API, `kept` what the page's URL keeps, `said` what
 * an empty list says it was narrowed by, `refusal` the API's word on a sender that names none (an
 * address edited by hand): said with the sender's chip and its way back, not a "Try again" that
 * could only be refused again.
 * @param {() => void} changed what a change does besides (the list back to its first page)
 */
const useNarrowing = (changed) => {
  const [first] = useState(() => {
    const params = pageParams()
    return { from: params.get("from") ?? "", since: dayIn(params.get("since")), until: dayIn(params.get("until")) }
  })
  const [sender, setSender] = useState(first.from)
  // The sender being typed, until it is asked for.
  const [typed, setTyped] = useState("")
  const [since, setSince] = useState(first.since)
  const [until, setUntil] = useState(first.until)
  return {
    params: { ...(sender === "" ? {} : { from: sender }), ...arrivedBetween(since, until) },
    kept: { from: sender, since, until },
    said: narrowedTo({ from: sender, since, until }),
    /** @param {unknown} failure the list's */
    refusal: (failure) => {
      const said = fieldError(failure, "from")
      return said === undefined ? undefined : html`<p class="alert" role="alert">From ${sender}: ${said}</p>`
    },
    /**
     * The toolbar's part: the sender (a field, or its chip with ×) and the days. Called, not mounted
     * as a component: a function made anew each render would mount its field afresh at each keystroke.
     */
    fields: () => html`
      ${sender !== "" ? html`
        <span class="tag">From ${sender} <button type="button" class="link remove" aria-label="Every sender's mail"
          onClick=${() => (setSender(""), changed())}>×</button></span>` : html`
        <form class="labelled" onSubmit=${(/** @type {Event} */ e) => (e.preventDefault(), typed.trim() !== "" && (setSender(typed.trim()), setTyped(""), changed()))}>
          <label for="list-from">From</label>
          <input id="list-from" value=${typed} placeholder="an address or a domain" autocomplete="off" size="22"
            onInput=${(/** @type {any} */ e) => setTyped(e.currentTarget.value)} />
          <button type="submit" class="secondary">Filter</button>
        </form>`}
      <${DaySpan} id="list" since=${since} until=${until}
        onChange=${(/** @type {{ since: string, until: string }} */ span) => (setSince(span.since), setUntil(span.until), changed())} />`
  }
}

/** An offset as the URL's page: none for the first. @param {number} offset */
const pageOf = (offset) => (offset > 0 ? Math.floor(offset / PAGE) + 1 : undefined)

/**
 * How a mailbox's list was left, from the page's URL (`?view=conversations&sort=…&show=unread&page=2`):
 * grouped or not, its sort and what it shows (ones the view offers), the sender its mail is from
 * (`from`: typed, or an email's "All mail from them"), the days it arrived between (`since`, `until`)
 * and its page.
 */
const listSettings = () => {
  const params = pageParams()
  const grouped = params.get("view") === "conversations"
  const sorts = (grouped ? THREAD_SORTS : SORTS).map(([value]) => value)
  const sort = params.get("sort")
  return {
    grouped,
    sort: sort !== null && sorts.includes(sort) ? sort : sorts[0],
    show: showOf(grouped ? THREAD_SHOWS : SHOWS, params.get("show")).value,
    offset: offsetIn(params)
  }
}

/** Past this share of bounced deliveries, receivers start to distrust a sender (the line says so). */
const BOUNCE_WARNING = 0.05
/** Past this share of spam complaints, Gmail and Yahoo file a sender's mail as spam (their 2024 sender rules). */
const COMPLAINT_WARNING = 0.003

/** A share (0-1) as a percentage with one decimal at most. @param {number} share */
const percent = (share) => `${Math.round(share * 1000) / 10}%`

/**
 * What a mailbox's mail (or every mailbox's) did over the last 30 days: received, sent, delivered and
 * bounced, with a warning past 5% bounced; live. Nothing while it loads, or when it cannot be read:
 * the mail below is what the page is for.
 * @param {{ mailboxId?: string }} props
 */
const StatsLine = ({ mailboxId }) => {
  const [stats, setStats] = useState(/** @type {any} */ (null))
  useEffect(() => {
    let current = true
    const read = () => call("GET", "/api/stats" + query(mailboxId ? { mailbox_id: mailboxId } : {})).then((answer) => current && setStats(answer.data), () => {})
    read()
    // Counted again as mail arrives, as the list below is read again.
    const stop = onMail(coalesced(read))
    return () => {
      current = false
      stop()
    }
  }, [mailboxId])
  if (stats === null) return null
  const { received, sent, recipients, bounce_rate: bounceRate, complaints, complaint_rate: complaintRate } = stats
  return html`
    <p class="muted small" data-testid="stats">
      Last 30 days: ${received} received · ${count(sent, "email", "emails")} sent${
    sent > 0 ? ` · ${count(recipients.sent, "recipient", "recipients")} reached` : ""
  }${bounceRate === null ? "" : ` · ${recipients.bounced} bounced (${percent(bounceRate)})`}${
    complaints > 0 ? ` · ${count(complaints, "spam complaint", "spam complaints")} (${percent(complaintRate)})` : ""
  }
      ${bounceRate !== null && bounceRate > BOUNCE_WARNING && html`
        <strong class="note error"> More than 5% of deliveries bounced: check the addresses your agent sends to, or receivers will start refusing its mail.</strong>`}
      ${complaintRate !== null && complaintRate > COMPLAINT_WARNING && html`
        <strong class="note error"> More than 0.3% of recipients reported its mail as spam: send only to people who asked for it, or providers will file all of it as spam.</strong>`}
    </p>`
}

/** @param {{ mailboxId: string }} props */
export const MailboxInbox = ({ mailboxId }) => {
  // undefined until the mailbox is read; null: the account has no such mailbox.
  const [mailbox, setMailbox] = useState(/** @type {any} */ (undefined))
  // As the list was left (the page's URL), when Back returns to it.
  const [settings] = useState(listSettings)
  const [grouped, setGrouped] = useState(settings.grouped)
  const [sort, setSort] = useState(settings.sort)
  const [showing, setShowing] = useState(settings.show)
  const shows = grouped ? THREAD_SHOWS : SHOWS
  const show = showOf(shows, showing)
  // One sender's mail and the days it arrived between (grouped, the conversations with such mail), until taken away.
  const narrowing = useNarrowing(() => setOffset(0))
  // Grouped, the page is the mailbox's conversations (its threads), counted and paged as such.
  const { items, total, offset, setOffset, failure: listFailure, retry: readAgain } = usePage(
    `/api/mailboxes/${encodeURIComponent(mailboxId)}/${grouped ? "threads" : "emails"}`,
    { sort, ...show.filter, ...narrowing.params },
    settings.offset
  )
  useEffect(() => {
    const firstSort = (grouped ? THREAD_SORTS : SORTS)[0][0]
    keepPageParams({
      view: grouped ? "conversations" : undefined,
      sort: sort === firstSort ? undefined : sort,
      show: show.value,
      ...narrowing.kept,
      page: pageOf(offset)
    })
  }, [grouped, sort, show, narrowing.said, offset])
  // Grouping keeps the order chosen: oldest first stays oldest first (a subject order has no conversation
  // counterpart); what it shows, when conversations can show it (unread), else all of them; and the
  // sender (grouped, the conversations with mail from them).
  const group = (/** @type {boolean} */ on) => {
    setGrouped(on)
    const oldestFirst = sort === "received_at:asc" || sort === "last_received_at:asc"
    setSort(on ? (oldestFirst ? "last_received_at:asc" : "last_received_at:desc") : (oldestFirst ? "received_at:asc" : "received_at:desc"))
    setShowing(showOf(on ? THREAD_SHOWS : SHOWS, showing).value)
    setOffset(0)
  }
  const noun = grouped ? ["conversation", "conversations"] : ["email", "emails"]
  // The mailbox's lookup and the mail's read fail apart, and each is asked again on its own: a
  // failed lookup (the heading, New email, Drafts) leaves the mail it did read on the page.
  const [lookupFailure, setLookupFailure] = useState(/** @type {unknown} */ (null))
  const [lookups, setLookups] = useState(0)

  useEffect(() => {
    if (mailbox !== undefined) return
    findMailbox(mailboxId).then((found) => (setMailbox(found), setLookupFailure(null)), setLookupFailure)
  }, [mailboxId, lookups])

  if (mailbox === null || isNotFound(listFailure)) return html`<${MailboxNotFound} mailboxId=${mailboxId} />`
  const senderRefusal = narrowing.refusal(listFailure)
  const lookUpAgain = () => {
    setLookupFailure(null)
    setLookups(lookups + 1)
  }
  return html`
    <h1 title=${mailbox && addressShown(mailbox.email_address) !== mailbox.email_address ? mailbox.email_address : undefined}>${mailbox ? addressShown(mailbox.email_address) : "Inbox"}</h1>
    ${mailbox && html`
      <div class="actions">
        <a class="button" href=${href("mailboxes", mailboxId, "compose")}>New email</a>
        <a class="button secondary" href=${href("mailboxes", mailboxId, "drafts")}>Drafts</a>
        <a class="button secondary" href=${href("mailboxes", mailboxId, "senders")}>Senders</a>
        <a class="button secondary" href=${href("mailboxes", mailboxId, "forwarding")}>Forwarding</a>
        <a class="button secondary" href=${href("mailboxes", mailboxId, "auto-reply")}>Automatic reply</a>
        <a class="button secondary" href=${href("mailboxes", mailboxId, "meetings")}>Meetings</a>
        <a class="button secondary" href=${`/api/mailboxes/${encodeURIComponent(mailboxId)}/export`} download>Download all (.mbox)</a>
      </div>
      <${StatsLine} mailboxId=${mailboxId} />`}
    ${lookupFailure && html`<${LoadFailed} error=${lookupFailure} onRetry=${lookUpAgain} retryName="Read the mailbox's details again" />`}
    ${listFailure && senderRefusal === undefined ? html`<${LoadFailed} error=${listFailure} onRetry=${readAgain} />` : html`
      <div class="toolbar">
        <label for="sort">Sort</label>
        <select id="sort" value=${sort} onChange=${(/** @type {any} */ e) => (setSort(e.currentTarget.value), setOffset(0))}>
          ${(grouped ? THREAD_SORTS : SORTS).map(([value, label]) => html`<option value=${value}>${label}</option>`)}
        </select>
        <${ShowSelect} shows=${shows} value=${show.value} onChange=${(/** @type {string} */ value) => (setShowing(value), setOffset(0))} />
        ${narrowing.fields()}
        <label class="check"><input type="checkbox" checked=${grouped} onChange=${(/** @type {any} */ e) => group(e.currentTarget.checked)} />
          Group by conversation</label>
        ${items && senderRefusal === undefined && html`<span class="muted small" aria-live="polite">${total} ${total === 1 ? noun[0] : noun[1]}</span>`}
      </div>
      ${senderRefusal !== undefined
        ? senderRefusal
        : items === null
        ? html`<p class="muted">Loading…</p>`
        : items.length === 0
        ? html`<p class="muted">${narrowing.said === "" ? show.empty : `Nothing${narrowing.said} here.`}</p>`
        : html`<${MailList} key=${grouped ? "threads" : "emails"} kind=${grouped ? KINDS.threads : KINDS.emails} items=${items} onChanged=${readAgain} />`}
      ${items && senderRefusal === undefined && html`<${Pager} offset=${offset} pageSize=${PAGE} total=${total} noun=${noun[1]} onOffset=${setOffset} />`}`}
  `
}

/** The newest mail of every mailbox, in one list (GET /api/emails), a page at a time. */
export const AllInbox = () => {
  // Every mailbox's mail in one list: one request, however many mailboxes.
  const [firstOffset] = useState(() => offsetIn(pageParams()))
  const [showing, setShowing] = useState(() => showOf(SHOWS, pageParams().get("show")).value)
  const show = showOf(SHOWS, showing)
  const narrowing = useNarrowing(() => setOffset(0))
  const { items: emails, total, offset, setOffset, failure, retry } = usePage("/api/emails", { ...show.filter, ...narrowing.params }, firstOffset)
  useEffect(() => keepPageParams({ show: show.value, ...narrowing.kept, page: pageOf(offset) }), [show, narrowing.said, offset])
  const senderRefusal = narrowing.refusal(failure)
  return html`
    <h1>Inbox</h1>
    <p class="muted">The newest mail across all your mailboxes.</p>
    <${StatsLine} />
    <div class="toolbar">
      <${ShowSelect} shows=${SHOWS} value=${show.value} onChange=${(/** @type {string} */ value) => (setShowing(value), setOffset(0))} />
      ${narrowing.fields()}
    </div>
    ${senderRefusal !== undefined ? senderRefusal : failure
      ? html`<${LoadFailed} error=${failure} onRetry=${retry} />` : emails === null
      ? html`<p class="muted">Loading…</p>` : emails.length === 0
      ? html`<p class="muted">${narrowing.said !== "" ? `Nothing${narrowing.said} here.` : show.value === "" ? html`No mail yet. <a href=${href()}>Create a mailbox</a> and send mail to it.` : show.empty}</p>`
      : html`<${MailList} kind=${KINDS.emails} items=${emails} onChanged=${retry} /><${Pager} offset=${offset} pageSize=${PAGE} total=${total} noun="emails" onOffset=${setOffset} />`}
  `
}
