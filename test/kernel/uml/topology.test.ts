// Topology-aware routing end to end inside UML (IPVS mode): the daemon on manifests, the node
// `kip-node` labelled with a zone, a Service whose EndpointSlice hints two backends for zone-a and
// one for zone-b; real TCP connections from the client namespace show which backends get traffic
// as the node's zone and the hints change.
import { execFileSync } from 'node:child_process';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { fromClient } from '../lib/clients.js';
import { Daemon, Manifests, demoNetworkUp, demoTeardown, waitFor } from '../lib/daemon.js';
import { demoService, docs } from '../lib/demo-manifests.js';
import { assertIsolated } from '../lib/guard.js';
import { zonedSlice, zoneNode } from '../lib/topology.js';

assertIsolated();

const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const ipvsadm = () => sh('ipvsadm', '-Sn');
/** How long a change may take to reach the kernel on a loaded machine (UML makes syscalls slow). */
const SLOW = 45_000;

const SERVICE = demoService(
  'zoned',
  { type: 'NodePort', clusterIP: '10.96.0.30', ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30090 }] },
  { annotations: { 'service.kubernetes.io/topology-mode': 'Auto' } },
);

/** `-a` lines of the cluster IP's real servers as `backend weight`. */
function realServers(): string[] {
  return [...ipvsadm().matchAll(/^-a -t 10\.96\.0\.30:80 -r 10\.244\.(\d)\.2:8080 -m -w (\d+)/gm)].map((m) => `be${m[1]} ${m[2]}`).sort();
}

let manifests: Manifests;
let d: Daemon;

beforeAll(async () => {
  demoNetworkUp();
  manifests = new Manifests();
  for (const f of ['services.yaml', 'endpointslices.yaml']) manifests.write(f, '');
  manifests.write('node.yaml', zoneNode('zone-a'));
  manifests.write('zoned.yaml', docs(SERVICE, zonedSlice(true)));
  d = new Daemon(['--manifests', manifests.dir, '--hostname-override', 'kip-node', '--cluster-cidr', '10.244.0.0/16', '--log-format', 'text',
    '--ipvs-min-sync-period', '100ms', '--ipvs-sync-period', '3s']);
  d.start();
  await d.healthy();
});
afterAll(() => demoTeardown({ daemon: d, manifests }));

describe('topology-aware routing (IPVS)', () => {
  it('a node in zone-a sends cluster IP and NodePort traffic only to the zone-a backends', async () => {
    await waitFor('the zone-a real servers', () => realServers().join() === 'be1 1,be2 1', SLOW);
    expect(fromClient(12, 'tcp:10.96.0.30:80')).toEqual({ be1: 6, be2: 6 });
    expect(fromClient(12, 'tcp:10.250.0.1:30090')).toEqual({ be1: 6, be2: 6 });
  });

  it('relabelling the node to zone-b moves new connections to the zone-b backend', async () => {
    manifests.write('node.yaml', zoneNode('zone-b'));
    // be1 and be2 drain (weight 0) while be3 takes every new connection.
    await waitFor('the zone-b real server', () => realServers().some((s) => s === 'be3 1') && !realServers().some((s) => s.endsWith(' 1') && s !== 'be3 1'), SLOW);
    expect(fromClient(12, 'tcp:10.96.0.30:80')).toEqual({ be3: 12 });
  });

  it('without hints every backend gets traffic again', async () => {
    manifests.write('zoned.yaml', docs(SERVICE, zonedSlice(false)));
    await waitFor('all three real servers', () => realServers().join() === 'be1 1,be2 1,be3 1', SLOW);
    expect(fromClient(12, 'tcp:10.96.0.30:80')).toEqual({ be1: 4, be2: 4, be3: 4 });
  });

  it('a node zone that no endpoint is hinted for uses every endpoint', async () => {
    manifests.write('zoned.yaml', docs(SERVICE, zonedSlice(true)));
    await waitFor('the zone-b real server alone', () => realServers().filter((s) => s.endsWith(' 1')).join() === 'be3 1', SLOW);
    manifests.write('node.yaml', zoneNode('zone-c'));
    await waitFor('all three real servers', () => realServers().join() === 'be1 1,be2 1,be3 1', SLOW);
    expect(fromClient(12, 'tcp:10.96.0.30:80')).toEqual({ be1: 4, be2: 4, be3: 4 });
  });
});
