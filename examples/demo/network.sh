#!/bin/sh
# The demo's (and the end-to-end tests') network, built in the CURRENT network namespace, which
# plays the node `kip-node` (10.250.0.1). Never run it in a host's own namespace: `npm run demo`
# runs it inside User-Mode Linux, the tests inside UML too.
#
#   kip-client 10.250.0.2 ──veth── node 10.250.0.1 ──veth── kip-be1 10.244.1.2 (HTTP :8080, UDP :5353)
#                                                   ──veth── kip-be2 10.244.2.2
#                                                   ──veth── kip-be3 10.244.3.2
#
# usage: network.sh up | down
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
BACKENDS="1 2 3"

up() {
  sysctl -qw net.ipv4.ip_forward=1
  ip netns add kip-client
  ip link add kc0 type veth peer name eth0 netns kip-client
  ip addr add 10.250.0.1/24 dev kc0 && ip link set kc0 up
  ip -n kip-client addr add 10.250.0.2/24 dev eth0
  ip -n kip-client link set lo up && ip -n kip-client link set eth0 up
  ip -n kip-client route add default via 10.250.0.1
  for i in $BACKENDS; do
    ip netns add "kip-be$i"
    ip link add "kb$i" type veth peer name eth0 netns "kip-be$i"
    ip addr add "10.244.$i.1/24" dev "kb$i" && ip link set "kb$i" up
    ip -n "kip-be$i" addr add "10.244.$i.2/24" dev eth0
    ip -n "kip-be$i" link set lo up && ip -n "kip-be$i" link set eth0 up
    ip -n "kip-be$i" route add default via "10.244.$i.1"
    ip netns exec "kip-be$i" node "$HERE/backend.mjs" "be$i" >/dev/null 2>&1 &
    echo $! >"/run/kip-be$i.pid"
  done
  for i in $BACKENDS; do wait_port "kip-be$i" 8080; done
}

wait_port() {
  for _ in $(seq 1 100); do
    ip netns exec "$1" sh -c "grep -q ':$(printf %04X "$2") ' /proc/net/tcp" && return 0
    sleep 0.1
  done
  echo "backend in $1 did not listen on $2" >&2
  return 1
}

down() {
  for i in $BACKENDS; do
    [ -f "/run/kip-be$i.pid" ] && kill "$(cat "/run/kip-be$i.pid")" 2>/dev/null || true
    rm -f "/run/kip-be$i.pid"
    ip netns del "kip-be$i" 2>/dev/null || true
    ip link del "kb$i" 2>/dev/null || true
  done
  ip netns del kip-client 2>/dev/null || true
  ip link del kc0 2>/dev/null || true
}

case "$1" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
