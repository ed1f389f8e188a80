# syntax=docker/dockerfile:1
# Two stages: a build stage that compiles TypeScript, and a slim runtime stage with production
# dependencies only. better-sqlite3 (13, Node-API) ships its compiled module for each platform, so
# no C++ toolchain is needed.
# scripts/docker-dry-run.ts replays these steps without a Docker engine (CI has
# none); it reads them from this file, so keep every step a plain COPY / RUN / ENV.

FROM node:22-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# No install scripts: better-sqlite3's is node-gyp's default (it would need Python and make, and
# builds nothing when its module ships). No optional packages: all are dev tools' platform builds,
# among them the Node.js for the npm scripts (tools/pinned-node, a 52 MB download); the image's own
# Node.js runs the build.
RUN npm ci --no-audit --no-fund --ignore-scripts --omit=optional
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY migrations ./migrations
# The build's second step (kysely and zod bundled into dist/vendor: the receiver starts 60-75 ms sooner).
COPY scripts/bundle-vendor.mjs ./scripts/bundle-vendor.mjs
RUN npm run build
RUN npm prune --omit=dev --no-audit --no-fund
# better-sqlite3 needs only its module for this platform at run time (prebuilds/linux-x64.node, say,
# 2 MB). Its SQLite sources (deps/, 10 MB), C++ sources and the other seven platforms' modules
# (15 MB) are dropped. A platform with no module of its own fails here, not at the first start.
RUN cd node_modules/better-sqlite3 && keep="$(node -p "const p = require('./lib/binding.js').getPrebuildPath(); if (!p) throw new Error('better-sqlite3 ships no compiled module for ' + process.platform + '-' + process.arch + ': build the image for linux/amd64 or linux/arm64'); require('node:path').basename(p)")" && rm -rf deps src binding.gyp && find prebuilds -type f ! -name "$keep" -delete && test -f "prebuilds/$keep"

FROM node:22-bookworm-slim AS runtime
# RUN_AS: the process starts as root, makes the database folder the node user's and drops to it
# for good before anything else (src/cli/runAs.ts). Not `USER node`: a volume mounted from
# outside (Fly.io volumes, bind mounts) is owned by root, where node could not create the database.
# METRICS_PORT: /metrics on its own port, not on the webhook port that `-p 8080:8080` publishes
# (it names sources and sinks and counts deliveries); scrape 9091 over a private network.
ENV NODE_ENV=production PORT=8080 HOST=0.0.0.0 DATABASE_PATH=/data/receiver.db RUN_AS=node METRICS_PORT=9091
WORKDIR /app
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/migrations ./migrations
# The database lives on a volume owned by the unprivileged user; the CLI is on PATH as hiring-receiver.
RUN mkdir -p /data && chown node:node /data && chmod +x /app/dist/cli/main.js && ln -s /app/dist/cli/main.js /usr/local/bin/hiring-receiver
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=15s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# Run with `docker run --init` (Compose `init: true`): as PID 1, node drops a SIGTERM that arrives
# before its handlers are installed (README "Docker"). The handlers: stop accepting,
# finish in-flight requests and their commit, drain workers, close the database.
STOPSIGNAL SIGTERM
# `docker run IMAGE` serves; `docker run IMAGE status` (or `docker exec CONTAINER hiring-receiver status`) runs the CLI.
ENTRYPOINT ["node", "--enable-source-maps", "--max-semi-space-size=4", "--heap-growing-percent=30", "dist/cli/main.js"]
CMD ["serve"]
