// --ipvs-strict-arp inside UML (kubernetes#107662, MetalLB L2): every Service address is bound on
// kube-ipvs0, and with the kernel's defaults (arp_ignore=0, arp_announce=0) the node answers ARP
// for all of them on every interface and announces them as the source of its own ARP requests, so
// each node claims a LoadBalancer IP that one MetalLB speaker should own. With the flag the node
// does neither. Seen from the client namespace across the demo's veth: its neighbour table.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { CLI, Daemon, demoNetworkUp, waitFor } from '../lib/daemon.js';
import { boundRoutes } from '../lib/bound.js';
import { assertIsolated } from '../lib/guard.js';

assertIsolated();

const REPO = new URL('../../../', import.meta.url).pathname;
const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const ARGS = ['--manifests', `${REPO}examples`, '--hostname-override', 'kip-node', '--cluster-cidr', '10.244.0.0/16', '--log-format', 'text', '--ipvs-sync-period', '2s'];
const LB_IP = '10.250.0.200'; // examples/services.yaml: on kube-ipvs0, inside the client's subnet
const NODE_IP = '10.250.0.1'; // on kc0, the node's end of the client's veth
const CONF = '/proc/sys/net/ipv4/conf';
const conf = (iface: string, key: string) => readFileSync(`${CONF}/${iface}/${key}`, 'utf8').trim();
const setConf = (iface: string, key: string, value: string) => writeFileSync(`${CONF}/${iface}/${key}`, value);

/** One UDP datagram to `to`:9, from `from` when given; `ns` runs it in the client namespace. */
function datagram(to: string, opts: { ns?: string; from?: string } = {}): void {
  const js = `const s = require('node:dgram').createSocket('udp4'); s.bind({ address: process.argv[2] || undefined }, () => s.send('x', 9, process.argv[1], () => s.close()));`;
  const argv = [process.execPath, '-e', js, to, opts.from ?? ''];
  if (opts.ns) sh('ip', 'netns', 'exec', opts.ns, ...argv);
  else sh(argv[0]!, ...argv.slice(1));
}
/** The client's neighbour entry for `ip`: its state line ('' when none). */
const clientNeigh = (ip: string) => sh('ip', '-n', 'kip-client', 'neigh', 'show', ip, 'dev', 'eth0').trim();

/** Whether an ARP request from the client for `ip` gets a reply (a lladdr), or fails (no reply in the kernel's 3 tries). */
async function answeredFromOutside(ip: string): Promise<boolean> {
  sh('ip', '-n', 'kip-client', 'neigh', 'flush', 'dev', 'eth0');
  datagram(ip, { ns: 'kip-client' });
  const line = await waitFor(`the client's ARP for ${ip} to settle`, () => {
    const l = clientNeigh(ip);
    return /lladdr|FAILED/.test(l) ? l : null;
  }, 10_000);
  return line.includes('lladdr');
}

/** Whether the node's own ARP request (for the client, sent for a packet from `vip`) names `vip` as its sender: the client then learns it. */
function announcesAsSender(vip: string): boolean {
  sh('ip', '-n', 'kip-client', 'neigh', 'flush', 'dev', 'eth0');
  sh('ip', 'neigh', 'flush', 'dev', 'kc0');
  datagram('10.250.0.2', { from: vip });
  execFileSync('sleep', ['0.5']);
  return clientNeigh(vip).includes('lladdr');
}

let d: Daemon | null = null;
const start = async (...args: string[]) => {
  d = new Daemon([...ARGS, ...args]);
  d.start();
  await d.healthy();
  await waitFor(`${LB_IP} on kube-ipvs0`, () => boundRoutes().includes(`${LB_IP}/32`));
};
beforeAll(() => demoNetworkUp());
afterEach(async () => void (await d?.stop()));
afterAll(() => {
  for (const key of ['arp_ignore', 'arp_announce']) setConf('all', key, '0');
  execFileSync('sh', ['-c', `sh ${REPO}examples/demo/network.sh down; ${process.execPath} ${CLI} cleanup >/dev/null 2>&1; true`]);
});

describe('ARP for kube-ipvs0\'s addresses (kubernetes#107662)', () => {
  it('without --ipvs-strict-arp (the kernel\'s defaults, 0 and 0): answered from outside, and announced as a sender', async () => {
    for (const key of ['arp_ignore', 'arp_announce']) setConf('all', key, '0');
    expect([conf('kc0', 'arp_ignore'), conf('kc0', 'arp_announce')]).toEqual(['0', '0']);
    await start();
    expect([conf('all', 'arp_ignore'), conf('all', 'arp_announce')]).toEqual(['0', '0']);
    expect(await answeredFromOutside(LB_IP)).toBe(true);
    expect(announcesAsSender(LB_IP)).toBe(true);
  });

  it('with --ipvs-strict-arp: arp_ignore=1 and arp_announce=2 (all), not answered, not announced; the node\'s own address still answered; put back by the verification', async () => {
    await start('--ipvs-strict-arp');
    expect([conf('all', 'arp_ignore'), conf('all', 'arp_announce')]).toEqual(['1', '2']);
    expect(await answeredFromOutside(LB_IP)).toBe(false);
    expect(announcesAsSender(LB_IP)).toBe(false);
    expect(await answeredFromOutside(NODE_IP)).toBe(true);
    // The kernel takes the larger of `all` and the interface's value: kc0's stay 0 and obey `all`.
    expect([conf('kc0', 'arp_ignore'), conf('kc0', 'arp_announce')]).toEqual(['0', '0']);
    setConf('all', 'arp_ignore', '0');
    setConf('all', 'arp_announce', '0');
    await waitFor('the periodic verification to put them back', () => conf('all', 'arp_ignore') === '1' && conf('all', 'arp_announce') === '2', 15_000);
    expect(await answeredFromOutside(LB_IP)).toBe(false);
  });
});
