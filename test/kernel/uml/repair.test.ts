// Inside UML: the daemon (short sync period) while real traffic flows; each fault on an object
// it owns is repaired within one period, traffic comes back, and the error is not logged over
// and over.
import { execFileSync, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { Daemon, Manifests, waitFor } from '../lib/daemon.js';
import { assertIsolated } from '../lib/guard.js';

assertIsolated();

const REPO = new URL('../../../', import.meta.url).pathname;
const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const PERIOD_MS = 4_000;
const DAEMON_ARGS = ['--hostname-override', 'kip-node', '--cluster-cidr', '10.244.0.0/16', '--log-format', 'text'];

/** N fresh connections from the client namespace to `target` (`tcp:10.96.0.10:80`): backend → count. */
function fromClient(count: number, target: string): Record<string, number> {
  const out = sh('ip', 'netns', 'exec', 'kip-client', process.execPath, `${REPO}examples/demo/client.mjs`, String(count), target);
  return (JSON.parse(out) as Record<string, Record<string, number>>)[target]!;
}
const served = (target: string): boolean => {
  try {
    return Object.keys(fromClient(3, target)).length > 0;
  } catch {
    return false;
  }
};
/** The addresses on kube-ipvs0 (`ip -o addr`), or '' when the link is missing. */
const dummyAddrs = (): string => {
  try {
    return sh('ip', '-o', 'addr', 'show', 'dev', 'kube-ipvs0');
  } catch {
    return '';
  }
};
const lines = (log: string, re: RegExp): number => log.split('\n').filter((l) => re.test(l)).length;

let manifests: Manifests;
let d: Daemon;

beforeAll(async () => {
  sh('sh', `${REPO}examples/demo/network.sh`, 'up');
  execFileSync('sh', ['-c', 'iptables-legacy -t mangle -N KUBE-IPTABLES-HINT || true']);
  manifests = new Manifests();
  d = new Daemon(['--manifests', manifests.dir, ...DAEMON_ARGS, '--ipvs-min-sync-period', '100ms', '--ipvs-sync-period', `${PERIOD_MS / 1000}s`]);
  d.start();
  await d.healthy();
}, 90_000);
afterAll(async () => {
  await d?.stop();
  execFileSync('sh', ['-c', `sh ${REPO}examples/demo/network.sh down; ${process.execPath} ${REPO}dist/src/cli.js cleanup >/dev/null 2>&1; true`]);
  manifests?.remove();
});

describe('repair of owned objects', () => {
  it('a deleted kube-ipvs0 is re-created with its addresses within one period; traffic comes back; no error every second', async () => {
    expect(served('tcp:10.96.0.10:80')).toBe(true);
    const t0 = Date.now();
    sh('ip', 'link', 'del', 'kube-ipvs0');
    await waitFor('kube-ipvs0 with its addresses', () => dummyAddrs().includes('10.96.0.10/32'), 2 * PERIOD_MS + 5_000).catch(() => null);
    const repairedMs = Date.now() - t0;
    expect(sh('ip', '-o', 'addr', 'show', 'dev', 'kube-ipvs0')).toContain('10.96.0.10/32');
    expect(repairedMs).toBeLessThan(PERIOD_MS + 5_000);
    process.stdout.write(`kube-ipvs0 deleted: repaired after ${repairedMs} ms\n`);
    expect(served('tcp:10.96.0.10:80')).toBe(true);
    expect(served('udp:10.96.0.53:53')).toBe(true);
  });

  it('a deleted kube-ipvs0 is re-created at once when a change makes a sync hit ENODEV', async () => {
    const before = d.log.length;
    sh('ip', 'link', 'del', 'kube-ipvs0');
    manifests.write('extra.yaml', 'apiVersion: v1\nkind: Service\nmetadata: {name: extra, namespace: demo}\nspec: {clusterIP: 10.96.0.30, ports: [{name: http, port: 80, targetPort: 8080}]}\n');
    await waitFor('kube-ipvs0 with the new address', () => dummyAddrs().includes('10.96.0.30/32'), PERIOD_MS + 5_000);
    expect(sh('ip', '-o', 'addr', 'show', 'dev', 'kube-ipvs0')).toContain('10.96.0.10/32');
    // the ENODEV is logged at most once per sync that hit it: a handful, not one per second forever
    await new Promise((r) => setTimeout(r, PERIOD_MS));
    expect(lines(d.log.slice(before), /ENODEV|no such link/)).toBeLessThanOrEqual(3);
    expect(served('tcp:10.96.0.10:80')).toBe(true);
  });

  it('a sysctl the proxy sets is set again by the next full sync', async () => {
    sh('sysctl', '-qw', 'net.ipv4.vs.conntrack=0');
    await waitFor('net.ipv4.vs.conntrack=1', () => sh('sysctl', '-n', 'net.ipv4.vs.conntrack').trim() === '1', PERIOD_MS + 5_000);
  });
});

describe('periodic verification', () => {
  it('a no-change period makes no kernel writes and no iptables-restore', async () => {
    const before = d.log.length;
    await waitFor('two verifications', () => lines(d.log.slice(before), /verified/) >= 2, 3 * PERIOD_MS + 5_000);
    const verified = d.log.slice(before).split('\n').filter((l) => /verified/.test(l));
    process.stdout.write(`${verified.join('\n')}\n`);
    expect(verified.at(-1)).toMatch(/"?ops"?[=:]\s*0\b/);
    expect(verified.at(-1)).toMatch(/"?iptablesRestores"?[=:]\s*0\b/);
  });

  // A fault lands just after the verification read that object at worst: repaired by the next one (period + its duration).
  it('repairs ipvsadm -C, a flushed ipset and a flushed KUBE-SERVICES chain by the next verification; traffic comes back', async () => {
    const t0 = Date.now();
    const mark = d.log.length;
    sh('ipvsadm', '-C');
    sh('ipset', 'flush', 'KUBE-CLUSTER-IP');
    sh('iptables-legacy', '-t', 'nat', '-F', 'KUBE-SERVICES');
    await waitFor('IPVS, the ipset and the chain repaired', () =>
      sh('ipvsadm', '-Sn').includes('-A -t 10.96.0.10:80 -s rr') &&
      sh('ipset', 'list', 'KUBE-CLUSTER-IP').includes('10.96.0.10,tcp:80') &&
      /-A KUBE-SERVICES .*KUBE-CLUSTER-IP/.test(sh('iptables-legacy-save', '-t', 'nat')), 2 * PERIOD_MS + 10_000);
    process.stdout.write(`ipvsadm -C + ipset flush + chain flush: repaired after ${Date.now() - t0} ms\n`);
    // the repair came from the verification, in at most two of its lines (no error logged over and over)
    expect(lines(d.log.slice(mark), /ERROR/)).toBe(0);
    expect(served('tcp:10.96.0.10:80')).toBe(true);
  });
});

describe('UDP conntrack cleanup (IPVS mode)', () => {
  it('a UDP flow pinned to an endpoint that is removed moves to a live one', async () => {
    const flow = spawn('ip', ['netns', 'exec', 'kip-client', process.execPath, `${REPO}test/kernel/lib/udp-flow.mjs`, '10.96.0.53', '53', '40053']);
    const seen: string[] = [];
    createInterface({ input: flow.stdout }).on('line', (l) => seen.push(l));
    try {
      const first = await waitFor('replies on the flow', () => (seen.length >= 3 ? seen[seen.length - 1] : null), 15_000);
      expect(new Set(seen.slice(-3)).size).toBe(1); // one flow, one backend
      const ip = `10.244.${first.slice(2)}.2`;
      manifests.edit('endpointslices.yaml', (doc) =>
        doc.metadata?.labels?.['kubernetes.io/service-name'] === 'dns'
          ? { ...doc, endpoints: doc.endpoints.filter((e: { addresses: string[] }) => !e.addresses.includes(ip)) }
          : doc,
      );
      await waitFor('the endpoint removed from IPVS', () => !sh('ipvsadm', '-Sn').includes(`-a -u 10.96.0.53:53 -r ${ip}:5353`), 15_000);
      const mark = seen.length;
      const moved = await waitFor('the flow answered by a live backend', () => seen.slice(mark).find((b) => b !== first) ?? null, 10_000);
      expect(moved).not.toBe(first);
      await new Promise((r) => setTimeout(r, 1_000));
      expect(seen.slice(-5)).not.toContain(first);
    } finally {
      flow.stdin.end();
      flow.kill();
    }
  });
});

describe('restart over the programmed kernel', () => {
  it('adopts it: no kernel write, no iptables-restore, traffic served throughout', async () => {
    expect(await d.stop()).toBe(0);
    const mark = d.log.length;
    d.start();
    await d.healthy();
    const after = d.log.slice(mark);
    const verified = after.split('\n').find((l) => /verified/.test(l));
    process.stdout.write(`restart: ${verified}\n`);
    expect(verified).toMatch(/\bops=0\b/);
    expect(verified).toMatch(/\biptablesRestores=0\b/);
    expect(served('tcp:10.96.0.10:80')).toBe(true);
  });
});
