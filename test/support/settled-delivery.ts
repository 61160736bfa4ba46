import type { MailroomFetchClient } from "../../packages/client/src/fetch-client.ts"
import { until } from "./wait.ts"

/**
 * The email once every recipient's delivery is settled (not queued, not deferred), polled more gently
 * the longer it takes (a slow machine would otherwise spend the free plan's 20 requests a minute).
 */
export const settled = (mailroom: MailroomFetchClient, emailId: string) =>
  until(`delivery of ${emailId} settled`, async () => {
    const { data, response } = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId } } })
    if (!data) throw new Error(`reading ${emailId}: HTTP ${response.status}`)
    const delivery = data.data.delivery ?? []
    return delivery.length > 0 && delivery.every((d) => d.status !== "queued" && d.status !== "deferred") ? data.data : undefined
  }, 20_000, 100, 500)
