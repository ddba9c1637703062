#!/bin/sh
# Runs inside User-Mode Linux (started by run.mjs): the demo network, the daemon in standalone
# mode on examples/, then real traffic from the client namespace to every kind of service.
set -e
cd "$(dirname "$0")/../.."
DEMO=examples/demo
sh $DEMO/network.sh up
cleanup() { [ -n "$DAEMON" ] && kill "$DAEMON" 2>/dev/null; wait 2>/dev/null; sh $DEMO/network.sh down; }
trap cleanup EXIT
# kubelet creates this chain in the backend the node uses; the proxy detects the backend from it.
iptables-legacy -t mangle -N KUBE-IPTABLES-HINT 2>/dev/null || true

echo "== starting kube-ipvs-proxy --manifests examples (node kip-node)"
node dist/bin/cli.js --manifests examples --hostname-override kip-node --cluster-cidr 10.244.0.0/16 \
  --log-format text --ipvs-min-sync-period 200ms >/run/kip-daemon.log 2>&1 &
DAEMON=$!
node -e '
  const deadline = Date.now() + 30000;
  (async () => {
    for (;;) {
      try { const r = await fetch("http://127.0.0.1:10256/healthz"); const j = await r.json(); if (r.ok && j.status) return; } catch {}
      if (Date.now() > deadline) { console.error("daemon did not become healthy"); process.exit(1); }
      await new Promise((r) => setTimeout(r, 200));
    }
  })();' || { cat /run/kip-daemon.log; exit 1; }
head -n 5 /run/kip-daemon.log

echo; echo "== what the kernel holds (kube-ipvs-proxy inspect)"
node dist/bin/cli.js inspect | sed -n '1,40p'

echo; echo "== 12 new connections from the client namespace (10.250.0.2) to each service"
ip netns exec kip-client node $DEMO/client.mjs 12 \
  tcp:10.96.0.10:80=ClusterIP tcp:10.250.0.1:30080=NodePort tcp:10.250.0.100:80=externalIP \
  tcp:10.250.0.200:80=LoadBalancer udp:10.96.0.53:53=UDP-dns tcp:10.96.0.12:80=sessionAffinity \
  tcp:10.96.0.13:80=scheduler-sh tcp:10.96.0.14:80=with-terminating-endpoint |
  node -e 'const r = JSON.parse(require("fs").readFileSync(0, "utf8"));
    for (const [k, v] of Object.entries(r)) console.log(`  ${k.padEnd(26)} ${Object.entries(v).map(([b, n]) => `${b}: ${n}`).join(", ")}`);'
echo; echo "== daemon log"; tail -n 5 /run/kip-daemon.log
