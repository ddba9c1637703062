// End to end inside UML: the daemon from manifests, real TCP/UDP traffic from a client network
// namespace to backends in their own namespaces, cross-checked with ipvsadm, ipset, iptables.
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { Held, fromClient } from '../lib/clients.js';
import { boundAddresses, boundRoutes } from '../lib/bound.js';
import { CLI, Daemon, Manifests, demoNetworkUp, demoTeardown, waitFor } from '../lib/daemon.js';
import { demoEndpoints, demoService, demoSlice, docs } from '../lib/demo-manifests.js';
import { assertIsolated } from '../lib/guard.js';

assertIsolated();

const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const ipvsadm = () => sh('ipvsadm', '-Sn');
const DAEMON_ARGS = ['--hostname-override', 'kip-node', '--cluster-cidr', '10.244.0.0/16', '--log-format', 'text'];

const EXTRA = docs(
  demoService('least', { clusterIP: '10.96.0.20' }, { annotations: { 'kube-ipvs-proxy.io/scheduler': 'lc' } }),
  demoService('source-hash', { clusterIP: '10.96.0.21' }, { annotations: { 'kube-router.io/service.scheduler': 'sh' } }),
  ...['least', 'source-hash'].map((svc) => demoSlice(svc, demoEndpoints())),
);

let manifests: Manifests;

beforeAll(() => {
  demoNetworkUp();
  manifests = new Manifests();
  manifests.write('extra.yaml', EXTRA);
});
afterAll(() => demoTeardown({ manifests }));

describe('one-shot modes', () => {
  it('--dry-run prints the plan and touches nothing', () => {
    const out = sh(process.execPath, CLI, '--dry-run', '--manifests', manifests.dir, ...DAEMON_ARGS);
    expect(out).toMatch(/10\.96\.0\.10/);
    expect(ipvsadm().trim()).toBe('');
  });

  it('--once programs everything in one sync and exits 0', () => {
    sh(process.execPath, CLI, '--once', '--manifests', manifests.dir, ...DAEMON_ARGS);
    expect(ipvsadm()).toContain('-A -t 10.96.0.10:80 -s rr');
    expect(fromClient(3, 'tcp:10.96.0.10:80')).toEqual({ be1: 1, be2: 1, be3: 1 });
  });
});

describe('the daemon', () => {
  const daemon = () => new Daemon(['--manifests', manifests.dir, ...DAEMON_ARGS, '--ipvs-min-sync-period', '100ms', '--ipvs-sync-period', '3s', '--graceful-termination-timeout', '8s']);
  let d: Daemon;
  beforeAll(async () => {
    d = daemon();
    d.start();
    await d.healthy();
  });
  afterAll(async () => void (await d?.stop()));

  it('serves ClusterIP (rr alternates), NodePort, externalIP and LoadBalancer IP over TCP, and UDP', () => {
    expect(fromClient(30, 'tcp:10.96.0.10:80')).toEqual({ be1: 10, be2: 10, be3: 10 });
    for (const target of ['tcp:10.250.0.1:30080', 'tcp:10.250.0.100:80', 'tcp:10.250.0.200:80', 'udp:10.96.0.53:53']) {
      const seen = fromClient(9, target);
      expect(Object.keys(seen).sort(), target).toEqual(['be1', 'be2', 'be3']);
    }
  });

  it('session affinity holds a client to one backend; sh keeps a source on one backend', () => {
    expect(Object.keys(fromClient(12, 'tcp:10.96.0.12:80'))).toHaveLength(1);
    expect(Object.keys(fromClient(12, 'tcp:10.96.0.21:80'))).toHaveLength(1);
    expect(ipvsadm()).toContain('-A -t 10.96.0.21:80 -s sh');
  });

  it('lc sends a new connection to the idle backend', async () => {
    const a = new Held('10.96.0.20', 80);
    const b = new Held('10.96.0.20', 80);
    const [first, second] = [await a.next(), await b.next()];
    expect(first).not.toBe(second);
    const idle = ['be1', 'be2', 'be3'].find((x) => x !== first && x !== second)!;
    expect(fromClient(1, 'tcp:10.96.0.20:80')).toEqual({ [idle]: 1 });
    void a.send('close');
    void b.send('close');
  });

  it('kernel state matches ipvsadm, ipset and iptables-save', () => {
    expect(ipvsadm()).toMatch(/-a -t 10\.96\.0\.10:80 -r 10\.244\.1\.2:8080 -m -w 1/);
    expect(sh('ipset', 'list', 'KUBE-CLUSTER-IP')).toContain('10.96.0.10,tcp:80');
    expect(boundRoutes()).toContain('10.96.0.10/32');
    expect(boundAddresses()).toEqual([]);
    const nat = sh('iptables-legacy-save', '-t', 'nat');
    expect(nat).toMatch(/-A KUBE-SERVICES .*--match-set KUBE-CLUSTER-IP/);
  });

  it('removing an endpoint drains it: weight 0, no new connections, the open one keeps working', async () => {
    const held = new Held('10.96.0.10', 80);
    const victim = await held.next();
    const ip = `10.244.${victim.slice(2)}.2`;
    manifests.edit('endpointslices.yaml', (doc) =>
      doc.metadata?.labels?.['kubernetes.io/service-name'] === 'web'
        ? { ...doc, endpoints: doc.endpoints.filter((e: { addresses: string[] }) => !e.addresses.includes(ip)) }
        : doc,
    );
    await waitFor('weight 0', () => ipvsadm().includes(`-a -t 10.96.0.10:80 -r ${ip}:8080 -m -w 0`));
    expect(fromClient(12, 'tcp:10.96.0.10:80')[victim]).toBeUndefined();
    expect(await held.send('again')).toBe(victim);
    void held.send('close');
    await waitFor('the drained endpoint to be deleted', () => !ipvsadm().includes(`-a -t 10.96.0.10:80 -r ${ip}:8080`), 30_000);
  });

  it('a broken manifest is reported and the last good state stays programmed', async () => {
    manifests.write('broken.yaml', 'apiVersion: v1\nkind: Service\nmetadata: {name: bad}\nspec: {ports: [{port: "eighty"}]}\n');
    await waitFor('the error in the log', () => /broken\.yaml/.test(d.log));
    expect(ipvsadm()).toContain('-A -t 10.96.0.10:80 -s rr');
    manifests.write('broken.yaml', '');
  });

  it('someone running ipvsadm -C is repaired on the next full sync', async () => {
    sh('ipvsadm', '-C');
    await waitFor('the repair', () => ipvsadm().includes('-A -t 10.96.0.10:80 -s rr'), 15_000);
  });

  it('a restart of the daemon does not break an established connection or flush rules', async () => {
    const held = new Held('10.96.0.11', 80);
    const backend = await held.next();
    const conns = () => Number(/TCP\s+10\.96\.0\.11:80\s+(\d+)/.exec(sh('ipvsadm', '-Ln', '--stats', '--exact'))?.[1]);
    const before = conns();
    expect(await d.stop()).toBe(0);
    expect(ipvsadm()).toContain('-A -t 10.96.0.11:80'); // SIGTERM leaves rules in place
    d = daemon();
    d.start();
    await d.healthy();
    expect(await held.send('again')).toBe(backend);
    expect(conns()).toBeGreaterThanOrEqual(before); // the service was adopted, not re-created
    void held.send('close');
  });
});

describe('cleanup', () => {
  it('removes everything the proxy owns', () => {
    expect(readdirSync('/run/kube-ipvs-proxy')).toContain('ipvs-handoff.json'); // left by the stopped daemon
    sh(process.execPath, CLI, 'cleanup');
    expect(readdirSync('/run/kube-ipvs-proxy')).toEqual([]); // records of what was just removed
    expect(ipvsadm().trim()).toBe('');
    expect(sh('ipset', 'list', '-n')).not.toMatch(/^KUBE-/m);
    expect(sh('ip', 'link')).not.toContain('kube-ipvs0');
    expect(sh('iptables-legacy-save')).not.toMatch(/KUBE-SERVICES/);
  });
});
