/**
 * Open connections per client address, for an SMTP listener to cap (SMTP_MAX_CONNECTIONS_PER_IP): one
 * flooding host cannot lock out the others. A session counts from its admission until it closes.
 */
import type { SMTPServerSession } from "smtp-server"

export const connectionCounter = (maxPerAddress: number) => {
  const byAddress = new Map<string, number>()
  const admitted = new WeakSet<SMTPServerSession>()
  return {
    /** Count `session` in, unless its address holds its share already (0: no cap). */
    admit: (session: SMTPServerSession): boolean => {
      const open = byAddress.get(session.remoteAddress) ?? 0
      if (maxPerAddress > 0 && open >= maxPerAddress) return false
      byAddress.set(session.remoteAddress, open + 1)
      admitted.add(session)
      return true
    },
    /** Count an admitted `session` out. */
    closed: (session: SMTPServerSession): void => {
      if (!admitted.delete(session)) return
      const open = (byAddress.get(session.remoteAddress) ?? 1) - 1
      if (open > 0) byAddress.set(session.remoteAddress, open)
      else byAddress.delete(session.remoteAddress)
    }
  } as const
}
