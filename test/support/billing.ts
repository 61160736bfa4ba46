/** Move a test user to a paid plan through the local payment provider, as a user would. */
import type { Client } from "./http.ts"

export const upgrade = async (api: Client, serverUrl: string, apiKey: string, plan: "pro" | "enterprise") => {
  const checkout = await api.post("/v1/billing/checkout", {
    apiKey,
    body: { plan, successUrl: "https://example.com/done", cancelUrl: "https://example.com/cancel" }
  })
  if (checkout.status !== 200) throw new Error(`checkout failed: ${checkout.status} ${checkout.text}`)
  const confirm = await fetch(`${serverUrl}${new URL(checkout.body.data.url).pathname}`, { method: "POST", redirect: "manual" })
  if (confirm.status !== 303) throw new Error(`checkout not confirmed: ${confirm.status}`)
}
