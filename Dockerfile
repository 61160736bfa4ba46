# Mailroom: one image for every role; ROLES picks what a container runs (default: all three).
FROM node:20-slim

WORKDIR /app

# Dependencies first, so a source change does not reinstall them.
COPY package.json package-lock.json ./
RUN npm ci && npm cache clean --force

COPY . .

# Listen on every interface inside the container; DATA_DIR holds generated secrets and, without
# DATABASE_URL, the embedded database (mount a volume there to keep it).
ENV HOST=0.0.0.0 \
    SMTP_HOST=0.0.0.0 \
    DATA_DIR=/data \
    PORT=3000 \
    SMTP_PORT=2525
RUN mkdir -p /data && chown node:node /data
USER node

EXPOSE 3000 2525
CMD ["npm", "start"]
