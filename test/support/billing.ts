/** Move a test user to a paid plan through the local payment provider, as a user would. */
import { withKey } from "./typed-client.ts"

export const upgrade = async (baseUrl: string, apiKey: string, plan: "pro" | "enterprise") => {
  const checkout = await withKey(baseUrl, { apiKey }).POST("/v1/billing/checkout", {
    body: { plan, successUrl: "https://example.com/done", cancelUrl: "https://example.com/cancel" }
  })
  if (checkout.response.status !== 200 || !checkout.data) {
    throw new Error(`checkout failed: ${checkout.response.status} ${JSON.stringify(checkout.error)}`)
  }
  const confirm = await fetch(`${baseUrl}${new URL(checkout.data.data.url).pathname}`, { method: "POST", redirect: "manual" })
  if (confirm.status !== 303) throw new Error(`checkout not confirmed: ${confirm.status}`)
}
