/**
 * MCP over plain HTTP, as a client of our own making: one JSON-RPC message a POST to `/mcp`, with the
 * headers the Streamable HTTP transport sends, and the `Mcp-Session-Id` a client was given at
 * `initialize` when it has one. For suites that choose their own request ids (the official SDK client
 * numbers them itself).
 */
export const mcpPoster = (url: string, apiKey: string, session: string | undefined) => (message: unknown): Promise<Response> =>
  fetch(`${url}/mcp`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${apiKey}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2025-06-18",
      ...(session === undefined ? {} : { "mcp-session-id": session })
    },
    body: JSON.stringify(message)
  })

/** `initialize`, as a client without a session yet: the answer carries the `Mcp-Session-Id` it is given. */
export const mcpInitialize = (url: string, apiKey: string): Promise<Response> =>
  mcpPoster(url, apiKey, undefined)({
    jsonrpc: "2.0",
    id: 0,
    method: "initialize",
    params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1.0.0" } }
  })
