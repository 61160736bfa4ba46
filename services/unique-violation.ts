import type { SqlError } from "@effect/sql/SqlError"

/** A write that broke a unique constraint (PostgreSQL 23505): the row's key was taken meanwhile. */
export const isUniqueViolation = (error: unknown): boolean =>
  typeof error === "object" && error !== null && (error as { _tag?: string })._tag === "SqlError" &&
  ((error as SqlError).cause as { code?: string } | undefined)?.code === "23505"
