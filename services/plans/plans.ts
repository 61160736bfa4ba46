/**
 * Plans and what each allows (SPEC "Limits", DESIGN.md §4). `null` means unlimited.
 * The one place these numbers live.
 */
import { Schema } from "effect"

export const Plan = Schema.Literal("free", "pro", "enterprise")
export type Plan = typeof Plan.Type

const MB = 1024 * 1024
const GB = 1024 * MB

export interface RateWindows {
  readonly perMinute: number
  readonly perHour: number
  readonly perDay: number
}

export interface PlanLimits {
  /** Requests with an API key (per key) or an access token (per user). */
  readonly requests: RateWindows
  /**
   * Requests of a person in the dashboard (its session cookie), per user and counted apart from the
   * plan's: a person reading mail there makes a few requests a page, and should not meet 429s where an
   * agent would. At least Pro's, so the free plan's 100 an hour limit its agents, not its people.
   */
  readonly dashboardRequests: RateWindows
  /** Search requests per minute, a limit of its own. */
  readonly searchesPerMinute: number
  /** MCP requests per minute (SPEC), a limit of its own. */
  readonly mcpPerMinute: number
  readonly emailsPerDay: number
  /** Messages sent per UTC day and per billing period (`null`: unlimited). */
  readonly sendsPerDay: number
  readonly sendsPerMonth: number | null
  readonly emailsPerMonth: number | null
  readonly maxEmailBytes: number
  readonly searchesPerMonth: number | null
  readonly storageBytes: number | null
  readonly mailboxes: number | null
  /** pro 10, enterprise unlimited; free comes from FREE_MAX_CUSTOM_DOMAINS (see `customDomainLimit`). */
  readonly customDomains: number | null
  readonly webhooks: number | null
  /** Event streams (SSE, WebSocket) open at once, across every API node. */
  readonly eventStreams: number
}

export const limits: Record<Plan, PlanLimits> = {
  free: {
    requests: { perMinute: 20, perHour: 100, perDay: 1_000 },
    dashboardRequests: { perMinute: 100, perHour: 2_000, perDay: 20_000 },
    searchesPerMinute: 10,
    mcpPerMinute: 10,
    emailsPerDay: 100,
    emailsPerMonth: 100,
    sendsPerDay: 100,
    sendsPerMonth: 100,
    maxEmailBytes: 10 * MB,
    searchesPerMonth: 100,
    storageBytes: 1 * GB,
    mailboxes: 3,
    customDomains: 0,
    webhooks: 1,
    eventStreams: 2
  },
  pro: {
    requests: { perMinute: 100, perHour: 2_000, perDay: 20_000 },
    dashboardRequests: { perMinute: 100, perHour: 2_000, perDay: 20_000 },
    searchesPerMinute: 60,
    mcpPerMinute: 60,
    emailsPerDay: 10_000,
    emailsPerMonth: 10_000,
    sendsPerDay: 10_000,
    sendsPerMonth: 10_000,
    maxEmailBytes: 25 * MB,
    searchesPerMonth: 5_000,
    storageBytes: 50 * GB,
    mailboxes: 100,
    customDomains: 10,
    webhooks: 25,
    eventStreams: 10
  },
  enterprise: {
    requests: { perMinute: 500, perHour: 10_000, perDay: 100_000 },
    dashboardRequests: { perMinute: 500, perHour: 10_000, perDay: 100_000 },
    searchesPerMinute: 300,
    mcpPerMinute: 300,
    emailsPerDay: 100_000,
    emailsPerMonth: null,
    sendsPerDay: 100_000,
    sendsPerMonth: null,
    maxEmailBytes: 50 * MB,
    searchesPerMonth: null,
    storageBytes: null,
    mailboxes: null,
    customDomains: null,
    webhooks: null,
    eventStreams: 50
  }
}

/** The free plan's custom-domain limit is an operator setting (`FREE_MAX_CUSTOM_DOMAINS`). */
export const customDomainLimit = (plan: Plan, freeMaxCustomDomains: number): number | null =>
  plan === "free" ? freeMaxCustomDomains : limits[plan].customDomains

/**
 * SPEC rule 6: mailboxes on the account's verified custom domains are a paid plan's, to create and
 * to receive on; the free plan has the shared pool. An account back on free (a canceled or unpaid
 * subscription) keeps its mailboxes there, but their mail is refused for now (mail/inbound.ts).
 * An operator who lets the free plan add custom domains (FREE_MAX_CUSTOM_DOMAINS above 0) lets it use
 * them too: a domain it may add and verify but never use would be a trap.
 */
export const receivesOnCustomDomains = (plan: Plan, freeMaxCustomDomains: number): boolean =>
  plan !== "free" || freeMaxCustomDomains > 0

/** How an unlimited figure is reported where SPEC's type is a number. */
export const reportLimit = (limit: number | null): number => limit ?? -1
