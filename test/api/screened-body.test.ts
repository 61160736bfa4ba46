/**
 * The screen (src/http/input-rules.ts) reads a body's bytes once, to refuse what is not UTF-8, and
 * hands the routes a request whose body is that text: read as text, JSON, bytes or a stream, and in a
 * copy with another URL (as a router that rewrites it makes), it is the body as sent.
 */
import { HttpServerRequest } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Stream } from "effect"
import { screen } from "../../src/http/input-rules.ts"

const body = JSON.stringify({ name: "Grüße 東京 🤖" })

const sent = () =>
  HttpServerRequest.fromWeb(new Request("http://localhost/v1/api-keys", {
    method: "POST",
    headers: { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) },
    body
  }))

describe("a screened body", () => {
  it.effect("reads as sent, every way and in a copy with another URL", () =>
    Effect.gen(function*() {
      const screened = yield* screen(sent())
      expect(yield* screened.text).toBe(body)
      expect(yield* screened.json).toEqual({ name: "Grüße 東京 🤖" })
      expect(new TextDecoder().decode(yield* screened.arrayBuffer)).toBe(body)
      const chunks = yield* Stream.runCollect(screened.stream)
      expect(Buffer.concat(Chunk.toReadonlyArray(chunks)).toString("utf8")).toBe(body)
      const moved = screened.modify({ url: "/api-keys" })
      expect(moved.url).toBe("/api-keys")
      expect(yield* moved.json).toEqual({ name: "Grüße 東京 🤖" })
    }))
})
