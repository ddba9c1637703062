// Inside UML: how Service IPs are bound on kube-ipvs0 (--ipvs-address-binding), with real TCP
// connections opened every 20 ms from the client namespace and from the node while the daemon is
// restarted in the other form: kube-proxy's layout (an address each, the link down) taken over by
// the default (a local route each, the link up), and back. No connection fails across either
// switch, the node's own connections to a Service IP come from that IP as with an address, and
// the other form is gone once the new daemon is up.
import { execFileSync } from 'node:child_process';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { boundAddresses, boundRoutes } from '../lib/bound.js';
import { connectLoop, type Attempt } from '../lib/clients.js';
import { Daemon, Manifests, demoNetworkUp, demoTeardown, waitFor } from '../lib/daemon.js';
import { assertIsolated } from '../lib/guard.js';

assertIsolated();

const VIP = '10.96.0.10';
const ARGS = ['--hostname-override', 'kip-node', '--cluster-cidr', '10.244.0.0/16', '--log-format', 'text', '--ipvs-min-sync-period', '100ms'];
const linkUp = () => execFileSync('ip', ['-o', 'link', 'show', 'dev', 'kube-ipvs0'], { encoding: 'utf8' }).includes(',UP');

let manifests: Manifests;
let d: Daemon | undefined;

/** Stops the running daemon and starts one with `flags`, while both loops run; what they saw. */
async function switchTo(flags: string[], bound: () => boolean): Promise<Attempt[]> {
  const loops = Promise.all(['ns:kip-client', 'node'].map((from) => connectLoop(from, VIP, 80, { intervalMs: 20, durationMs: 12_000, timeoutMs: 2000 })));
  await new Promise((r) => setTimeout(r, 2_000));
  await d?.stop();
  d = new Daemon(['--manifests', manifests.dir, ...ARGS, ...flags]);
  d.start();
  await d.healthy();
  await waitFor('the Service IPs bound the new way, the old way gone', bound, 8_000);
  return (await loops).flat();
}

beforeAll(async () => {
  demoNetworkUp();
  manifests = new Manifests();
  d = new Daemon(['--manifests', manifests.dir, ...ARGS, '--ipvs-address-binding', 'address']);
  d.start();
  await d.healthy();
  await waitFor(`${VIP} as an address`, () => boundAddresses().includes(`${VIP}/32`));
}, 90_000);

afterAll(async () => {
  await demoTeardown({ daemon: d, manifests });
});

describe('--ipvs-address-binding', () => {
  it('address: kube-proxy\'s layout, an address each on a link left down, no route of ours', () => {
    expect(linkUp()).toBe(false);
    expect(boundRoutes()).toEqual([]);
  });

  it('route (the default) takes over the addresses with no failed connection, from a pod namespace or the node', async () => {
    const attempts = await switchTo([], () => boundRoutes().includes(`${VIP}/32`) && boundAddresses().length === 0);
    expect(attempts.length).toBeGreaterThan(500);
    expect(attempts.filter((a) => !a.ok)).toEqual([]);
    expect(linkUp()).toBe(true);
    // the node's connection to a Service IP it holds only as a route comes from that IP, as from an address
    expect(execFileSync('ip', ['route', 'get', VIP], { encoding: 'utf8' })).toMatch(new RegExp(`^local ${VIP.replace(/\./g, '\\.')} dev lo src ${VIP.replace(/\./g, '\\.')}`));
  }, 60_000);

  it('and back to addresses with no failed connection', async () => {
    const attempts = await switchTo(['--ipvs-address-binding', 'address'], () => boundAddresses().includes(`${VIP}/32`) && boundRoutes().length === 0);
    expect(attempts.filter((a) => !a.ok)).toEqual([]);
  }, 60_000);
});
