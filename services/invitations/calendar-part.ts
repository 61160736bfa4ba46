/**
 * Which of an email's parts is its calendar, as a subquery over the email `e` (join it LATERAL): a
 * `text/calendar` part (the iMIP alternative Google, Outlook and Apple send) first, else an
 * `application/ics` or `.ics` attachment, the first in the message's order. The invitation an email
 * carries, the answer a meeting receives and the schedule all read this one.
 */
import type { SqlClient } from "@effect/sql"

export const calendarPart = (sql: SqlClient.SqlClient) =>
  sql`
    SELECT a.id, a.size, a.checksum, a.charset FROM attachments a
    WHERE a.email_id = e.id
      AND (lower(a.content_type) IN ('text/calendar', 'application/ics') OR lower(a.filename) LIKE '%.ics')
    ORDER BY lower(a.content_type) = 'text/calendar' DESC, a.position
    LIMIT 1`
