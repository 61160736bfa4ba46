/**
 * Baseline (a): bare node:http answering the fixed JSON on any path. Listens on `PORT`.
 */
import { createServer } from "node:http"
import { payload } from "../payload.ts"

const body = JSON.stringify(payload)
const port = Number(process.env.PORT ?? 0)

createServer((_request, response) => {
  response.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) })
  response.end(body)
}).listen(port, "127.0.0.1")
