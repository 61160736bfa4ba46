import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Suites start real servers, databases and NATS streams: two files at a time suits 2 cores.
    maxWorkers: 2,
    minWorkers: 1,
    pool: "forks"
  }
})
