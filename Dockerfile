# syntax=docker/dockerfile:1
# spoke-agent image: `docker build -t spoke-agent:0.1.0 .`. The runtime has Node 24 and the
# agent bundled with its dependencies (no node_modules) only: no shell, no package manager, uid 65532.

# Type-checks and bundles the agent into dist/ (cmd/build.ts; with the .proto files it loads at run time), and the
# Node-API helpers to build/ (cmd/build-native.ts: the DNS server's batched UDP, TCP_USER_TIMEOUT for the agent's
# connections to the hub; C: the full image has the compiler).
FROM node:24-trixie AS build
WORKDIR /src
COPY package.json package-lock.json ./
# No install scripts: tsc needs none (the `node` devDependency's would fetch a second Node).
RUN npm ci --ignore-scripts --no-audit --no-fund
# The sources: .dockerignore leaves out tests, benchmarks, manifests and docs.
COPY . ./
RUN npm run build && npm run build:native && test -f build/udp-batch.node && test -f build/tcp-options.node

FROM gcr.io/distroless/nodejs24-debian13:nonroot
WORKDIR /app
ENV NODE_ENV=production
# package.json for "type": "module": dist/ is ESM.
COPY package.json ./
# No node_modules: the bundle in dist/ carries every dependency it runs (cmd/build.ts).
COPY --from=build /src/dist ./dist
COPY --from=build /src/build ./build
# What cluster-proxy's proxy-agent container runs: the same agent (manifests/cluster-proxy/README.md).
COPY --chmod=0755 cmd/proxy-agent /proxy-agent
USER 65532:65532
# Health (/healthz /readyz /metrics /debug) and DNS (unprivileged: no root, no capability).
EXPOSE 8093/tcp 5353/udp 5353/tcp
# Node is PID 1: the agent handles SIGTERM itself (drains, then exits 0; a second signal exits at once).
ENTRYPOINT ["/nodejs/bin/node", "/app/dist/cmd/main.js"]
