# Mailroom: one image for every role; ROLES picks what a container runs (default: all five).
# Node 22 LTS. The build stage compiles the TypeScript (npm run build, into dist/); the runtime stage
# holds that JavaScript and the production dependencies only (no tsx, no TypeScript), runs as the
# unprivileged `node` user, and answers Docker's health check with node itself (no curl in -slim).

FROM node:22-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci
COPY . .
RUN npm run build

FROM node:22-slim
WORKDIR /app
# Dependencies first, so a source change does not reinstall them.
COPY package.json package-lock.json ./
RUN npm ci --omit=dev && npm cache clean --force
COPY --from=build /app/dist ./dist
# The operator's command: bin/mailroom.mjs runs dist/src/main.js when tsx and the sources are absent,
# as here. `docker compose exec api-1 mailroom usage ada@example.com`, or `docker run … mailroom migrate`.
COPY bin ./bin
COPY deploy/healthcheck.mjs ./deploy/healthcheck.mjs
RUN ln -s /app/bin/mailroom.mjs /usr/local/bin/mailroom

# Listen on every interface inside the container; DATA_DIR holds generated secrets and, without
# DATABASE_URL, the embedded database (mount a volume there to keep it).
# A young generation of 64MB semi-spaces (V8's default 16MB): a request allocates much that dies young,
# and fewer scavenges cost ~10% less CPU per API request (README, Benchmarks: bench:api).
ENV NODE_ENV=production \
    NODE_OPTIONS=--max-semi-space-size=64 \
    HOST=0.0.0.0 \
    SMTP_HOST=0.0.0.0 \
    DATA_DIR=/data \
    PORT=3000 \
    SMTP_PORT=2525
RUN mkdir -p /data && chown node:node /data
USER node

EXPOSE 3000 2525
# /healthz with the api role; METRICS_PORT's /metrics, or the SMTP port, for the other roles.
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=5 \
  CMD ["node", "/app/deploy/healthcheck.mjs"]
CMD ["mailroom", "serve"]
