/**
 * The body every baseline server answers with: the shape and size of Mailroom's
 * `GET /v1/api-keys?limit=2` for a user with two keys, so the three targets send alike bodies.
 */
const key = (n: number) => ({
  keyId: `key_01JBENCH${String(n).padStart(17, "0")}`,
  name: `bench key ${n}`,
  keyPrefix: "mr_live_abcd...wxyz",
  plan: "enterprise" as const,
  rateLimit: 500,
  lastUsed: null,
  createdAt: "2026-11-22T07:00:00.000Z",
  expirationTs: null
})

export const payload = {
  success: true as const,
  data: [key(1), key(2)],
  meta: { total: 2, limit: 2, offset: 0, hasMore: false }
}
