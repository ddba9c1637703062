// Inside UML: the daemon (short sync period) while real traffic flows: a sync that hits a missing
// kube-ipvs0 re-creates it at once, a no-change verification writes nothing, a UDP flow leaves a
// removed endpoint, a restart adopts the kernel (reading first what changed while no daemon ran).
// (Each fault's repair: faults.test.ts.)
import { execFileSync, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { Daemon, Manifests, demoNetworkUp, waitFor } from '../lib/daemon.js';
import { boundRoutes } from '../lib/bound.js';
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
/** The Service IPs bound through kube-ipvs0 (local routes), or '' when the link is missing. */
const dummyAddrs = (): string => boundRoutes().join('\n');
const lines = (log: string, re: RegExp): number => log.split('\n').filter((l) => re.test(l)).length;

let manifests: Manifests;
let d: Daemon;

beforeAll(async () => {
  demoNetworkUp();
  manifests = new Manifests();
  d = new Daemon(['--manifests', manifests.dir, ...DAEMON_ARGS, '--ipvs-min-sync-period', '100ms', '--ipvs-sync-period', `${PERIOD_MS / 1000}s`]);
  d.start();
  await d.healthy();
}, 90_000);
afterAll(async () => {
  await d?.stop();
  execFileSync('sh', ['-c', `sh ${REPO}examples/demo/network.sh down; ${process.execPath} ${REPO}dist/bin/cli.js cleanup >/dev/null 2>&1; true`]);
  manifests?.remove();
});

describe('repair of owned objects', () => {
  it('a deleted kube-ipvs0 is re-created at once when a change makes a sync hit ENODEV', async () => {
    const before = d.log.length;
    sh('ip', 'link', 'del', 'kube-ipvs0');
    manifests.write('extra.yaml', 'apiVersion: v1\nkind: Service\nmetadata: {name: extra, namespace: demo}\nspec: {clusterIP: 10.96.0.30, ports: [{name: http, port: 80, targetPort: 8080}]}\n');
    await waitFor('kube-ipvs0 with the new address', () => dummyAddrs().includes('10.96.0.30/32'), PERIOD_MS + 5_000);
    expect(boundRoutes()).toContain('10.96.0.10/32');
    // the ENODEV is logged at most once per sync that hit it: a handful, not one per second forever
    await new Promise((r) => setTimeout(r, PERIOD_MS));
    expect(lines(d.log.slice(before), /ENODEV|no such link/)).toBeLessThanOrEqual(3);
    expect(served('tcp:10.96.0.10:80')).toBe(true);
  });
});

describe('periodic verification', () => {
  it('a no-change period makes no kernel writes and runs no iptables-save or -restore', async () => {
    const before = d.log.length;
    await waitFor('two verifications', () => lines(d.log.slice(before), /verified/) >= 2, 3 * PERIOD_MS + 5_000);
    const verified = d.log.slice(before).split('\n').filter((l) => /verified/.test(l));
    process.stdout.write(`${verified.join('\n')}\n`);
    expect(verified.at(-1)).toMatch(/"?ops"?[=:]\s*0\b/);
    expect(verified.at(-1)).toMatch(/"?iptablesRestores"?[=:]\s*0\b/);
    // the legacy tables' rules, read without a process, are what they were when last found right
    expect(verified.at(-1)).toMatch(/"?iptablesSaves"?[=:]\s*0\b/);
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
    expect(verified).toMatch(/\biptablesSaves=0\b/); // the token kept in the state directory still holds
    expect(verified).not.toMatch(/readFirst/); // the stopped daemon's record matched: nothing to read first
    expect(served('tcp:10.96.0.10:80')).toBe(true);
  });

  it('a change made while no daemon ran is read first (the stopped daemon left a record) and written', async () => {
    expect(await d.stop()).toBe(0);
    expect(sh('ls', '/run/kube-ipvs-proxy')).toContain('ipvs-handoff.json');
    manifests.edit('endpointslices.yaml', (doc) =>
      doc.metadata?.labels?.['kubernetes.io/service-name'] === 'hashed' ? { ...doc, endpoints: doc.endpoints.filter((e: { addresses: string[] }) => !e.addresses.includes('10.244.3.2')) } : doc,
    );
    const mark = d.log.length;
    d.start();
    await d.healthy();
    const verified = d.log.slice(mark).split('\n').find((l) => /verified/.test(l));
    process.stdout.write(`restart after a change: ${verified}\n`);
    expect(verified).toMatch(/\breadFirst=1\b/); // hashed's one virtual server, ahead of the kernel's order
    expect(sh('ipvsadm', '-Sn')).not.toMatch(/-t 10\.96\.0\.13:80 -r 10\.244\.3\.2:8080 -m -w [1-9]/);
    expect(served('tcp:10.96.0.13:80')).toBe(true);
    expect(served('tcp:10.96.0.10:80')).toBe(true);
  });
});
