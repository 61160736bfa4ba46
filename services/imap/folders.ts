/**
 * How a mailbox's mail appears to a mail program over IMAP: as folders, and each message's flags.
 *
 * Folders are views of the mail by what it is, not places mail is kept (an email has labels, not a
 * folder):
 * - INBOX: mail received, but not spam or blocked (those are in Junk);
 * - Sent: mail sent from the mailbox (by the API, by MCP or by SMTP submission);
 * - Junk: mail received that rspamd called spam or the sender lists blocked;
 * - Trash: always empty. Mailroom keeps no deleted mail, so moving mail into Trash deletes it, as
 *   DELETE /emails does; it is there because mail programs delete by moving mail to it;
 * - one folder per label of the account's own that the mailbox's mail carries (a label `a/b` is the
 *   folder b inside a, `/` being the hierarchy's separator). A label named as a system folder, or
 *   whose name begins `Labels/`, is listed under `Labels/`: the label `Sent` is `Labels/Sent`, the
 *   label `Labels/Sent` is `Labels/Labels/Sent`, so that no two labels share a folder. A label with an
 *   empty level (`a//b`, stored before the API refused them) is no folder.
 *
 * Flags come from labels: `\Seen` is the absence of `unread` (sent mail is seen), `\Flagged` is the
 * label `flagged`. Other labels are folders, not keywords.
 *
 * Only `effect`-free TypeScript here: the IMAP server (src/imap) and the store both read it.
 */
import { UNREAD } from "../mail/label-rules.ts"

export type FolderKind = "inbox" | "sent" | "junk" | "trash" | "label"

export interface Folder {
  /** As the mail program sees it (before modified UTF-7). */
  readonly name: string
  readonly kind: FolderKind
  /** A label folder's label. */
  readonly label?: string
  /** RFC 6154's special use, for programs to put the folder in its place. */
  readonly specialUse?: "\\Sent" | "\\Junk" | "\\Trash"
}

export const HIERARCHY_DELIMITER = "/"
export const FLAGGED_LABEL = "flagged"
/** Labels that put received mail in Junk rather than INBOX. */
export const JUNK_LABELS: ReadonlyArray<string> = ["spam", "blocked"]
/**
 * System labels (label-rules.ts): stated by flags or by the folders above, never folders of their own.
 * In the order of migration 0084's index of the mail carrying any other.
 */
export const SYSTEM_LABELS: ReadonlySet<string> = new Set(["inbound", "sent", UNREAD, "spam", "unauthenticated", "blocked", FLAGGED_LABEL])

export const systemFolders: ReadonlyArray<Folder> = [
  { name: "INBOX", kind: "inbox" },
  { name: "Sent", kind: "sent", specialUse: "\\Sent" },
  { name: "Junk", kind: "junk", specialUse: "\\Junk" },
  { name: "Trash", kind: "trash", specialUse: "\\Trash" }
]

const LABELS_PARENT = "Labels"

const isSystemName = (name: string) => systemFolders.some((folder) => folder.name.toLowerCase() === name.toLowerCase())

/** Whether a label's folder is listed under `Labels/`: its first level is a system folder's name, or `Labels` itself. */
const listedApart = (label: string) => {
  const first = label.split(HIERARCHY_DELIMITER)[0]!
  return isSystemName(first) || first === LABELS_PARENT
}

/**
 * Whether a label has an empty level (`/lead`, `trail/`, `a//b`): the API no longer takes one
 * (label-rules.ts), but one stored before has no folder a mail program can open (an empty-named
 * parent, a name a client cannot send back), so it is shown as no folder, as a system label is.
 */
const hasEmptyLevel = (label: string) => label.split(HIERARCHY_DELIMITER).some((level) => level === "")

/** The folder of an account's label (undefined for a system label, or one with an empty level: no folder). */
export const labelFolder = (label: string): Folder | undefined =>
  SYSTEM_LABELS.has(label) || hasEmptyLevel(label)
    ? undefined
    : { name: listedApart(label) ? `${LABELS_PARENT}/${label}` : label, kind: "label", label }

/** The folders of a mailbox whose mail carries `labels`: the system ones, then the labels' by name. */
export const foldersOf = (labels: ReadonlyArray<string>): ReadonlyArray<Folder> => [
  ...systemFolders,
  ...labels.flatMap((label) => labelFolder(label) ?? []).sort((a, b) => a.name.localeCompare(b.name))
]

/**
 * The folder a mail program's name means, before asking whether the mailbox's mail carries its label:
 * a system folder (INBOX in any case, RFC 3501 §5.1; the others as listed), or a label's (`Labels/Sent`
 * is the label `Sent`); undefined for a name no folder has.
 */
export const folderNamed = (name: string): Folder | undefined => {
  if (name.toUpperCase() === "INBOX") return systemFolders[0]!
  const system = systemFolders.find((folder) => folder.name === name)
  if (system !== undefined) return system
  const prefix = `${LABELS_PARENT}/`
  const folder = labelFolder(name.startsWith(prefix) ? name.slice(prefix.length) : name)
  return folder?.name === name ? folder : undefined
}

/** The key a folder's UIDs are kept under (imap_folders.folder). */
export const folderKey = (folder: Folder): string => (folder.kind === "label" ? `label:${folder.label}` : folder.kind)

/** Names of the folders that exist as parents of others (`a` of `a/b`) without being folders themselves. */
export const impliedParents = (folders: ReadonlyArray<Folder>): ReadonlyArray<string> => {
  const names = new Set(folders.map((folder) => folder.name))
  const parents = new Set<string>()
  for (const folder of folders) {
    const parts = folder.name.split(HIERARCHY_DELIMITER)
    for (let i = 1; i < parts.length; i++) {
      const parent = parts.slice(0, i).join(HIERARCHY_DELIMITER)
      if (!names.has(parent)) parents.add(parent)
    }
  }
  return [...parents].sort()
}

export type SystemFlag = "\\Seen" | "\\Flagged"
export const PERMANENT_FLAGS: ReadonlyArray<SystemFlag> = ["\\Seen", "\\Flagged"]
/**
 * The flags no label holds, kept for IMAP alone (imap_flags) as a mail program sets them, with its
 * keywords: the email's in every folder that shows it. Received mail the mailbox has answered shows
 * \Answered besides, and mail it forwarded $Forwarded (the keyword mail programs set on a forward).
 */
export type KeptFlag = "\\Answered" | "\\Deleted" | "\\Draft"
export const KEPT_FLAGS: ReadonlyArray<KeptFlag> = ["\\Answered", "\\Deleted", "\\Draft"]
export const FORWARDED_KEYWORD = "$Forwarded"
/** Keywords a message may carry, and how long one may be. */
export const MAX_KEYWORDS = 32
const MAX_KEYWORD_CHARS = 64

/** A keyword (RFC 3501's flag-keyword: an atom, `$Forwarded`, `NonJunk`, `$label1`), as a client may keep one. */
export const isWellFormedKeyword = (flag: string): boolean =>
  flag.length <= MAX_KEYWORD_CHARS && /^[\x21-\x7e]+$/.test(flag) && !/[(){%*"\]\\]/.test(flag)

/** Whether a flag is a keyword, not one of the system flags (which begin with a backslash). */
export const isKeywordFlag = (flag: string): boolean => !flag.startsWith("\\")

/** Whether two flags are one (flag names are not case-sensitive). */
export const sameFlag = (a: string, b: string): boolean => a.toLowerCase() === b.toLowerCase()

/** Each flag once, as first written (flag names are not case-sensitive). */
export const onceEach = (flags: ReadonlyArray<string>): Array<string> => {
  const seen = new Map<string, string>()
  for (const flag of flags) if (!seen.has(flag.toLowerCase())) seen.set(flag.toLowerCase(), flag)
  return [...seen.values()]
}

/** What a message's flags are made of: its labels, the flags and keywords kept for it, what the mailbox did with it. */
export interface Flagged {
  readonly direction: string
  readonly labels: ReadonlyArray<string>
  readonly kept: ReadonlyArray<string>
  readonly answered: boolean
  readonly forwarded: boolean
}

/** A message's keywords: kept, and $Forwarded when the mailbox forwarded it. */
export const keywordsOf = (message: Flagged): Array<string> => {
  const keywords = message.kept.filter(isKeywordFlag)
  return message.forwarded && !keywords.some((flag) => sameFlag(flag, FORWARDED_KEYWORD)) ? [FORWARDED_KEYWORD, ...keywords] : keywords
}

/** `\Seen`: sent mail, and received mail not labelled unread. */
export const isSeen = (message: Pick<Flagged, "direction" | "labels">): boolean =>
  message.direction === "outbound" || !message.labels.includes(UNREAD)

/** A message's flags, in the order FLAGS lists them: the system flags, then its keywords. */
export const flagsOf = (message: Flagged): Array<string> => {
  const flags: Array<string> = []
  if (isSeen(message)) flags.push("\\Seen")
  if (message.labels.includes(FLAGGED_LABEL)) flags.push("\\Flagged")
  for (const flag of KEPT_FLAGS) {
    if (message.kept.includes(flag) || (flag === "\\Answered" && message.answered)) flags.push(flag)
  }
  return [...flags, ...keywordsOf(message)]
}

/** The label change that gives a message `flag` (`set`) or takes it away. */
export const labelChangeFor = (flag: SystemFlag, set: boolean): { readonly add: Array<string>; readonly remove: Array<string> } => {
  const label = flag === "\\Seen" ? UNREAD : FLAGGED_LABEL
  // \Seen is the absence of unread: setting it removes the label.
  const adds = flag === "\\Seen" ? !set : set
  return adds ? { add: [label], remove: [] } : { add: [], remove: [label] }
}

/**
 * What COPY or MOVE of inbound or sent mail from `source` to `target` does to the emails' labels, or
 * why it cannot be done. Folders show mail by its labels, so filing is labelling:
 * - into a label's folder: the label added (MOVE: the source label's removed, or the Junk verdicts
 *   when it leaves Junk); INBOX and Sent keep their mail, so only COPY files it from there;
 * - MOVE into Junk: the `spam` label (and the source label's removed): a person's verdict;
 * - MOVE into INBOX: the Junk verdicts removed (and the source label's);
 * - nothing into Sent, and no COPY into INBOX or Junk (mail is in one of them or the other);
 * - MOVE into Trash: the emails deleted (`deletes`).
 */
export const filing = (
  source: Folder,
  target: Folder,
  move: boolean,
  directions: ReadonlyArray<string>
): { readonly add: Array<string>; readonly remove: Array<string> } | { readonly deletes: true } | { readonly refused: string } => {
  if (source.name === target.name) return { refused: "The messages are in this folder already" }
  const fromLabel = source.kind === "label" ? [source.label!] : []
  switch (target.kind) {
    case "sent":
      return { refused: "Sent holds the mail sent from this mailbox; nothing is filed there" }
    case "trash":
      return move ? { deletes: true } : { refused: "MOVE mail to Trash to delete it" }
    case "label":
      if (!move) return { add: [target.label!], remove: [] }
      if (source.kind === "inbox" || source.kind === "sent") {
        return { refused: `${source.name} keeps its mail: COPY to label it instead` }
      }
      return { add: [target.label!], remove: source.kind === "junk" ? [...JUNK_LABELS] : fromLabel }
    case "junk":
    case "inbox": {
      if (!move) return { refused: `Mail is in INBOX or in Junk: MOVE it between them` }
      if (directions.some((direction) => direction !== "inbound")) return { refused: "Only received mail goes to INBOX or Junk" }
      if (source.kind === "sent") return { refused: "Sent keeps its mail" }
      return target.kind === "junk"
        ? { add: ["spam"], remove: fromLabel }
        : { add: [], remove: [...fromLabel, ...JUNK_LABELS] }
    }
  }
}
