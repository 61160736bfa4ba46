/**
 * Writes the OpenAPI document, built from the contract alone (no server, no database), to the path
 * given (or stdout): what `npm run lint:openapi` hands to redocly.
 */
import { OpenApi } from "@effect/platform"
import { writeFileSync } from "node:fs"
import { MailroomApi } from "../src/http/api.ts"

const document = JSON.stringify(OpenApi.fromApi(MailroomApi), null, 2)
const target = process.argv[2]
if (target === undefined) process.stdout.write(document + "\n")
else writeFileSync(target, document + "\n")
