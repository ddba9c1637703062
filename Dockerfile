# kube-ipvs-proxy container image: the DaemonSet's entrypoint (charts/kube-ipvs-proxy).
#   docker build -t kube-ipvs-proxy:$(node -p "require('./package.json').version") .
# Build stage: the native addon (node-gyp; needs the kernel UAPI headers of linux-libc-dev)
# and the TypeScript, then only the production dependencies are kept.
FROM node:20-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ linux-libc-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
# node-gyp builds against the headers the node image ships instead of downloading them.
ENV npm_config_nodedir=/usr/local
COPY package.json package-lock.json binding.gyp tsconfig.json ./
COPY native ./native
COPY src ./src
# npm ci runs "install" (node-gyp rebuild: build/Release/kube_ipvs_proxy.node) and "prepare" (tsc: dist/src;
# esbuild: dist/bin, the entry point and its chunks).
RUN npm ci \
 && npm prune --omit=dev \
 && test -f build/Release/kube_ipvs_proxy.node \
 && test -f dist/bin/cli.js

# Runtime stage: node and the tools the daemon runs or an operator needs on a node:
# iptables (both backends: iptables-nft-* and iptables-legacy-*; the daemon picks one the
# way kubernetes-sigs/iptables-wrappers does), kmod (modprobe ip_vs), conntrack, ipset and
# ipvsadm (inspection), iproute2.
FROM node:20-bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends iptables ipset ipvsadm kmod conntrack iproute2 \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV NODE_ENV=production
# One malloc arena (see the first lines of src/cli.ts; test/unit/chart-image.test.ts checks they match).
ENV MALLOC_ARENA_MAX=1
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist/bin ./dist/bin
COPY --from=build /app/build/Release/kube_ipvs_proxy.node ./build/Release/
# `kubectl exec ds/kube-ipvs-proxy -- kube-ipvs-proxy inspect`
RUN chmod +x /app/dist/bin/cli.js && ln -s /app/dist/bin/cli.js /usr/local/bin/kube-ipvs-proxy
# No node flags, as on the first line of src/cli.ts (test/unit/chart-image.test.ts checks): a V8
# flag would make node compile its built-in modules from source instead of its code cache.
ENTRYPOINT ["node", "/app/dist/bin/cli.js"]
