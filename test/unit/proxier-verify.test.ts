// The periodic verification (in-memory kernels): no writes when nothing drifted, every kind of
// drift repaired, and a change arriving during the verification is not held back by it.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { parseArgs } from '../../src/config.js';
import { FakeIpsetClient } from '../../src/kernel/ipset/fake.js';
import { FakeIpvsClient } from '../../src/kernel/ipvs/fake.js';
import type { IpvsClient } from '../../src/kernel/ipvs/client.js';
import { FakeLinkClient } from '../../src/kernel/link.js';
import { createLogger } from '../../src/log-json.js';
import { IpvsProxier } from '../../src/proxy/ipvs/proxier.js';
import { SERVICE_SLICE } from '../../src/proxy/ipvs/verify-fold.js';
import type { SourceHandler } from '../../src/source/types.js';
import { fakeIptables, type FakeIptables } from './lib/fake-iptables.js';
import { slice, svc } from './lib/objects.js';


let ipvs: FakeIpvsClient;
let ipset: FakeIpsetClient;
let link: FakeLinkClient;
let iptables: FakeIptables;
let proxier: IpvsProxier;
let handler: SourceHandler;
/** Holds the next destination read (after taking its snapshot) until released. */
let gate: { held: Promise<void>; release: () => void; reached: Promise<void>; arrive: () => void } | null;

function gated(inner: FakeIpvsClient): IpvsClient {
  return new Proxy(inner, {
    get(target, prop, receiver) {
      if (prop !== 'listDestinationsMany') return Reflect.get(target, prop, receiver);
      return async (...args: Parameters<IpvsClient['listDestinationsMany']>) => {
        const snapshot = await target.listDestinationsMany(...args);
        const g = gate;
        if (g) {
          gate = null;
          g.arrive();
          await g.held;
        }
        return snapshot;
      };
    },
  });
}

beforeEach(async () => {
  ipvs = new FakeIpvsClient();
  ipset = new FakeIpsetClient();
  link = new FakeLinkClient();
  link.addLink('eth0', null, true, ['192.0.2.10']);
  iptables = fakeIptables();
  gate = null;
  ({ proxier, handler } = await programmed(gated(ipvs)));
});

/** A proxier over the fake kernels, 300 services programmed; `read`: its verification's IPVS client. */
async function programmed(read: IpvsClient, extra: Partial<ConstructorParameters<typeof IpvsProxier>[0]> = {}, services = 300, onChange = () => {}) {
  const p = new IpvsProxier({
    config: parseArgs(['--hostname-override', 'n1']).config,
    nodeName: 'n1',
    logger: createLogger({ format: 'json', verbosity: 0 }, { write: () => true } as never),
    dummyName: 'kube-ipvs0',
    clients: { ipvs, ipset, link, iptables: { ipv4: iptables.ipt, ipv6: null }, read: { ipvs: read, ipset, link } },
    sysctl: () => [],
    conntrack: async () => undefined,
    ...extra,
  });
  const h = p.handler(onChange);
  for (let i = 0; i < services; i++) {
    h.onService(`ns/s${i}`, svc(`s${i}`, `10.96.${i >> 8}.${i & 255}`));
    h.onEndpointSlice(`ns/s${i}-1`, slice(`s${i}`, ['10.244.1.2', '10.244.2.2']));
  }
  await p.sync({ full: true });
  return { proxier: p, handler: h };
}

async function periodic() {
  await proxier.sync({ periodic: true });
  return proxier.verified();
}

describe('periodic verification', () => {
  it('nothing drifted: 0 kernel writes, no iptables-restore (one iptables-save), several steps', async () => {
    ipvs.resetCounters();
    ipset.resetCounters();
    const restores = iptables.restores;
    const addressCalls = link.calls.filter((c) => c.startsWith('addLocalRoutes')).length;
    const r = await periodic();
    expect(r).toMatchObject({ repaired: 0, ops: 0, iptablesRestores: 0, errors: 0 });
    expect(r!.steps).toBeGreaterThan(3); // services, 3 destination chunks, sets, addresses
    expect(ipvs.calls.apply).toBe(0);
    expect(ipset.calls.add + ipset.calls.del + ipset.calls.create).toBe(0);
    expect(link.calls.filter((c) => c.startsWith('addLocalRoutes')).length).toBe(addressCalls);
    expect(iptables.restores).toBe(restores);
  });

  it('repairs ipvsadm -C, a flushed and a destroyed ipset, the dummy link, a deleted chain', async () => {
    await ipvs.flush();
    await ipset.flush('KUBE-CLUSTER-IP');
    await ipset.destroy('KUBE-LOOP-BACK');
    await link.deleteLink('kube-ipvs0');
    iptables.rules = '';
    const r = await periodic();
    expect(r!.errors).toBe(0);
    expect(Object.keys(ipvs.weights())).toHaveLength(300);
    expect(ipvs.weights()['tcp/10.96.1.4:80']).toEqual({ '10.244.1.2:8080': 1, '10.244.2.2:8080': 1 });
    expect(ipset.members('KUBE-CLUSTER-IP')).toHaveLength(300);
    expect(ipset.members('KUBE-LOOP-BACK')).toEqual([]); // re-created (no local endpoints here)
    expect(await link.listLocalRoutes('kube-ipvs0')).toHaveLength(300);
    expect(iptables.rules).not.toBe('');
    // and a second verification finds nothing left to do
    ipvs.resetCounters();
    expect(await periodic()).toMatchObject({ repaired: 0, ops: 0, iptablesRestores: 0 });
  });

  it('removes a foreign virtual server on an owned VIP and a stray real server', async () => {
    await ipvs.apply([
      { kind: 'addService', service: { family: 'ipv4', protocol: 'tcp', address: '10.96.0.1', port: 443, fwmark: null, scheduler: 'rr', flags: [], timeout: 0, netmask: 0xffffffff, pe: null } },
      { kind: 'addDestination', service: { family: 'ipv4', protocol: 'tcp', address: '10.96.0.1', port: 80, fwmark: null }, destination: { address: '10.244.9.9', port: 8080, forward: 'masq', weight: 1, upperThreshold: 0, lowerThreshold: 0 } },
    ]);
    await periodic();
    expect(ipvs.weights()['tcp/10.96.0.1:443']).toBeUndefined();
    expect(ipvs.weights()['tcp/10.96.0.1:80']).toEqual({ '10.244.1.2:8080': 1, '10.244.2.2:8080': 1, '10.244.9.9:8080': 0 }); // drains
  });

  it('a change during the verification is applied before the verification ends, and the stale read does not undo it', async () => {
    let release!: () => void;
    let arrive!: () => void;
    const reached = new Promise<void>((r) => (arrive = r));
    gate = { held: new Promise<void>((r) => (release = r)), release: () => release(), reached, arrive: () => arrive() };
    await proxier.sync({ periodic: true });
    await reached; // the verification holds a snapshot of the first chunk's destinations
    handler.onEndpointSlice('ns/s1-1', slice('s1', ['10.244.1.2', '10.244.2.2', '10.244.3.2']));
    const r = await proxier.sync();
    expect(r.ops.addDestination).toBe(1);
    expect(ipvs.weights()['tcp/10.96.0.1:80']).toEqual({ '10.244.1.2:8080': 1, '10.244.2.2:8080': 1, '10.244.3.2:8080': 1 });
    release();
    const v = await proxier.verified();
    expect(v).toMatchObject({ repaired: 0, ops: 0 }); // s1 was touched meanwhile: its stale read is ignored
    expect(ipvs.weights()['tcp/10.96.0.1:80']).toEqual({ '10.244.1.2:8080': 1, '10.244.2.2:8080': 1, '10.244.3.2:8080': 1 });
  });
});

describe('drift during a verification', () => {
  it('`ipvsadm -C` between the service list read and the destination reads: drift, not errors; the next sync re-adds everything', async () => {
    const logs: Array<{ level: number | string; msg: string }> = [];
    const logger = createLogger({ format: 'json', verbosity: 0 }, { write: (l: string) => (logs.push(JSON.parse(l)), true) } as never);
    let flushed = false;
    const flushing = new Proxy(ipvs, {
      get(target, prop, receiver) {
        if (prop !== 'listDestinationsMany') return Reflect.get(target, prop, receiver);
        return async (...args: Parameters<IpvsClient['listDestinationsMany']>) => {
          if (!flushed) await target.flush(); // like the kernel, the fake dumps a missing service's destinations as none
          flushed = true;
          return target.listDestinationsMany(...args);
        };
      },
    });
    let asked = 0;
    const { proxier: p } = await programmed(flushing, { logger }, 300, () => asked++);
    const before = asked;
    await p.sync({ periodic: true });
    const v = await p.verified();
    // The first chunk read as empty services: their real servers' adds find no service (ESRCH).
    expect(v).toMatchObject({ errors: 0 });
    expect(v!.drift).toBeGreaterThan(0);
    expect(logs.filter((l) => l.level === 'error' || l.level === 50 || l.level === 'warn' || l.level === 40)).toEqual([]);
    expect(asked).toBeGreaterThan(before); // a retry sync was asked for
    const r = await p.sync();
    expect(r.errors).toBe(0);
    expect(Object.keys(ipvs.weights())).toHaveLength(300);
    expect(ipvs.weights()['tcp/10.96.1.4:80']).toEqual({ '10.244.1.2:8080': 1, '10.244.2.2:8080': 1 });
    await p.sync({ periodic: true });
    expect(await p.verified()).toMatchObject({ repaired: 0, ops: 0, errors: 0, drift: 0 });
  });

  it('a partial sync that finds its service gone asks for another sync instead of failing', async () => {
    const logs: Array<{ level: number | string; msg: string }> = [];
    const logger = createLogger({ format: 'json', verbosity: 0 }, { write: (l: string) => (logs.push(JSON.parse(l)), true) } as never);
    let asked = 0;
    const { proxier: p, handler: h } = await programmed(ipvs, { logger }, 10, () => asked++);
    await ipvs.flush();
    h.onEndpointSlice('ns/s3-1', slice('s3', ['10.244.1.2', '10.244.2.2', '10.244.3.2']));
    const before = asked;
    const r = await p.sync(); // does not throw: the runner's "sync failed" is for errors
    expect(r).toMatchObject({ errors: 0, drift: 1 });
    expect(asked).toBe(before + 1);
    await p.sync();
    expect(ipvs.weights()['tcp/10.96.0.3:80']).toEqual({ '10.244.1.2:8080': 1, '10.244.2.2:8080': 1, '10.244.3.2:8080': 1 });
    expect(logs.filter((l) => /cannot program|failed/.test(l.msg))).toEqual([]);
  });
});

describe('verification of a large table', () => {
  it('folds the virtual-server list a slice at a time: a change asked for during the first slice is synced before the second', async () => {
    let pulled = 0;
    let syncedAt = -1;
    let p!: IpvsProxier;
    let h!: SourceHandler;
    const counting = new Proxy(ipvs, {
      get(target, prop, receiver) {
        if (prop !== 'readServices') return Reflect.get(target, prop, receiver);
        return async () => {
          const rows = await target.readServices();
          return {
            *[Symbol.iterator]() {
              for (const s of rows) {
                if (pulled++ === 0) {
                  h.onEndpointSlice('ns/s7-1', slice('s7', ['10.244.1.2', '10.244.2.2', '10.244.3.2']));
                  void p.sync().then(() => (syncedAt = pulled));
                }
                yield s;
              }
            },
          };
        };
      },
    });
    ({ proxier: p, handler: h } = await programmed(counting, {}, SERVICE_SLICE * 2 + 10));
    await p.sync({ periodic: true });
    expect(await p.verified()).toMatchObject({ errors: 0, repaired: 0 });
    expect(pulled).toBe(SERVICE_SLICE * 2 + 10);
    expect(syncedAt).toBe(SERVICE_SLICE);
    expect(ipvs.weights()['tcp/10.96.0.7:80']).toEqual({ '10.244.1.2:8080': 1, '10.244.2.2:8080': 1, '10.244.3.2:8080': 1 });
  });
});

describe('verification and shutdown', () => {
  it('a verification cut short by close() is not reported as a failure (a read on a closed socket)', async () => {
    const logs: Array<{ level: number | string; msg: string }> = [];
    const logger = createLogger({ format: 'json', verbosity: 2 }, { write: (l: string) => (logs.push(JSON.parse(l)), true) } as never);
    const { proxier: p } = await programmed(gated(ipvs), { logger });
    const fail = async (closeFirst: boolean) => {
      let release!: () => void;
      let arrive!: () => void;
      const reached = new Promise<void>((r) => (arrive = r));
      gate = { held: new Promise<void>((r) => (release = r)), release: () => release(), reached, arrive: () => arrive() };
      await p.sync({ periodic: true });
      await reached; // the verification is reading
      ipvs.failCall('listDestinations', new Error('ipvs.listDestinations: socket is closed'));
      if (closeFirst) p.close();
      release();
      expect(await p.verified()).toBeNull();
      return logs.filter((l) => /periodic verification/.test(l.msg)).map((l) => l.msg);
    };
    expect(await fail(false)).toEqual(['periodic verification stopped; the next period tries again']);
    logs.length = 0;
    expect(await fail(true)).toEqual(['periodic verification cut short by shutdown']);
    expect(logs.filter((l) => l.level === 'warn' || l.level === 40)).toEqual([]);
  });
});

describe('verification beside partial syncs', () => {
  afterEach(() => void vi.useRealTimers());

  it('a step whose read would still run when the next partial sync may start waits for that sync first', async () => {
    const READ_MS = 20;
    const PERIOD_MS = 50;
    let reading = 0;
    const slow = new Proxy(ipvs, {
      get(target, prop, receiver) {
        if (prop !== 'listDestinationsMany') return Reflect.get(target, prop, receiver);
        return async (...args: Parameters<IpvsClient['listDestinationsMany']>) => {
          reading++;
          await new Promise((r) => setTimeout(r, READ_MS));
          reading--;
          return target.listDestinationsMany(...args);
        };
      },
    });
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate', 'Date'] });
    let running = false;
    let nextAt = Infinity;
    const { proxier: p, handler: h } = await programmed(slow, {
      now: () => Date.now(),
      // What the runner reports: 0 while a sync runs, else the time left until the next may start.
      nextSyncIn: () => (running ? 0 : nextAt > Date.now() ? nextAt - Date.now() : -1),
    });
    await p.sync({ periodic: true }); // starts the verification
    nextAt = Date.now() + PERIOD_MS;
    let done = false;
    void p.verified().then(() => (done = true));
    let syncs = 0;
    let overlaps = 0;
    while (!done) {
      await vi.advanceTimersByTimeAsync(1);
      if (running || Date.now() < nextAt) continue;
      running = true;
      syncs++;
      if (reading > 0) overlaps++;
      h.onEndpointSlice('ns/s1-1', slice('s1', ['10.244.1.2', `10.244.3.${syncs}`]));
      void p.sync().finally(() => {
        running = false;
        nextAt = Date.now() + PERIOD_MS;
      });
    }
    expect(syncs).toBeGreaterThan(2);
    expect(overlaps).toBe(0);
    expect(await p.verified()).toMatchObject({ errors: 0, steps: expect.any(Number) });
  });
});

describe('verification gate estimates', () => {
  afterEach(() => void vi.useRealTimers());

  it("the virtual-server list, a verification's first large read, is gated by how long it took last time", async () => {
    const READ_MS = 20;
    let reading = 0;
    const slow = new Proxy(ipvs, {
      get(target, prop, receiver) {
        if (prop !== 'readServices') return Reflect.get(target, prop, receiver);
        return async () => {
          reading++;
          await new Promise((r) => setTimeout(r, READ_MS));
          reading--;
          return target.listServices();
        };
      },
    });
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate', 'Date'] });
    let running = false;
    let nextAt = Infinity;
    const { proxier: p } = await programmed(slow, {
      now: () => Date.now(),
      nextSyncIn: () => (running ? 0 : nextAt > Date.now() ? nextAt - Date.now() : -1),
    });
    const verify = async (): Promise<number> => {
      await p.sync({ periodic: true });
      nextAt = Date.now() + 10; // a partial sync may start in 10 ms: less than the list takes
      let done = false;
      void p.verified().then(() => (done = true));
      let overlaps = 0;
      while (!done) {
        await vi.advanceTimersByTimeAsync(1);
        if (running || Date.now() < nextAt) continue;
        running = true;
        if (reading > 0) overlaps++;
        nextAt = Infinity;
        void p.sync().finally(() => (running = false));
      }
      return overlaps;
    };
    await verify(); // learns how long the list takes
    expect(await verify()).toBe(0);
  });
});

describe('restart over a programmed kernel', () => {
  function restarted(stateDir?: string, read?: IpvsClient) {
    const p = new IpvsProxier({
      config: parseArgs(['--hostname-override', 'n1']).config,
      nodeName: 'n1',
      logger: createLogger({ format: 'json', verbosity: 0 }, { write: () => true } as never),
      dummyName: 'kube-ipvs0',
      clients: { ipvs, ipset, link, iptables: { ipv4: iptables.ipt, ipv6: null }, ...(read ? { read: { ipvs: read, ipset, link } } : {}) },
      sysctl: () => [],
      conntrack: async () => undefined,
      ...(stateDir ? { stateDir } : {}),
    });
    const h = p.handler(() => {});
    for (let i = 0; i < 300; i++) {
      h.onService(`ns/s${i}`, svc(`s${i}`, `10.96.${i >> 8}.${i & 255}`));
      h.onEndpointSlice(`ns/s${i}-1`, slice(`s${i}`, ['10.244.1.2', '10.244.2.2']));
    }
    return { p, h };
  }

  it('nothing changed: no kernel write, no whole-table dump, no iptables-restore (state dir kept the rules hash)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kip-state-'));
    try {
      const first = restarted(dir);
      await first.p.sync(); // adopts the kernel programmed in beforeEach, and restores iptables once (no state yet)
      ipvs.resetCounters();
      ipset.resetCounters();
      const restores = iptables.restores;
      const addressCalls = link.calls.filter((c) => c.startsWith('addLocalRoutes')).length;
      const second = restarted(dir);
      await second.p.sync();
      expect(ipvs.calls.apply).toBe(0);
      expect(ipvs.calls.dumpAll).toBe(0);
      expect(ipset.calls.add + ipset.calls.del + ipset.calls.create).toBe(0);
      expect(link.calls.filter((c) => c.startsWith('addLocalRoutes')).length).toBe(addressCalls);
      expect(iptables.restores).toBe(restores);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a change made while down is written before the rest of the table is read, and only it', async () => {
    const order: string[] = [];
    const spy = new Proxy(ipvs, {
      get(target, prop, receiver) {
        const v = Reflect.get(target, prop, receiver);
        if (prop === 'listDestinationsMany') return (...a: Parameters<IpvsClient['listDestinationsMany']>) => (order.push('read'), target.listDestinationsMany(...a));
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    const origApply = ipvs.apply.bind(ipvs);
    ipvs.apply = async (ops) => (order.push('write'), origApply(ops));
    const { p, h } = restarted(undefined, spy as IpvsClient);
    h.onService('ns/new', svc('new', '10.96.9.9'));
    h.onEndpointSlice('ns/new-1', slice('new', ['10.244.1.2']));
    ipvs.resetCounters();
    await p.sync();
    expect(ipvs.ops).toMatchObject({ addService: 1, addDestination: 1, updateDestination: 0, deleteDestination: 0, updateService: 0 });
    expect(order.indexOf('write')).toBeLessThan(order.lastIndexOf('read')); // written before the last chunk was read
    expect(ipvs.weights()['tcp/10.96.9.9:80']).toEqual({ '10.244.1.2:8080': 1 });
  });

  it('a handoff record from the stopped daemon: the virtual servers changed while down are read (and written) first', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kip-state-'));
    try {
      const first = restarted(dir);
      await first.p.sync();
      first.p.close(); // leaves the record
      expect(existsSync(join(dir, 'ipvs-handoff.json'))).toBe(true);
      const reads: string[][] = [];
      const order: string[] = [];
      const spy = new Proxy(ipvs, {
        get(target, prop, receiver) {
          const v = Reflect.get(target, prop, receiver);
          if (prop === 'listDestinationsMany')
            return (...a: Parameters<IpvsClient['listDestinationsMany']>) => (reads.push(a[0].map((k) => k.address)), order.push('read'), target.listDestinationsMany(...a));
          return typeof v === 'function' ? v.bind(target) : v;
        },
      });
      const origApply = ipvs.apply.bind(ipvs);
      ipvs.apply = async (ops) => (order.push('write'), origApply(ops));
      // The last service in the kernel's order gets a new endpoint while no daemon runs.
      const { p, h } = restarted(dir, spy as IpvsClient);
      h.onEndpointSlice('ns/s299-1', slice('s299', ['10.244.1.2', '10.244.2.2', '10.244.3.3']));
      ipvs.resetCounters();
      await p.sync();
      expect(reads.length).toBeGreaterThan(2);
      expect(reads[0]![0]).toBe('10.96.1.43'); // s299: read in the first chunk, ahead of the kernel's order
      expect(order.indexOf('write')).toBe(1); // written right after that first read
      expect(ipvs.ops).toMatchObject({ addDestination: 1, addService: 0, deleteDestination: 0 });
      expect(ipvs.weights()['tcp/10.96.1.43:80']).toMatchObject({ '10.244.3.3:8080': 1 });
      expect((await p.verified())?.readFirst).toBe(1);
      expect(existsSync(join(dir, 'ipvs-handoff.json'))).toBe(false); // taken: a crash now leaves no stale record
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
