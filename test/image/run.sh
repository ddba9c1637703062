#!/bin/sh
# Runs the image test/image/build.sh made, far enough to show it works: the CLI and the native
# addon load, the tools the daemon runs are there, `inspect` runs, and the daemon in iptables mode
# programs the Services of examples/. Each container has a network namespace of its own with
# only lo (--network none): podman's bridge network would add a bridge and NAT rules to the
# host's namespace, which these checks leave alone. Run as root:  sh test/image/run.sh
set -eu

IMAGE=${IMAGE:-kube-ipvs-proxy:test}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PODMAN="podman --runtime runc --cgroup-manager cgroupfs"
RUN="$PODMAN run --rm --network none --ulimit nofile=1024:1024 --ulimit nproc=1024:1024"
NAME=kip-image-test-$$
FLAGS="--proxy-mode iptables --manifests /examples --hostname-override kip-node --conntrack-max-per-core 0"
EXAMPLES="-v $REPO/examples:/examples:ro"

say() { printf '[run] %s\n' "$*"; }
fail() { printf '[run] FAIL: %s\n' "$*" >&2; exit 1; }
trap '$PODMAN rm -f -t 0 $NAME >/dev/null 2>&1 || true' EXIT

$PODMAN image exists "$IMAGE" || fail "no image $IMAGE: run test/image/build.sh first"

# 1. The CLI: the bundle starts under the image's node, and the native addon loads.
version=$(node -p "require('$REPO/package.json').version")
out=$($RUN "$IMAGE" --version 2>&1) || fail "--version exited $?: $out"
[ "$out" = "kube-ipvs-proxy v$version" ] || fail "--version printed: $out (the checkout has $version)"
say "ok: --version: $out"
out=$($RUN "$IMAGE" --help 2>&1) || fail "--help exited $?: $out"
printf '%s\n' "$out" | head -1 | grep -q '^Usage: kube-ipvs-proxy' || fail "--help printed: $(printf '%s' "$out" | head -3)"
say "ok: --help ($(printf '%s\n' "$out" | wc -l) lines: $(printf '%s\n' "$out" | head -1))"
out=$($RUN --entrypoint node "$IMAGE" -e '
  const a = require("/app/build/Release/kube_ipvs_proxy.node");
  const p = require("/app/package.json");
  console.log(`${p.name} ${p.version}, node ${process.version}, addon exports ${Object.keys(a).length}`);' 2>&1) \
  || fail "the native addon does not load: $out"
case $out in *" $version,"*) ;; *) fail "package.json in the image: $out (the checkout has $version)" ;; esac
say "ok: $out"

# 2. The tools the daemon runs (and an operator needs on a node).
TOOLS="iptables-nft-restore iptables-nft-save iptables-legacy-restore iptables-legacy-save
  ip6tables-nft-restore ip6tables-nft-save ip6tables-legacy-restore ip6tables-legacy-save
  ipset ipvsadm modprobe conntrack ip kube-ipvs-proxy"
# shellcheck disable=SC2086
out=$($RUN --entrypoint sh "$IMAGE" -c 'rc=0; for t; do p=$(command -v "$t") && echo "$t=$p" || { echo "MISSING $t"; rc=1; }; done; exit $rc' sh $TOOLS 2>&1) \
  || fail "tools: $(printf '%s\n' "$out" | grep MISSING | tr '\n' ' ')"
say "ok: tools: $(printf '%s\n' "$out" | tr '\n' ' ')"

# 3. inspect, privileged in its own netns. The host kernel has no IPVS: it must say so, not crash.
out=$($RUN --privileged --entrypoint kube-ipvs-proxy "$IMAGE" inspect 2>&1) || fail "inspect exited $?: $out"
printf '%s\n' "$out" | grep -q '^IPVS: ' || fail "inspect printed no IPVS line: $out"
say "ok: inspect exit 0: $(printf '%s\n' "$out" | grep -E '^(IPVS|proxy mode)' | tr '\n' ' ')"

# The Services of examples/ the rules must name, as kube-proxy comments them: read from the
# manifests with the image's js-yaml ("ns/name:port|kind|value" a line).
expected=$($RUN $EXAMPLES --entrypoint node "$IMAGE" -e '
  const fs = require("fs"), yaml = require("/app/node_modules/js-yaml");
  for (const f of fs.readdirSync("/examples").filter((f) => /\.ya?ml$/.test(f)))
    for (const o of yaml.loadAll(fs.readFileSync("/examples/" + f, "utf8"))) {
      if (o?.kind !== "Service" || !o.spec.clusterIP || o.spec.clusterIP === "None") continue;
      for (const p of o.spec.ports) {
        const n = `${o.metadata.namespace ?? "default"}/${o.metadata.name}` + (p.name ? `:${p.name}` : "");
        console.log(`${n}|cluster IP|${o.spec.clusterIP}`);
        if (p.nodePort) console.log(`${n}|nodePort|${p.nodePort}`);
        for (const ip of o.spec.externalIPs ?? []) console.log(`${n}|external IP|${ip}`);
        for (const i of o.status?.loadBalancer?.ingress ?? []) if (i.ip) console.log(`${n}|loadbalancer IP|${i.ip}`);
      }
    }' 2>&1) || fail "reading examples/: $expected"
[ -n "$expected" ] || fail "no Service in examples/"

# $1: iptables-save -t nat output; prints what is missing of $expected.
missing_rules() {
  printf '%s\n' "$expected" | while IFS='|' read -r svc what value; do
    case $what in
      nodePort) pat="^-A KUBE-NODEPORTS .*--comment \"$svc\" .*--dport $value -j KUBE-EXT-" ;;
      *) pat="^-A KUBE-SERVICES -d $value/32 .*--comment \"$svc $what\" .* -j KUBE-(SVC|EXT|FW)-" ;;
    esac
    printf '%s\n' "$1" | grep -Eq -- "$pat" || echo "$svc $what $value"
  done
}

# 4. iptables mode, --once: one sync of examples/, then the nat table of that netns.
out=$($RUN --privileged $EXAMPLES --entrypoint sh "$IMAGE" -c \
  "kube-ipvs-proxy $FLAGS --once 2>/tmp/log; rc=\$?; cat /tmp/log >&2; [ \$rc = 0 ] || exit \$rc;
   b=\$(sed -n 's/.*iptables backend backend=\"\\([a-z]*\\)\".*/\\1/p' /tmp/log); echo \"backend=\$b\"; iptables-\$b-save -t nat" 2>/tmp/kip-once.$$) \
  || { cat /tmp/kip-once.$$ >&2; rm -f /tmp/kip-once.$$; fail "--once exited non-zero"; }
synced=$(grep -o 'INFO synced .*' /tmp/kip-once.$$ | head -1 | cut -c1-120); rm -f /tmp/kip-once.$$
miss=$(missing_rules "$out")
[ -z "$miss" ] || fail "--once: rules missing for: $miss"
say "ok: --once exit 0, $(printf '%s\n' "$out" | head -1), $(printf '%s\n' "$out" | grep -c '^-A KUBE-SERVICES .* -j KUBE-SVC-') KUBE-SERVICES -> KUBE-SVC rules, all $(printf '%s\n' "$expected" | wc -l) expected (cluster, node port, external, LB) present; log: $synced"

# 5. iptables mode, long-running: /healthz, then the rules through podman exec.
$PODMAN run -d --name "$NAME" --network none --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 \
  --privileged $EXAMPLES "$IMAGE" $FLAGS >/dev/null
health=
i=0
while [ $i -lt 30 ]; do
  health=$($PODMAN exec "$NAME" node -e 'fetch("http://127.0.0.1:10256/healthz").then(async (r) => { console.log(r.status, await r.text()); process.exit(r.status === 200 ? 0 : 1); }, (e) => { console.log(e.cause?.code ?? e.message); process.exit(1); })' 2>&1) && break
  [ "$($PODMAN inspect -f '{{.State.Running}}' "$NAME")" = true ] || { $PODMAN logs "$NAME" >&2; fail "the daemon exited"; }
  i=$((i + 1)); sleep 1
done
[ $i -lt 30 ] || { $PODMAN logs "$NAME" >&2; fail "/healthz not 200 after 30 s: $health"; }
say "ok: /healthz: $health"
backend=$($PODMAN logs "$NAME" 2>&1 | sed -n 's/.*iptables backend backend="\([a-z]*\)".*/\1/p' | head -1)
[ -n "$backend" ] || fail "no 'iptables backend' line in the daemon's log"
out=$($PODMAN exec "$NAME" "iptables-$backend-save" -t nat)
miss=$(missing_rules "$out")
[ -z "$miss" ] || fail "long-running: rules missing for: $miss"
say "ok: long-running: iptables-$backend-save -t nat has $(printf '%s\n' "$out" | grep -c '^:KUBE-SVC-') KUBE-SVC chains; rules for every Service of examples/:"
printf '%s\n' "$out" | grep '^-A KUBE-SERVICES .* -j KUBE-SVC-' | sed 's/^/[run]   /'
$PODMAN rm -f -t 0 "$NAME" >/dev/null
say "all checks passed"
