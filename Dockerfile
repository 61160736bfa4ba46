# Mailroom: one image for every role; ROLES picks what a container runs (default: all three).
# Node 22 LTS; the image runs the compiled JavaScript with production dependencies only (no tsx).

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

# Listen on every interface inside the container; DATA_DIR holds generated secrets and, without
# DATABASE_URL, the embedded database (mount a volume there to keep it).
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    SMTP_HOST=0.0.0.0 \
    DATA_DIR=/data \
    PORT=3000 \
    SMTP_PORT=2525
RUN mkdir -p /data && chown node:node /data
USER node

EXPOSE 3000 2525
CMD ["node", "dist/src/main.js"]
