// A cold start on a new node with 2,000 Services, with clients reaching `default/kubernetes`
// throughout (kubernetes#133773), inside UML. Upstream's IPVS mode adds the virtual servers, then
// the ipset entries one at a time, then the iptables rules with the masquerade rule last; a client
// whose connection meets a virtual server before its masquerade rule is never answered (its
// conntrack entry keeps the missing SNAT for every retransmission) and times out.
//
// The daemon's order: the owned sets are created and filled, then the iptables rules restored,
// and only then the dummy link's addresses bound and the virtual servers added. At the first sync
// (adoption, proxier.ts rulesFirst) the sets and rules come before the verification that adds the
// virtual servers; in every later sync applyPlan runs the iptables step after the ipset entries
// and before the addresses and IPVS ops. Without it (the rules written last, after the whole
// verification) the first virtual servers took connections for as long as the rest of the
// programming lasted: in UML, 70 SYNs from kip-client and 40 from the node reached the API server
// unmasqueraded, and 35 of kip-client's connections timed out; with it, none.
//
// The topology makes a missing masquerade rule visible, as on a real cluster: the "API server"
// (kip-api, 10.249.0.2:8080, behind 10.96.0.1:443) sits on another node that binds the cluster IP
// too, and has a direct link to the client namespace. Unmasqueraded, its answer to kip-client
// (10.250.0.2, outside --cluster-cidr) takes that link and never meets this node's IPVS, and its
// answer to the node (whose source is the cluster IP itself, picked from kube-ipvs0) stays in
// kip-api; masqueraded, both come back through this node. A raw-table counter in kip-api counts
// the SYNs that arrive unmasqueraded. An unreachable route for 10.96.0.0/12 makes the node's own
// attempts fail at once until the cluster IP is bound. Both clients open a connection every 20 ms
// (each with a 2 s deadline) from before the daemon starts until well after its first sync.
import { execFileSync } from 'node:child_process';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { connectLoop, type Attempt } from '../lib/clients.js';
import { CLI, Daemon, Manifests, demoNetworkUp, waitFor } from '../lib/daemon.js';
import { demoEndpoints, demoService, demoSlice, docs } from '../lib/demo-manifests.js';
import { assertIsolated } from '../lib/guard.js';

assertIsolated();

const REPO = new URL('../../../', import.meta.url).pathname;
const sh = (script: string) => execFileSync('sh', ['-c', script], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

const SERVICES = 2000;
const INTERVAL_MS = 20;
const TIMEOUT_MS = 2000;
/** How long the clients run: from before the daemon starts to well after its first sync. */
const LOOP_MS = 30_000;

/** 2,000 ClusterIP Services with the three demo backends each, and default/kubernetes → kip-api. */
function manifest(): string {
  const texts: string[] = [];
  for (let i = 0; i < SERVICES; i++) {
    const ip = `10.98.${Math.floor(i / 250)}.${(i % 250) + 1}`;
    texts.push(demoService(`svc-${i}`, { clusterIP: ip }, { namespace: 'load' }), demoSlice(`svc-${i}`, demoEndpoints(), { namespace: 'load' }));
  }
  texts.push(
    demoService('kubernetes', { clusterIP: '10.96.0.1', ports: [{ name: 'https', port: 443, targetPort: 8080 }] }, { namespace: 'default' }),
    demoSlice('kubernetes', [{ address: '10.249.0.2', node: null }], { namespace: 'default', name: 'kubernetes', portName: 'https' }),
  );
  return docs(...texts);
}

/** What one client saw, relative to the daemon's start. "After" its first answer: started once that answer had come. */
function summary(attempts: Attempt[], t0: number, synced: number) {
  const oks = attempts.filter((a) => a.ok);
  const firstOk = oks.reduce<Attempt | null>((m, a) => (m === null || a.t + a.ms < m.t + m.ms ? a : m), null);
  const answeredAt = firstOk === null ? Infinity : firstOk.t + firstOk.ms;
  const after = attempts.filter((a) => a.t >= answeredAt);
  const failedAfter = after.filter((a) => !a.ok);
  return {
    attempts: attempts.length,
    ok: oks.length,
    before: attempts.filter((a) => a.t < answeredAt && !a.ok).length,
    after: after.length,
    failedAfter: failedAfter.length,
    firstFailureAfter: failedAfter[0] ?? null,
    firstAnswerAtMs: firstOk === null ? null : answeredAt - t0,
    syncedAtMs: synced - t0,
    lastAtMs: attempts[attempts.length - 1]!.t - t0,
    bodies: [...new Set(after.filter((a) => a.ok).map((a) => a.body))],
    /** Runs of one outcome: [ms from the daemon's start, outcome, attempts]. */
    runs: attempts.reduce<Array<[number, string, number]>>((out, a) => {
      const what = a.ok ? 'ok' : a.err!;
      const last = out[out.length - 1];
      if (last?.[1] === what) last[2]++;
      else out.push([a.t - t0, what, 1]);
      return out;
    }, []),
  };
}

/** SYNs the API server received unmasqueraded (from the client's or the cluster IP's own address), per source. */
function unmasqueradedSyns(): Record<string, number> {
  const out = sh('ip netns exec kip-api iptables-legacy -t raw -L PREROUTING -n -v -x');
  const count = (src: string) => Number(new RegExp(`^\\s*(\\d+)\\s+\\d+\\s+ACCEPT\\s+(?:tcp|6)\\s.*${src.replace(/\./g, '\\.')}\\s`, 'm').exec(out)?.[1] ?? NaN);
  return { '10.250.0.2': count('10.250.0.2'), '10.96.0.1': count('10.96.0.1') };
}

let manifests: Manifests;
let d: Daemon;
const UP = `
ip netns add kip-api
ip link add ka0 type veth peer name eth0 netns kip-api
ip addr add 10.249.0.1/24 dev ka0 && ip link set ka0 up
ip -n kip-api addr add 10.249.0.2/24 dev eth0 && ip -n kip-api link set eth0 up && ip -n kip-api link set lo up
ip -n kip-api route add default via 10.249.0.1
ip -n kip-api addr add 10.96.0.1/32 dev lo
ip link add side0 netns kip-api type veth peer name side0 netns kip-client
ip -n kip-api addr add 10.251.0.1/30 dev side0 && ip -n kip-api link set side0 up
ip -n kip-client addr add 10.251.0.2/30 dev side0 && ip -n kip-client link set side0 up
ip -n kip-api route add 10.250.0.2/32 via 10.251.0.2
ip route add unreachable 10.96.0.0/12
ip netns exec kip-api iptables-legacy -t raw -A PREROUTING -p tcp --dport 8080 --syn -s 10.250.0.2 -j ACCEPT
ip netns exec kip-api iptables-legacy -t raw -A PREROUTING -p tcp --dport 8080 --syn -s 10.96.0.1 -j ACCEPT
(ip netns exec kip-api ${process.execPath} ${REPO}examples/demo/backend.mjs api >/dev/null 2>&1 & echo $! > /run/kip-api.pid)
`;
const DOWN = `
kill $(cat /run/kip-api.pid) 2>/dev/null; rm -f /run/kip-api.pid
ip netns del kip-api 2>/dev/null; ip link del ka0 2>/dev/null; ip route del unreachable 10.96.0.0/12 2>/dev/null
sh ${REPO}examples/demo/network.sh down; ${process.execPath} ${CLI} cleanup >/dev/null 2>&1; true
`;

beforeAll(async () => {
  sh(`${process.execPath} ${CLI} cleanup >/dev/null 2>&1; true`); // a new node: nothing programmed
  demoNetworkUp();
  sh(UP);
  await waitFor('the API backend', () => /:1F90 /.test(sh('ip netns exec kip-api cat /proc/net/tcp')));
  manifests = new Manifests();
  manifests.write('services.yaml', '');
  manifests.write('endpointslices.yaml', '');
  manifests.write('load.yaml', manifest());
});
afterAll(async () => {
  await d?.stop();
  sh(DOWN);
  manifests?.remove();
});

describe(`cold start with ${SERVICES} Services, clients of default/kubernetes throughout (kubernetes#133773)`, () => {
  let client: ReturnType<typeof summary>;
  let node: ReturnType<typeof summary>;
  let syns: Record<string, number>;
  beforeAll(async () => {
    expect(sh('ipvsadm -Sn').trim()).toBe('');
    const loops = ['ns:kip-client', 'node'].map((from) => connectLoop(from, '10.96.0.1', 443, { intervalMs: INTERVAL_MS, durationMs: LOOP_MS, timeoutMs: TIMEOUT_MS }));
    await new Promise((r) => setTimeout(r, 500)); // the clients are failing before the daemon starts
    const t0 = Date.now();
    d = new Daemon(['--manifests', manifests.dir, '--hostname-override', 'kip-node', '--cluster-cidr', '10.244.0.0/16', '--log-format', 'text']);
    d.start();
    let synced = 0;
    await waitFor('the first sync', () => (/ INFO synced /.test(d.log) ? (synced = Date.now()) : 0), 60_000).catch((e: Error) => {
      throw new Error(`${e.message}; daemon log:\n${d.log.slice(-3000)}`);
    });
    const [c, n] = await Promise.all(loops);
    client = summary(c!, t0, synced);
    node = summary(n!, t0, synced);
    syns = unmasqueradedSyns();
    console.log(JSON.stringify({ client, node, syns, log: d.log.split('\n').filter((l) => / INFO (verified|synced) /.test(l)).slice(0, 2) }));
  }, 120_000);

  it('the clients ran from before the daemon started to well after its first sync', () => {
    for (const s of [client, node]) {
      expect(s.before).toBeGreaterThan(0);
      expect(s.firstAnswerAtMs).not.toBeNull();
      expect(s.lastAtMs - s.syncedAtMs).toBeGreaterThan(5000);
    }
  });

  it('once a client has had its first answer, no connection fails', () => {
    expect(client.firstFailureAfter).toBeNull();
    expect(node.firstFailureAfter).toBeNull();
  });

  it('no virtual server took a connection before its masquerade rule: the API server saw no SYN from an unmasqueraded source', () => {
    expect(syns).toEqual({ '10.250.0.2': 0, '10.96.0.1': 0 });
  });

  it('the answers come back through this node: the API server sees the masqueraded source', () => {
    expect(client.bodies).toEqual(['api 10.249.0.1']);
    expect(node.bodies).toEqual(['api 10.249.0.1']);
  });
});
