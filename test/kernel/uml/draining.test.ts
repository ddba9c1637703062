// Draining real servers inside UML, with real TCP from a client namespace: a drained real server
// is deleted within about two seconds of its last connection (not by the next periodic sync), and
// sh / mh Services with a draining (weight-0) real server never refuse a client while another
// real server is ready, nor send a new connection to the draining one (kubernetes PR #138688).
import { execFileSync } from 'node:child_process';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { Held, httpGets } from '../lib/clients.js';
import { Daemon, Manifests, demoNetworkUp, demoTeardown, waitFor } from '../lib/daemon.js';
import { demoService, demoSlice, docs } from '../lib/demo-manifests.js';
import { assertIsolated } from '../lib/guard.js';

assertIsolated();

const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const BACKENDS = { be1: '10.244.1.2', be2: '10.244.2.2', be3: '10.244.3.2' } as const;
type Backend = keyof typeof BACKENDS;
/** Client source addresses added to kip-client's eth0: enough that each hash bucket family gets some. */
const SOURCES = Array.from({ length: 24 }, (_, i) => `10.250.0.${10 + i}`);

const service = (name: string, ip: string, scheduler?: string) =>
  docs(demoService(name, { clusterIP: ip, clusterIPs: [ip] }, { annotations: scheduler ? { 'kube-ipvs-proxy.io/scheduler': scheduler } : undefined }));
type Conditions = { ready: boolean; serving: boolean; terminating: boolean };
const READY: Conditions = { ready: true, serving: true, terminating: false };
const TERMINATING: Conditions = { ready: false, serving: true, terminating: true };
const slice = (svc: string, eps: Partial<Record<Backend, Conditions>>) =>
  docs(demoSlice(svc, Object.entries(eps).map(([b, conditions]) => ({ address: BACKENDS[b as Backend], conditions }))));
const ALL_READY = { be1: READY, be2: READY, be3: READY };

/** One new connection per source address from kip-client to VIP:80: source -> backend (or error:CODE). */
function fanOut(vip: string): Record<string, string> {
  const answers = httpGets('ns:kip-client', vip, { timeoutMs: 3000, sources: SOURCES });
  return Object.fromEntries(SOURCES.map((s, i) => [s, answers[i]!.split(' ')[0]!]));
}

/** The real servers of VIP:80 as ipvsadm reads them: address -> weight and connection counts. */
function realServers(vip: string): Map<string, { weight: number; conns: number }> {
  const out = new Map<string, { weight: number; conns: number }>();
  for (const line of sh('ipvsadm', '-Ln', '--exact', '-t', `${vip}:80`).split('\n')) {
    const m = /^\s+->\s+([\d.]+):8080\s+\w+\s+(\d+)\s+(\d+)\s+(\d+)/.exec(line);
    if (m) out.set(m[1]!, { weight: Number(m[2]), conns: Number(m[3]) + Number(m[4]) });
  }
  return out;
}

let manifests: Manifests;
let d: Daemon;

beforeAll(async () => {
  demoNetworkUp();
  for (const a of SOURCES) sh('ip', '-n', 'kip-client', 'addr', 'add', `${a}/24`, 'dev', 'eth0');
  manifests = new Manifests();
  manifests.write('draining.yaml', [service('drain', '10.96.0.70'), slice('drain', { be1: READY, be2: READY })].join(''));
  manifests.write('hashed.yaml', [service('by-sh', '10.96.0.71', 'sh'), slice('by-sh', ALL_READY), service('by-mh', '10.96.0.72', 'mh'), slice('by-mh', ALL_READY)].join(''));
  // A periodic sync and a graceful timeout far beyond the test: only the drain check can delete.
  d = new Daemon(['--manifests', manifests.dir, '--hostname-override', 'kip-node', '--cluster-cidr', '10.244.0.0/16', '--log-format', 'json',
    '--ipvs-min-sync-period', '100ms', '--ipvs-sync-period', '10m', '--graceful-termination-timeout', '10m']);
  d.start();
  await d.healthy();
});

afterAll(() => demoTeardown({ daemon: d, manifests }));

describe('a drained real server', () => {
  it('is deleted within 2.5 s of its last connection, with no sync due (period 10 m)', async () => {
    const held = new Held('10.96.0.70');
    const victim = (await held.next()) as Backend;
    const ip = BACKENDS[victim];
    const keep = victim === 'be1' ? 'be2' : 'be1';
    manifests.write('draining.yaml', [service('drain', '10.96.0.70'), slice('drain', { [keep]: READY })].join(''));
    await waitFor('the removed endpoint at weight 0', () => realServers('10.96.0.70').get(ip)?.weight === 0);
    expect(await held.send('again')).toBe(victim); // the open connection still works
    // Still there while its connection is open, across several drain checks.
    await new Promise((r) => setTimeout(r, 2500));
    expect(realServers('10.96.0.70').get(ip)).toMatchObject({ weight: 0, conns: 1 });

    // A reset connection leaves IPVS's entry in CLOSE for 10 s; the count then reads 0.
    expect(await held.send('reset')).toBe('reset');
    let lastBusy = Date.now();
    let gone: number | null = null;
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      const rs = realServers('10.96.0.70').get(ip);
      const at = Date.now();
      if (rs === undefined) {
        gone = at;
        break;
      }
      if (rs.conns > 0) lastBusy = at;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(gone, `${ip} still a real server 30 s after its connection was reset`).not.toBeNull();
    expect(gone! - lastBusy).toBeLessThanOrEqual(2500);
    await waitFor('the deletion in the log', () => /"msg":"drained real servers deleted"/.test(d.log), 5000);
  });
});

describe.each(['sh', 'mh'] as const)('%s with a draining real server', (scheduler) => {
  const vip = scheduler === 'sh' ? '10.96.0.71' : '10.96.0.72';
  const name = `by-${scheduler}`;

  it(`sets ${scheduler}-fallback: no client is refused while a real server is ready, none reaches the weight-0 one`, async () => {
    const before = fanOut(vip);
    expect(Object.values(before).filter((b) => b.startsWith('error:')), JSON.stringify(before)).toEqual([]);
    // The draining server must be one some clients hash to: the first source's backend.
    const victim = before[SOURCES[0]!] as Backend;
    const hashedToVictim = SOURCES.filter((s) => before[s] === victim);
    const held = new Held(vip, 80, { source: SOURCES[0] });
    expect(await held.next()).toBe(victim);

    const others = Object.fromEntries(Object.keys(BACKENDS).map((b) => [b, b === victim ? TERMINATING : READY]));
    const slices = (eps: Record<string, Conditions>) => [service('by-sh', '10.96.0.71', 'sh'), slice('by-sh', scheduler === 'sh' ? eps : ALL_READY), service('by-mh', '10.96.0.72', 'mh'), slice('by-mh', scheduler === 'mh' ? eps : ALL_READY)].join('');
    manifests.write('hashed.yaml', slices(others));
    await waitFor('the terminating endpoint at weight 0', () => realServers(vip).get(BACKENDS[victim])?.weight === 0);

    const after = fanOut(vip);
    expect(Object.values(after).filter((b) => b.startsWith('error:')), `refused or lost while other real servers are ready: ${JSON.stringify(after)}`).toEqual([]);
    expect(Object.values(after)).not.toContain(victim);
    // Clients that hashed elsewhere stay where they were (only the draining server's are moved).
    for (const s of SOURCES.filter((x) => !hashedToVictim.includes(x))) expect(after[s], s).toBe(before[s]);
    expect(await held.send('again')).toBe(victim); // its established connection keeps working
    expect(realServers(vip).get(BACKENDS[victim])).toMatchObject({ weight: 0 });
    expect(sh('ipvsadm', '-Sn')).toContain(`-A -t ${vip}:80 -s ${scheduler} -b ${scheduler}-fallback`);

    expect(await held.send('close')).toBe('closed');
    manifests.write('hashed.yaml', slices(ALL_READY));
    await waitFor(`${name}'s real servers back at weight 1`, () => [...realServers(vip).values()].filter((r) => r.weight === 1).length === 3);
  });
});
