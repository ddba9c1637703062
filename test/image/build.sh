#!/bin/sh
# Builds the repository's Dockerfile with podman, without a container registry: the two base
# images it names (node:20-bookworm, node:20-bookworm-slim) are made locally from a debootstrap
# bookworm root plus this machine's Node.js 20. Run as root from anywhere:
#   sh test/image/build.sh        (then test/image/run.sh)
# Environment: IMAGE (default kube-ipvs-proxy:test); REBASE=1 re-makes the base images.
set -eu

IMAGE=${IMAGE:-kube-ipvs-proxy:test}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/kube-ipvs-proxy/image
ROOTFS_TAR=$CACHE/bookworm-minbase.tar
MIRROR=http://deb.debian.org/debian
# Global podman flags for this machine: crun refuses the hybrid cgroup layout, and the default
# ulimits are above what the sandbox may set.
PODMAN="podman --runtime runc --cgroup-manager cgroupfs"
ULIMITS="--ulimit nofile=1024:1024 --ulimit nproc=1024:1024"

say() { printf '[build] %s\n' "$*"; }
die() { printf '[build] error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (podman rootful storage, debootstrap)"
start=$(date +%s)

# 1. Tools.
missing=
for t in podman runc debootstrap; do
  command -v "$t" >/dev/null 2>&1 || missing="$missing $t"
done
if [ -n "$missing" ]; then
  say "installing$missing"
  apt-get update -q
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
fi

# 2. The Node.js that goes into the base images: this machine's, which must be 20.x.
NODE=$(readlink -f "$(command -v node)") || die "node not found"
NODE_VERSION=$(node -p process.version)
case $NODE_VERSION in v20.*) ;; *) die "the Dockerfile uses node:20-*; this machine's node is $NODE_VERSION" ;; esac
NPM_DIR=$(npm root -g)/npm
[ -f "$NPM_DIR/bin/npm-cli.js" ] || NPM_DIR=$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")
[ -f "$NPM_DIR/bin/npm-cli.js" ] || die "npm's package directory not found (tried $(npm root -g)/npm)"
HEADERS=
for d in "$(dirname "$(dirname "$NODE")")/include/node" /usr/include/node /usr/local/include/node; do
  if [ -f "$d/node_api.h" ] && [ -f "$d/node.h" ]; then HEADERS=$d; break; fi
done
[ -n "$HEADERS" ] || die "Node's headers (node_api.h) not found: the Dockerfile's npm_config_nodedir=/usr/local needs them"
say "node $NODE_VERSION ($NODE), npm $(npm -v) ($NPM_DIR), headers $HEADERS"

# Where this machine's npm trusts a CA of its own (`npm config get cafile`: a TLS-inspecting
# egress proxy), npm in the build stage must trust it too: the local node:20-bookworm carries it
# with a global npmrc; node:20-bookworm-slim, the runtime stage's base, does not.
CAFILE=$(npm config get cafile 2>/dev/null || true)
{ [ -n "$CAFILE" ] && [ "$CAFILE" != null ] && [ -f "$CAFILE" ]; } || CAFILE=
CA_SUM=none
[ -z "$CAFILE" ] || CA_SUM=$(sha256sum "$CAFILE" | cut -c1-16)

# docker.io/library/...: /etc/containers/registries.conf.d/shortnames.conf maps the short name
# "node" there, so `FROM node:20-bookworm` with --pull=never finds these.
SLIM=docker.io/library/node:20-bookworm-slim
FULL=docker.io/library/node:20-bookworm
label() { $PODMAN image inspect --format "{{index .Labels \"$2\"}}" "$1" 2>/dev/null || true; }
base_ok=1
[ "$(label $SLIM kube-ipvs-proxy.node-version)" = "$NODE_VERSION" ] || base_ok=0
[ "$(label $FULL kube-ipvs-proxy.node-version)" = "$NODE_VERSION" ] || base_ok=0
[ "$(label $FULL kube-ipvs-proxy.npm-ca)" = "$CA_SUM" ] || base_ok=0
[ "${REBASE:-0}" = 1 ] && base_ok=0

if [ "$base_ok" = 0 ]; then
  # 3. The Debian root, made once and cached.
  if [ ! -f "$ROOTFS_TAR" ]; then
    mkdir -p "$CACHE"
    root=$(mktemp -d /var/tmp/kip-bookworm.XXXXXX)
    say "debootstrap --variant=minbase bookworm into $root (once; cached as $ROOTFS_TAR)"
    t0=$(date +%s)
    debootstrap --variant=minbase bookworm "$root" "$MIRROR" > "$CACHE/debootstrap.log" 2>&1 \
      || { tail -20 "$CACHE/debootstrap.log" >&2; rm -rf "$root"; die "debootstrap failed (log: $CACHE/debootstrap.log)"; }
    # The same apt sources as the official Debian images (security and point-release updates).
    cat > "$root/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*.log
    tar -C "$root" --numeric-owner -cf "$ROOTFS_TAR.part" .
    mv "$ROOTFS_TAR.part" "$ROOTFS_TAR"
    rm -rf "$root"
    say "rootfs made in $(( $(date +%s) - t0 )) s: $(du -h "$ROOTFS_TAR" | cut -f1)"
  else
    say "rootfs from cache: $ROOTFS_TAR"
  fi

  # 4. bookworm + node as the official node images lay it out (/usr/local/{bin,lib,include}).
  $PODMAN import "$ROOTFS_TAR" localhost/kube-ipvs-proxy-base:bookworm-minbase >/dev/null
  ctx=$(mktemp -d /var/tmp/kip-node.XXXXXX)
  trap 'rm -rf "$ctx"' EXIT
  mkdir -p "$ctx/local/bin" "$ctx/local/lib/node_modules" "$ctx/local/include" "$ctx/ca"
  cp "$NODE" "$ctx/local/bin/node"
  cp -a "$NPM_DIR" "$ctx/local/lib/node_modules/npm"
  cp -a "$HEADERS" "$ctx/local/include/node"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$ctx/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$ctx/local/bin/npx"
  cat > "$ctx/Containerfile.slim" <<EOF
FROM localhost/kube-ipvs-proxy-base:bookworm-minbase
COPY local/ /usr/local/
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin NODE_VERSION=${NODE_VERSION#v}
LABEL kube-ipvs-proxy.node-version=$NODE_VERSION
RUN node --version && npm --version && npx --version && test -f /usr/local/include/node/node_api.h
CMD ["node"]
EOF
  say "making $SLIM: bookworm minbase + node $NODE_VERSION"
  $PODMAN build --pull=never $ULIMITS --network none -t $SLIM -f "$ctx/Containerfile.slim" "$ctx"

  if [ -n "$CAFILE" ]; then
    cp "$CAFILE" "$ctx/ca/npm-ca.crt"
    echo "cafile=/usr/local/etc/npm-ca.crt" > "$ctx/ca/npmrc"
    say "making $FULL: the slim one + this machine's npm cafile ($CAFILE)"
  else
    say "making $FULL: the slim one"
  fi
  cat > "$ctx/Containerfile.full" <<EOF
FROM $SLIM
COPY ca/ /usr/local/etc/
LABEL kube-ipvs-proxy.npm-ca=$CA_SUM
EOF
  $PODMAN build --pull=never $ULIMITS --network none -t $FULL -f "$ctx/Containerfile.full" "$ctx"
  rm -rf "$ctx"
  trap - EXIT
else
  say "base images present (node $NODE_VERSION, npm CA $CA_SUM): $FULL $SLIM"
fi

# 5. The real Dockerfile, unchanged. --network host only for its apt-get and npm steps.
say "podman build -t $IMAGE $REPO"
t0=$(date +%s)
cd "$REPO"
# shellcheck disable=SC2086
$PODMAN build --pull=never --network host $ULIMITS -t "$IMAGE" .
say "image built in $(( $(date +%s) - t0 )) s (all steps: $(( $(date +%s) - start )) s)"
$PODMAN images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E 'kube-ipvs-proxy|library/node' | sed 's/^/[build] /'
