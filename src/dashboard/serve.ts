/**
 * The dashboard's serving (issue 21): `/` answers the one HTML page, `/assets/*` the client's ES
 * modules and stylesheet from ./client, and `/assets/vendor/*` Preact, htm and uqr straight from their
 * installed packages. No build step: the browser loads plain ES modules, bare imports resolved by
 * the page's import map. Everything is read once, at start, and answered from memory.
 */
import { HttpApiBuilder, HttpRouter, HttpServerResponse } from "@effect/platform"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Effect, Option } from "effect"
import { eventKinds } from "../../services/webhooks/schemas.ts"
import { AppConfig, imapEndpoint, submissionEndpoint } from "../config.ts"
import { FRAME_SCRIPT } from "./client/frame-height.js"

const clientDir = path.join(path.dirname(fileURLToPath(import.meta.url)), "client")
const require = createRequire(import.meta.url)

/** Each vendored module by the name the client imports it by, and the installed file that is it. */
const vendor: ReadonlyArray<readonly [specifier: string, file: string, resolved: string]> = [
  ["preact", "preact.js", "preact"],
  ["preact/hooks", "preact-hooks.js", "preact/hooks"],
  ["htm", "htm.js", "htm"],
  ["htm/preact", "htm-preact.js", "htm/preact"],
  // QR codes of two-factor sign-in's secret, drawn in the browser: the secret never leaves the page as an image.
  ["uqr", "uqr.js", "uqr"]
].map(([specifier, file, id]) => [specifier!, file!, moduleFile(id!)] as const)

/**
 * The browser build of a package entry: its ES module file beside the CommonJS one `require` finds
 * (`x.module.js` beside `x.js`, or `x.mjs` beside `x.cjs`).
 */
function moduleFile(id: string): string {
  const cjs = require.resolve(id)
  const esm = cjs.endsWith(".cjs") ? cjs.replace(/\.cjs$/, ".mjs") : cjs.replace(/\.js$/, ".module.js")
  return fs.existsSync(esm) ? esm : cjs
}

const CONTENT_TYPES: Record<string, string> = {
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml"
}

interface Asset {
  readonly body: Uint8Array
  readonly contentType: string
}

const asset = (file: string): Asset => {
  // Source maps are not served: drop the comment so a browser does not ask for one.
  const text = fs.readFileSync(file, "utf8").replace(/\n\/\/# sourceMappingURL=\S+\s*$/, "\n")
  const body = new TextEncoder().encode(text)
  return { body, contentType: CONTENT_TYPES[path.extname(file)] ?? "application/octet-stream" }
}

const loadAssets = (): ReadonlyMap<string, Asset> => {
  const assets = new Map<string, Asset>()
  for (const name of fs.readdirSync(clientDir)) {
    if (CONTENT_TYPES[path.extname(name)]) assets.set(name, asset(path.join(clientDir, name)))
  }
  for (const [, file, resolved] of vendor) assets.set(`vendor/${file}`, asset(resolved))
  return assets
}

/** Every asset's content in one short hash: assets live under `/assets/<version>/`, so a new build is new URLs. */
const versionOf = (assets: ReadonlyMap<string, Asset>) => {
  const hash = createHash("sha256")
  for (const [name, { body }] of [...assets].sort(([a], [b]) => a.localeCompare(b))) hash.update(name).update(body)
  return hash.digest("hex").slice(0, 12)
}

const importMapOf = (version: string) =>
  JSON.stringify({ imports: Object.fromEntries(vendor.map(([specifier, file]) => [specifier, `/assets/${version}/vendor/${file}`])) })

const sha256 = (text: string) => `'sha256-${createHash("sha256").update(text).digest("base64")}'`

/**
 * The page's policy: scripts only from this origin (and the import map, by its hash). Mail is shown
 * in a sandboxed `srcdoc` frame, which inherits this policy on top of its own (mail-frame.js). So
 * this one must allow what a mail may show once the reader agrees: remote images (the frame's own
 * policy blocks them until then) and inline styles (mail is styled inline; the dashboard uses none),
 * and the one script the frame runs (frame-height.js), by its hash.
 */
export const contentSecurityPolicy = (importMap: string) => [
  "default-src 'none'",
  `script-src 'self' ${sha256(importMap)} ${sha256(FRAME_SCRIPT)}`,
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: https: http:",
  "connect-src 'self'",
  "frame-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'"
].join("; ")

const escapeAttribute = (value: string) => value.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

/**
 * Where mail programs send with a key and read a mailbox (`host:port:starttls|tls|plain`), when the
 * operator offers submission and IMAP.
 */
type MailEndpoint = ReturnType<typeof submissionEndpoint>

const endpointMeta = (name: string, endpoint: MailEndpoint) =>
  Option.match(endpoint, {
    onNone: () => "",
    onSome: ({ host, port, security }) => `<meta name="${name}" content="${escapeAttribute(`${host}:${port}:${security}`)}">\n`
  })

const page = (version: string, importMap: string, sharedDomains: ReadonlyArray<string>, submission: MailEndpoint, imap: MailEndpoint) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Mailroom</title>
<meta name="mailroom-shared-domains" content="${escapeAttribute(sharedDomains.join(","))}">
<meta name="mailroom-event-kinds" content="${escapeAttribute(eventKinds.join(","))}">
${endpointMeta("mailroom-submission", submission)}${endpointMeta("mailroom-imap", imap)}<link rel="icon" href="/assets/${version}/icon.svg">
<link rel="stylesheet" href="/assets/${version}/dashboard.css">
<script type="importmap">${importMap}</script>
<script type="module" src="/assets/${version}/main.js"></script>
</head>
<body><div id="app"><noscript>The Mailroom dashboard needs JavaScript.</noscript></div></body>
</html>
`

/** `/`, `/assets/*`: mounted beside the API's routes by src/http/server.ts. */
export const DashboardLive = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    const config = yield* AppConfig
    const assets = loadAssets()
    const version = versionOf(assets)
    const importMap = importMapOf(version)
    const html = HttpServerResponse.html(page(version, importMap, config.sharedDomains, submissionEndpoint(config), imapEndpoint(config))).pipe(HttpServerResponse.setHeaders({
      "content-security-policy": contentSecurityPolicy(importMap),
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer",
      // The page names the current assets' version: always asked for again.
      "cache-control": "no-cache"
    }))

    yield* router.get("/", Effect.succeed(html))
    // Browsers ask every page of the origin for it (the docs, the payment pages): the dashboard's icon.
    const icon = assets.get("icon.svg")!
    yield* router.get(
      "/favicon.ico",
      Effect.succeed(HttpServerResponse.uint8Array(icon.body, { contentType: icon.contentType, headers: { "cache-control": "public, max-age=86400" } }))
    )
    yield* router.get(
      "/assets/:version/*",
      Effect.gen(function*() {
        const params = yield* HttpRouter.params
        const found = params.version === version ? assets.get(params["*"] ?? "") : undefined
        if (!found) return HttpServerResponse.text("Not found", { status: 404 })
        return HttpServerResponse.uint8Array(found.body, {
          contentType: found.contentType,
          headers: {
            "x-content-type-options": "nosniff",
            "cache-control": "public, max-age=31536000, immutable"
          }
        })
      })
    )
  })
)
