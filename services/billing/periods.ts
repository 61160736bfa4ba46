/** Billing periods. A free subscription's period is the calendar month (UTC). */
export interface Period {
  readonly start: Date
  readonly end: Date
}

export const calendarMonth = (now: Date): Period => ({
  start: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)),
  end: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1))
})

/** The same day and time next month, clamped to the month's last day (Jan 31 → Feb 28/29). */
export const addMonth = (from: Date): Date => {
  const target = new Date(from)
  target.setUTCDate(1)
  target.setUTCMonth(target.getUTCMonth() + 1)
  const lastDay = new Date(Date.UTC(target.getUTCFullYear(), target.getUTCMonth() + 1, 0)).getUTCDate()
  target.setUTCDate(Math.min(from.getUTCDate(), lastDay))
  return target
}
