/**
 * The command line's text and its two kinds of failure, apart from the commands themselves, so that
 * `mailroom help` and a mistyped command answer without loading the server (src/main.ts).
 */
import { Schema } from "effect"

export const usage = `Usage: mailroom [command]

Commands:
  serve                         run the roles in ROLES (default: all) until SIGTERM; the default
  migrate                       apply the database migrations and exit
  reindex [--all]               embed mail not searchable with the current embedding model (--all: every email afresh, words too);
                                then read again the words of mail an earlier version indexed differently;
                                first, give mail stored with html and no text its text, and index its words
  dns-records                   print the DNS records to publish for SHARED_DOMAINS
  users create <email> [--name <name>] [--password-stdin] [--plan <plan>]
                                create an account (a password is generated and printed unless read from stdin)
  users set-plan <email> <plan> move an account to free, pro or enterprise (no payment taken)
  users set-password <email> [--password-stdin]
                                set an account's password (generated and printed unless read from stdin);
                                every session of the account is signed out
  users reset-two-factor <email>
                                turn two-factor sign-in off for a person who lost their authenticator app
                                and recovery codes (the password alone signs in until it is on again)
  users delete <email> --yes    delete an account and everything it holds, for good (its subscription ends;
                                its addresses are held from other accounts for 30 days)
  keys revoke <key_id>          revoke an API key
  usage <email>                 an account's plan, usage this period and counts
  help                          this text

Settings are the server's environment variables (see .env.example).
`

/** The commands main.ts knows, checked before anything is loaded. */
export const commands = ["serve", "migrate", "reindex", "dns-records", "users", "keys", "usage", "help"] as const

/** A wrong command line (the operator's mistake, an expected failure): the message and the usage, exit 2. */
export class UsageError extends Schema.TaggedError<UsageError>()("UsageError", { message: Schema.String }) {}

/** The command line is wrong: `message` says how. */
export const usageError = (message: string) => new UsageError({ message })

/** A command that ran and could not do what was asked: the message, exit 1. */
export class CommandFailed extends Error {}

