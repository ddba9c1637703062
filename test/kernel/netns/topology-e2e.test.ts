// Topology-aware routing end to end on the host kernel in iptables mode, in a fresh network
// namespace that plays the node `kip-node`: a client and three backends over veth, the built
// daemon on manifests, a Service whose EndpointSlice hints be1 and be2 for zone-a and be3 for
// zone-b. Real HTTP connections show which backends the node's zone lets traffic reach.
import { assertIsolated } from '../lib/guard.js';
import { zonedSlice, zoneNode } from '../lib/topology.js';
assertIsolated();

import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { CLI, Daemon, Manifests, waitFor } from '../lib/daemon.js';
import { NetLab } from '../lib/netns.js';

const REPO = new URL('../../../', import.meta.url).pathname;
const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8' });
const BACKENDS = ['be1', 'be2', 'be3'];

/** N fresh connections from the client namespace to `target`: backend → count. */
function fromClient(count: number, target: string): Record<string, number> {
  const out = sh('ip', 'netns', 'exec', 'kip-client', process.execPath, `${REPO}examples/demo/client.mjs`, String(count), target);
  return (JSON.parse(out) as Record<string, Record<string, number>>)[target]!;
}

/** Backends (be1…) with a KUBE-SEP chain behind the Service's KUBE-SVC chain. */
function programmed(): string[] {
  const nat = sh('iptables-nft-save', '-t', 'nat');
  const svc = /-A KUBE-SERVICES .*-d 10\.96\.0\.40\/32 .*-j (KUBE-SVC-\w+)/.exec(nat)?.[1];
  if (svc === undefined) return [];
  const seps = [...nat.matchAll(new RegExp(`^-A ${svc} .*-j (KUBE-SEP-\\w+)`, 'gm'))].map((m) => m[1]!);
  return seps
    .map((sep) => new RegExp(`^-A ${sep} .*--to-destination 10\\.244\\.(\\d)\\.2:8080`, 'm').exec(nat)?.[1])
    .filter((i) => i !== undefined)
    .map((i) => `be${i}`)
    .sort();
}

/** The Service and its slice; with `hints`, be1 and be2 are for zone-a and be3 for zone-b. */
const zoned = (hints: boolean) => `
apiVersion: v1
kind: Service
metadata: {name: zoned, namespace: demo}
spec: {clusterIP: 10.96.0.40, trafficDistribution: PreferClose, ports: [{name: http, port: 80, targetPort: 8080}]}
---
${zonedSlice(hints)}`;

const lab = new NetLab();
const backends: ChildProcess[] = [];
let manifests: Manifests;
let stubDir: string;
let d: Daemon;

beforeAll(async () => {
  sh('sysctl', '-qw', 'net.ipv4.ip_forward=1');
  await lab.netns('kip-client');
  await lab.veth({ name: 'kc0', address: '10.250.0.1/24' }, { ns: 'kip-client', name: 'eth0', address: '10.250.0.2/24', gateway: '10.250.0.1' });
  for (const [i, name] of BACKENDS.entries()) {
    const ns = await lab.netns(`kip-${name}`);
    await lab.veth({ name: `kb${i + 1}`, address: `10.244.${i + 1}.1/24` }, { ns, name: 'eth0', address: `10.244.${i + 1}.2/24`, gateway: `10.244.${i + 1}.1` });
    backends.push(spawn('ip', ['netns', 'exec', ns, process.execPath, `${REPO}examples/demo/backend.mjs`, name], { stdio: 'ignore' }));
  }
  for (const i of [1, 2, 3]) await waitFor(`backend ${i}`, () => sh('ip', 'netns', 'exec', `kip-be${i}`, 'cat', '/proc/net/tcp').includes(':1F90 '));
  sh('iptables-nft', '-t', 'mangle', '-N', 'KUBE-IPTABLES-HINT'); // as kubelet does: the node uses nft
  manifests = new Manifests();
  for (const f of ['services.yaml', 'endpointslices.yaml']) manifests.write(f, '');
  manifests.write('node.yaml', zoneNode('zone-a'));
  manifests.write('zoned.yaml', zoned(true));
  // `modprobe` that always fails: the host's kernel must never be asked to load a module.
  stubDir = mkdtempSync(join(tmpdir(), 'kip-stub-'));
  writeFileSync(join(stubDir, 'modprobe'), '#!/bin/sh\necho "modprobe: FATAL: Module $* not found (test stub)" >&2\nexit 1\n');
  chmodSync(join(stubDir, 'modprobe'), 0o755);
  const path = process.env.PATH;
  process.env.PATH = `${stubDir}:${path}`; // the child inherits it
  d = new Daemon(['--proxy-mode', 'iptables', '--manifests', manifests.dir, '--hostname-override', 'kip-node', '--cluster-cidr', '10.244.0.0/16',
    '--log-format', 'text', '--iptables-min-sync-period', '100ms', '--iptables-sync-period', '5s']);
  d.start();
  process.env.PATH = path;
  await d.healthy();
}, 60_000);

afterAll(async () => {
  await d?.stop();
  for (const b of backends) b.kill('SIGKILL');
  await lab.cleanup();
  execFileSync('sh', ['-c', `${process.execPath} ${CLI} cleanup >/dev/null 2>&1; iptables-nft -t mangle -X KUBE-IPTABLES-HINT; true`]);
  manifests?.remove();
  if (stubDir) rmSync(stubDir, { recursive: true, force: true });
});

describe('topology-aware routing (iptables)', () => {
  it('a node in zone-a sends traffic only to the zone-a backends', async () => {
    await waitFor('the zone-a endpoint chains', () => programmed().join() === 'be1,be2');
    // No rule leads to be3; both others are seen but for a 2^-39 chance.
    expect(Object.keys(fromClient(40, 'tcp:10.96.0.40:80')).sort()).toEqual(['be1', 'be2']);
  });

  it('relabelling the node to zone-b sends everything to the zone-b backend', async () => {
    manifests.write('node.yaml', zoneNode('zone-b'));
    await waitFor('the zone-b endpoint chain', () => programmed().join() === 'be3');
    expect(fromClient(20, 'tcp:10.96.0.40:80')).toEqual({ be3: 20 });
  });

  it('without hints every backend gets traffic again', async () => {
    manifests.write('zoned.yaml', zoned(false));
    await waitFor('all endpoint chains', () => programmed().join() === 'be1,be2,be3');
    // Each of the three is missed by 60 random picks with probability (2/3)^60 < 3e-11.
    expect(Object.keys(fromClient(60, 'tcp:10.96.0.40:80')).sort()).toEqual(BACKENDS);
  });
});
