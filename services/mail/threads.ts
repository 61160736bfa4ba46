/**
 * Threads: which emails of a mailbox belong together.
 *
 * A message the mailbox holds already (the same Message-ID: the copy of mail it sent to itself, or
 * to one of its subaddresses) joins that one's thread.
 * A message joins the thread of replies to it that arrived before it.
 * A reply names what it answers (References, In-Reply-To): it joins the thread of any of those
 * messages the mailbox holds; or else that of another email of the mailbox that names one of them
 * too (a sibling: one client sends In-Reply-To alone, another References with the root); or else
 * the thread keyed by the conversation's first message (References' first entry).
 * A received message that names nothing joins the thread of its normalized subject from the same
 * sender ("Re: Re: Hello" and "hello" are one conversation: mail clients that send no References).
 * Not another sender's: anyone can write "Invoice 42", and a stranger's mail must not join (and be
 * deleted with) someone else's conversation. A message the mailbox sends that names nothing, to one
 * person, is its subject's conversation with that person, the one their mail would join: so their
 * answer joins it even when their mail program names nothing ("Re: Quick question" alone). To
 * several people it starts a conversation of its own. An agent's two new emails "Quick question",
 * to Alice and to Bob, are two conversations either way.
 */
import { sha256 } from "../accounts/tokens.ts"

/** Reply and forward markers, in the languages mail clients commonly write them. */
const prefix = /^\s*(?:re|fwd?|aw|sv|vs|antw|wg|tr|rif|odp|ynt)\s*(?:\[\d+\]|\(\d+\))?\s*[:：]\s*/i
/** A mailing-list tag such as "[team]" in front of the subject. */
const listTag = /^\s*\[[^\]]{1,40}\]\s*/

export const normalizeSubject = (subject: string): string => {
  let current = subject
  for (;;) {
    const next = current.replace(prefix, "").replace(listTag, "")
    if (next === current) break
    current = next
  }
  return current.replace(/\s+/g, " ").trim().toLowerCase()
}

export type ThreadKey =
  | { readonly kind: "conversation"; readonly rootMessageId: string }
  | { readonly kind: "subject"; readonly subject: string; readonly sender: string }
  | { readonly kind: "single"; readonly id: string }

/** A thread's id: stable for a key within one mailbox, unguessable across mailboxes. */
export const threadId = (mailboxId: string, key: ThreadKey): string => {
  const material = key.kind === "conversation"
    ? `conversation\n${key.rootMessageId}`
    : key.kind === "subject"
    ? `subject\n${key.subject}\n${key.sender}`
    : `single\n${key.id}`
  return `thr_${sha256(`${mailboxId}\n${material}`).slice(0, 24)}`
}

/** The message ids an email refers to, References in order then In-Reply-To, without repeats. */
export const referencedIds = (references: ReadonlyArray<string>, inReplyTo: string | undefined): ReadonlyArray<string> => [
  ...new Set([...references, ...(inReplyTo ? [inReplyTo] : [])].filter((id) => id.length > 0))
]

/**
 * The key of a message that refers to nothing found in the mailbox: its conversation root if it
 * names one, else its subject and sender (the address, in any case), else itself.
 */
export const fallbackKey = (referenced: ReadonlyArray<string>, subject: string, sender: string, ownId: string): ThreadKey => {
  if (referenced.length > 0) return { kind: "conversation", rootMessageId: referenced[0]! }
  const normalized = normalizeSubject(subject)
  return normalized.length > 0 ? { kind: "subject", subject: normalized, sender: sender.toLowerCase() } : { kind: "single", id: ownId }
}

/**
 * The key of a new message the mailbox sends: to one person (To and Cc, in any case; Bcc is not in
 * the stored message), the key their answer naming nothing falls back to; else its own.
 */
const sentKey = (message: { readonly subject: string; readonly to: ReadonlyArray<string>; readonly cc: ReadonlyArray<string> }, ownId: string): ThreadKey => {
  const people = new Set([...message.to, ...message.cc].map((address) => address.toLowerCase()))
  const subject = normalizeSubject(message.subject)
  return people.size === 1 && subject.length > 0
    ? { kind: "subject", subject, sender: [...people][0]! }
    : { kind: "single", id: ownId }
}

/**
 * How the statement storing a message picks its thread, in the database, in the same round trip:
 * the thread of the newest email of the mailbox among `referenced`; else `own`, when an email of
 * the mailbox is in it already (replies that arrived before their original); else `fallback`.
 */
export interface ThreadChoice {
  readonly referenced: ReadonlyArray<string>
  readonly own: string | null
  readonly fallback: string
}

export const threadChoice = (
  mailboxId: string,
  message: {
    readonly references: ReadonlyArray<string>
    readonly inReplyTo: string | undefined
    readonly subject: string
    readonly to: ReadonlyArray<string>
    readonly cc: ReadonlyArray<string>
  },
  sender: string,
  messageId: string,
  direction: "inbound" | "outbound"
): ThreadChoice => {
  const referenced = referencedIds(message.references, message.inReplyTo)
  const fallback: ThreadKey = direction === "outbound" && referenced.length === 0
    ? sentKey(message, messageId)
    : fallbackKey(referenced, message.subject, sender, messageId)
  return {
    referenced,
    own: referenced.length === 0 ? threadId(mailboxId, { kind: "conversation", rootMessageId: messageId }) : null,
    fallback: threadId(mailboxId, fallback)
  }
}
