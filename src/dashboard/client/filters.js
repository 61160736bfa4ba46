/**
 * Filters: the account's standing orders for received mail. A form makes one (conditions: senders,
 * recipients, phrases in the subject or body, attachments; actions: labels to add, marking read or as
 * spam; every mailbox or one); the list shows each in the order they apply, with how much mail it has
 * filtered, and changes it (in the same form), turns it off or on, runs it over mail already received
 * (counted first) or deletes it. The server's refusals show by the field they name.
 */
import { html } from "htm/preact"
import { useEffect, useLayoutEffect, useState } from "preact/hooks"
import { call, fieldErrorWithin as errorAt } from "./api.js"
import { count, ErrorNote, Field, LoadFailed, MailboxesUnread, useMailboxChoices, useReloading, when } from "./ui.js"
import { addressShown } from "./idn.js"

/** The largest page the list answers; an account keeps at most 100 filters. */
const PAGE = 100

/** Comma-separated terms as a list; none for an empty field. @param {string} text */
const terms = (text) => text.split(",").map((term) => term.trim()).filter((term) => term !== "")

/** The conditions with a field of their own, each showing its refusal by it. */
const CONDITION_FIELDS = ["conditions.from", "conditions.to", "conditions.subject_contains", "conditions.body_contains"]

/** A filter's conditions in words. @param {any} c */
const conditionsText = (c) => [
  c.from && `from ${c.from.join(" or ")}`,
  c.to && `to ${c.to.join(" or ")}`,
  c.subject_contains && `subject contains “${c.subject_contains.join("” or “")}”`,
  c.body_contains && `body contains “${c.body_contains.join("” or “")}”`,
  c.has_attachments !== undefined && (c.has_attachments ? "has attachments" : "has no attachments")
].filter(Boolean).join(", ")

/** A filter's actions in words. @param {any} a */
const actionsText = (a) => [
  ...a.add_labels.map((/** @type {string} */ l) => (l === "spam" ? "mark as spam" : `label ${l}`)),
  ...a.remove_labels.map((/** @type {string} */ l) => (l === "unread" ? "mark read" : l === "spam" ? "not spam" : `remove ${l}`))
].join(", ")

/** A list as the form's field shows it. @param {ReadonlyArray<string> | undefined} list */
const joined = (list) => (list ?? []).join(", ")

/**
 * The form for a new filter, or for changing one (`editing`): its fields start as the filter is, and
 * labels it removes that the form has no box for (besides unread) are kept as they are.
 * @param {{ choices: ReturnType<typeof useMailboxChoices>, editing: any | null, onSaved: () => void, onCancel: () => void }} props
 */
const FilterForm = ({ choices, editing, onSaved, onCancel }) => {
  const { mailboxes } = choices
  const c = editing?.conditions ?? {}
  const adds = editing?.actions.add_labels ?? []
  const removes = editing?.actions.remove_labels ?? []
  const [name, setName] = useState(editing?.name ?? "")
  const [mailboxId, setMailboxId] = useState(editing?.mailbox_id ?? "")
  const [from, setFrom] = useState(joined(c.from))
  const [to, setTo] = useState(joined(c.to))
  const [subject, setSubject] = useState(joined(c.subject_contains))
  const [body, setBody] = useState(joined(c.body_contains))
  const [attachments, setAttachments] = useState(c.has_attachments === undefined ? "" : c.has_attachments ? "with" : "without")
  const [labels, setLabels] = useState(joined(adds.filter((/** @type {string} */ l) => l !== "spam")))
  const [markRead, setMarkRead] = useState(removes.includes("unread"))
  const [markSpam, setMarkSpam] = useState(adds.includes("spam"))
  const otherRemoves = removes.filter((/** @type {string} */ l) => l !== "unread")
  const [error, setError] = useState(/** @type {unknown} */ (null))
  const [busy, setBusy] = useState(false)

  /** @param {Event} event */
  const save = async (event) => {
    event.preventDefault()
    setBusy(true)
    setError(null)
    try {
      const filter = {
        name: name.trim() ? name : null,
        mailbox_id: mailboxId || null,
        conditions: {
          ...(terms(from).length ? { from: terms(from) } : {}),
          ...(terms(to).length ? { to: terms(to) } : {}),
          ...(terms(subject).length ? { subject_contains: terms(subject) } : {}),
          ...(terms(body).length ? { body_contains: terms(body) } : {}),
          ...(attachments ? { has_attachments: attachments === "with" } : {})
        },
        actions: {
          add_labels: [...terms(labels), ...(markSpam ? ["spam"] : [])],
          remove_labels: [...(markRead ? ["unread"] : []), ...otherRemoves]
        }
      }
      if (editing) await call("PATCH", `/api/filters/${encodeURIComponent(editing.filter_id)}`, filter)
      else await call("POST", "/api/filters", filter)
      if (!editing) {
        for (const clear of [setName, setFrom, setTo, setSubject, setBody, setLabels, setAttachments]) clear("")
        setMarkRead(false)
        setMarkSpam(false)
      }
      onSaved()
    } catch (failed) {
      setError(failed)
    } finally {
      setBusy(false)
    }
  }
  // Refusals of the conditions as a whole and of the actions show under them; the rest by their fields.
  const conditionsNote = CONDITION_FIELDS.some((key) => errorAt(error, key)) ? undefined : errorAt(error, "conditions")
  const actionsNote = errorAt(error, "actions.add_labels") ? undefined : errorAt(error, "actions")
  const shownByField = ["conditions", "actions", "name"].some((key) => errorAt(error, key))
  return html`
    <form class="card" id="filter-form" onSubmit=${save} aria-label=${editing ? "Edit filter" : "New filter"}>
      <h2 tabindex="-1">${editing ? "Edit filter" : "New filter"}</h2>
      <p class="muted small">
        Mail that arrives from now on and meets every condition you fill in gets the labels, before webhooks, events and
        search see it. Separate several senders, addresses or phrases with commas: any one of them will do.
      </p>
      <div class="row-form pair">
        <${Field} id="filter-from" label="From (ada@example.com, example.com or *.example.com)" value=${from} onInput=${setFrom}
          error=${errorAt(error, "conditions.from")} />
        <${Field} id="filter-to" label="To (the mailbox address, To or Cc)" value=${to} onInput=${setTo} error=${errorAt(error, "conditions.to")} />
      </div>
      <div class="row-form pair">
        <${Field} id="filter-subject" label="Subject contains" value=${subject} onInput=${setSubject}
          error=${errorAt(error, "conditions.subject_contains")} />
        <${Field} id="filter-body" label="Body contains" value=${body} onInput=${setBody} error=${errorAt(error, "conditions.body_contains")} />
      </div>
      <div class="field">
        <label for="filter-attachments">Attachments</label>
        <select id="filter-attachments" value=${attachments} onChange=${(/** @type {any} */ e) => setAttachments(e.currentTarget.value)}>
          <option value="">Either</option>
          <option value="with">Has attachments</option>
          <option value="without">Has no attachments</option>
        </select>
      </div>
      ${conditionsNote && html`<p class="note error" role="alert">Conditions: ${conditionsNote}</p>`}
      <${Field} id="filter-add" label="Labels to add (comma-separated)" value=${labels} onInput=${setLabels}
        error=${errorAt(error, "actions.add_labels")} />
      <label class="check"><input type="checkbox" checked=${markRead} onChange=${(/** @type {any} */ e) => setMarkRead(e.currentTarget.checked)} /> Mark as read</label>
      <label class="check"><input type="checkbox" checked=${markSpam} onChange=${(/** @type {any} */ e) => setMarkSpam(e.currentTarget.checked)} /> Mark as spam</label>
      ${otherRemoves.length > 0 && html`<p class="muted small">Also removes ${otherRemoves.join(", ")}.</p>`}
      ${actionsNote && html`<p class="note error" role="alert">Actions: ${actionsNote}</p>`}
      <div class="row-form pair">
        <div class="field">
          <label for="filter-mailbox">Mailbox</label>
          <select id="filter-mailbox" value=${mailboxId} onChange=${(/** @type {any} */ e) => setMailboxId(e.currentTarget.value)}>
            <option value="">Every mailbox</option>
            ${mailboxes.map((m) => html`<option key=${m.mailbox_id} value=${m.mailbox_id}>${addressShown(m.email_address)}</option>`)}
          </select>
          <${MailboxesUnread} failure=${choices.failure} onRetry=${choices.retry} />
        </div>
        <${Field} id="filter-name" label="Name (optional)" value=${name} onInput=${setName} error=${errorAt(error, "name")} />
      </div>
      ${!shownByField && html`<${ErrorNote} error=${error} />`}
      <div class="actions">
        <button type="submit" disabled=${busy}>${editing ? "Save filter" : "Create filter"}</button>
        ${editing && html`<button type="button" class="secondary" disabled=${busy} onClick=${onCancel}>Cancel</button>`}
      </div>
    </form>
  `
}

/**
 * One filter in the list, with what can be done to it. A count of what it would change is of the filter
 * as it was then: the list renders a changed filter afresh (its key holds updated_at), so an Apply
 * never follows the count of other conditions.
 * @param {{ filter: any, mailboxes: any[], run: (action: () => Promise<unknown>) => Promise<void>, onEdit: (filter: any) => void }} props
 */
const FilterItem = ({ filter, mailboxes, run, onEdit }) => {
  const [applied, setApplied] = useState(/** @type {any} */ (null))
  const path = `/api/filters/${encodeURIComponent(filter.filter_id)}`
  const title = filter.name ?? conditionsText(filter.conditions)
  const mailbox = filter.mailbox_id && mailboxes.find((m) => m.mailbox_id === filter.mailbox_id)
  const apply = (/** @type {boolean} */ dryRun) => run(async () => setApplied((await call("POST", `${path}/apply`, { dry_run: dryRun })).data))
  return html`
    <li class="item wrap">
      <div class="grow">
        ${filter.name === null
  ? html`<strong>When ${conditionsText(filter.conditions)}: ${actionsText(filter.actions)}.</strong>`
  : html`<strong dir="auto">${filter.name}</strong>`}${" "}
        ${!filter.enabled && html`<span class="tag">off</span>`}
        ${filter.name !== null && html`<div class="small">When ${conditionsText(filter.conditions)}: ${actionsText(filter.actions)}.</div>`}
        <div class="muted small">
          ${filter.mailbox_id ? (mailbox ? addressShown(mailbox.email_address) : "One mailbox") : "Every mailbox"} · ${count(filter.matched_count, "email", "emails")} filtered${
  filter.last_matched_at ? `, last ${when(filter.last_matched_at)}` : ""
}
        </div>
        ${applied && html`<p class="note" role="status">${
  applied.dry_run
    ? `Of the ${count(applied.scanned, "newest email", "newest emails")} received, ${applied.matched} match; ${applied.changed} would change.`
    : `${count(applied.changed, "email", "emails")} changed (${applied.matched} of ${applied.scanned} match).`
}</p>`}
      </div>
      <div class="actions">
        <button type="button" class="link" aria-label=${`${filter.enabled ? "Turn off" : "Turn on"} ${title}`}
          onClick=${() => run(() => call("PATCH", path, { enabled: !filter.enabled }))}>${filter.enabled ? "Turn off" : "Turn on"}</button>
        ${applied?.dry_run && applied.changed > 0
          ? html`<button type="button" class="link" aria-label=${`Apply to ${count(applied.changed, "email", "emails")}: ${title}`} onClick=${() => apply(false)}>Apply to ${
            count(applied.changed, "email", "emails")
          }</button>`
          : html`<button type="button" class="link" aria-label=${`Check received mail: ${title}`} onClick=${() => apply(true)}>Check received mail</button>`}
        <button type="button" class="link" aria-label=${`Edit ${title}`} onClick=${() => onEdit(filter)}>Edit</button>
        <button type="button" class="link" aria-label=${`Delete ${title}`} onClick=${() => run(() => call("DELETE", path))}>Delete</button>
      </div>
    </li>
  `
}

export const FiltersPage = () => {
  const [filters, setFilters] = useState(/** @type {any[] | null} */ (null))
  const [total, setTotal] = useState(0)
  const choices = useMailboxChoices()
  const { mailboxes } = choices
  // The filter being changed in the form; null: the form makes a new one.
  const [editing, setEditing] = useState(/** @type {any} */ (null))
  const { error, failure, retry, run } = useReloading((isCurrent) =>
    call("GET", `/api/filters?limit=${PAGE}`).then((a) => isCurrent() && (setFilters(a.data), setTotal(a.meta.total))))
  // The form, filled with the filter to change, is where the person's eyes (and a screen reader) go next;
  // before it is painted, so that focus never moves away from a field the person has started typing in.
  useLayoutEffect(() => {
    const heading = /** @type {HTMLElement | null} */ (document.querySelector("#filter-form h2"))
    if (editing && heading) (heading.scrollIntoView({ block: "start" }), heading.focus())
  }, [editing])
  return html`
    <h1>Filters</h1>
    <p class="muted">Label, mark read or file as spam the mail your mailboxes receive, by who sent it, whom it was for, what it says, or whether it carries files.</p>
    <${FilterForm} key=${editing?.filter_id ?? "new"} editing=${editing}
      onSaved=${() => (setEditing(null), run(async () => {}))} onCancel=${() => setEditing(null)} choices=${choices} />
    <section class="card" aria-labelledby="filters-heading">
      <h2 id="filters-heading">Your filters</h2>
      <p class="muted small">They apply in this order, each to what the ones before it left.</p>
      <${ErrorNote} error=${error} />
      ${failure ? html`<${LoadFailed} error=${failure} onRetry=${retry} />` : filters === null ? html`<p class="muted small">Loading…</p>`
        : filters.length === 0 ? html`<p class="muted small">No filters yet.</p>` : html`
        <ul class="list" aria-label="Filters">
          ${filters.map((f) => html`<${FilterItem} key=${`${f.filter_id} ${f.updated_at}`} filter=${f} mailboxes=${mailboxes} run=${run} onEdit=${setEditing} />`)}
        </ul>
        ${total > filters.length && html`<p class="muted small">The first ${PAGE} of ${total}.</p>`}`}
    </section>
  `
}
