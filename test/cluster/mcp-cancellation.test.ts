/**
 * MCP's cancellation across API nodes: the endpoint is stateless, so a load balancer may hand a
 * client's `notifications/cancelled` to another node than the one running the call it names. That
 * node tells the others over the bus, and the one running it stops it (src/http/mcp/cancellation.ts).
 * Two api nodes sharing PostgreSQL and NATS; the PostgreSQL + NATS run only (the embedded run has one
 * process; test/api/mcp.test.ts proves cancellation within a node).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { withApiKey } from "../support/accounts.ts"
import { type FakeQdrant, startFakeQdrant } from "../support/fake-qdrant.ts"
import { newBox } from "../support/mailboxes.ts"
import { type Backend, createBackend, type Server, startServer } from "../support/server.ts"
import { mode } from "../support/services.ts"
import { sleep, until } from "../support/wait.ts"
import { mcpInitialize, mcpPoster } from "../support/mcp-http.ts"


describe.skipIf(mode !== "postgres")("MCP cancellation across API nodes", () => {
  let backend: Backend
  let qdrant: FakeQdrant
  let running: Server
  let other: Server

  beforeAll(async () => {
    backend = await createBackend()
    // A node of a cluster needs a vector index every node shares; this PostgreSQL has no pgvector.
    qdrant = await startFakeQdrant()
    const env = { ...backend.env, ROLES: "api", QDRANT_URL: qdrant.url, LOG_LEVEL: "info" }
    running = await startServer(env)
    other = await startServer(env)
  }, 180_000)

  afterAll(async () => {
    await Promise.all([running, other].filter((server) => server !== undefined).map((server) => server.stop()))
    await qdrant?.close()
    await backend?.dispose()
  })

  it("stops a call that another node runs when its client's cancellation reaches this one; another session's is not it", async () => {
    const user = await withApiKey(running.url)
    const inbox = await newBox(running.url, { user })
    const initialized = await mcpInitialize(running.url, user.apiKey)
    expect(initialized.status).toBe(200)
    const session = initialized.headers.get("mcp-session-id")!
    expect(session).toMatch(/^[\w-]{22}$/)
    const logged = running.output().length
    const cancelledThere = () => running.output().slice(logged).includes("MCP tool call cancelled by its client (notifications/cancelled)")
    const waiting = mcpPoster(running.url, user.apiKey, session)({
      jsonrpc: "2.0",
      id: 2,
      method: "tools/call",
      params: { name: "wait_for_email", arguments: { mailbox_id: inbox.mailboxId, timeout_seconds: 30 } }
    })
    await sleep(1_000)
    const cancel = (session: string | undefined) =>
      mcpPoster(other.url, user.apiKey, session)({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 2, reason: "test" } })
    // The same id in no session, or in another, is not the call: it waits on.
    expect((await cancel(undefined)).status).toBe(202)
    expect((await cancel("another-session")).status).toBe(202)
    expect(await Promise.race([waiting.then(() => "answered"), sleep(1_500).then(() => "still waiting")])).toBe("still waiting")
    expect(cancelledThere()).toBe(false)
    // Its own session's cancellation, sent to the other node: the call stops, and its POST has no JSON-RPC answer.
    expect((await cancel(session)).status).toBe(202)
    const answer = await Promise.race([waiting, sleep(10_000).then(() => undefined)])
    expect(answer?.status).toBe(202)
    expect(await answer?.text()).toBe("")
    await until("the running node stops the call", async () => (cancelledThere() ? true : undefined), 10_000, 100)
  }, 60_000)
})
