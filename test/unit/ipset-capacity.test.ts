// ipset capacity (kubernetes#129389): owned sets are sized from the desired state and replaced by
// larger copies ahead of need, never left to refuse entries with IPSET_ERR_HASH_FULL.
import { describe, expect, it } from 'vitest';

import { FakeIpsetClient } from '../../src/kernel/ipset/fake.js';
import { FakeIpvsClient } from '../../src/kernel/ipvs/fake.js';
import { FakeLinkClient } from '../../src/kernel/link.js';
import { parseArgs } from '../../src/config.js';
import { createLogger } from '../../src/log-json.js';
import { IpvsProxier } from '../../src/proxy/ipvs/proxier.js';
import { ProxyMetrics } from '../../src/server/metrics.js';
import { fakeIptables } from './lib/fake-iptables.js';
import { svc } from './lib/objects.js';
import { applyPlan } from '../../src/proxy/ipvs/apply.js';
import { DesiredIndex } from '../../src/proxy/ipvs/desired-index.js';
import { GracefulState } from '../../src/proxy/ipvs/graceful.js';
import { MIN_MAXELEM, OWNED_SETS, growName, maxElemFor, mustGrow, ownedSet } from '../../src/proxy/ipvs/ipsets.js';
import { emptyObserved } from '../../src/proxy/ipvs/observe.js';
import { plan, type PlanOptions } from '../../src/proxy/ipvs/plan.js';
import type { ServiceContribution } from '../../src/proxy/ipvs/types.js';

const SET = 'KUBE-CLUSTER-IP';
const entry = (i: number) => `10.${96 + (i >> 16)}.${(i >> 8) & 255}.${i & 255},tcp:80`;
const entries = (from: number, to: number) => Array.from({ length: to - from }, (_, k) => entry(from + k));

/** A desired index whose only contribution puts `n` entries in KUBE-CLUSTER-IP. */
function indexWith(n: number): DesiredIndex {
  const ix = new DesiredIndex();
  const c: ServiceContribution = { key: 'ns/many:http', virtualServers: [], ipsetEntries: entries(0, n).map((e) => ({ set: SET, entry: e })), addresses: [], healthCheck: null, errors: [] };
  ix.set(c.key, c);
  return ix;
}
const opts: PlanOptions = { now: 0, gracefulTimeoutMs: 0, excludeCIDRs: [], ownedSets: [ownedSet(SET)!] };
const clients = (ipset: FakeIpsetClient) => ({ ipvs: new FakeIpvsClient(), ipset, link: new FakeLinkClient(), dummyName: 'kube-ipvs0', binding: 'route' as const });

describe('set sizes', () => {
  it('kube-proxy\'s 65,536 at least; a power of two with room for twice the entries; growth past three quarters', () => {
    expect([0, 1, 32768, 32769, 65536, 100_000].map(maxElemFor)).toEqual([65536, 65536, 65536, 131072, 131072, 262144]);
    expect(mustGrow(49152, MIN_MAXELEM)).toBe(false);
    expect(mustGrow(49153, MIN_MAXELEM)).toBe(true);
    expect(OWNED_SETS.filter((s) => s.spec.type !== 'bitmap:port').every((s) => s.spec.maxElem === MIN_MAXELEM)).toBe(true);
    expect(new Set(OWNED_SETS.map((s) => growName(s.spec.name))).size).toBe(OWNED_SETS.length);
    expect(Math.max(...OWNED_SETS.map((s) => growName(s.spec.name).length))).toBeLessThanOrEqual(31);
  });
});

describe('plan', () => {
  it('a missing set is created sized for its entries', () => {
    const p = plan(indexWith(70_000), emptyObserved(), 'full', new GracefulState(), opts);
    expect(p.ipsetCreate.map((s) => [s.name, s.maxElem])).toEqual([[SET, 262144]]);
    expect(p.ipsetAdd.get(SET)).toHaveLength(70_000);
    expect(p.ipsetGrow).toEqual([]);
  });

  it('a set the wanted entries would fill past three quarters grows: a larger copy with every entry, no adds of its own', () => {
    const observed = emptyObserved();
    observed.ipsets.set(SET, new Set(entries(0, 40_000)));
    observed.ipsetCapacity.set(SET, 65536);
    const p = plan(indexWith(50_000), observed, 'full', new GracefulState(), opts);
    expect(p.ipsetGrow.map((g) => [g.spec.name, g.spec.type, g.spec.maxElem, g.temp, g.entries.length, g.from])).toEqual([[SET, 'hash:ip,port', 131072, growName(SET), 50_000, 65536]]);
    expect(p.ipsetAdd.has(SET)).toBe(false);
    expect(p.counts.ipsetGrow).toBe(1);
    // Below the threshold nothing grows; an unknown capacity counts as kube-proxy's 65,536.
    expect(plan(indexWith(49_152), observed, 'full', new GracefulState(), opts).ipsetGrow).toEqual([]);
    observed.ipsetCapacity.delete(SET);
    expect(plan(indexWith(49_153), observed, 'full', new GracefulState(), opts).ipsetGrow).toHaveLength(1);
  });
});

describe('apply', () => {
  it('grows a full set by a swap: every entry lands, the old set and the copy are gone, observed and capacity follow', async () => {
    const ipset = new FakeIpsetClient();
    await ipset.create({ ...ownedSet(SET)!.spec });
    expect((await ipset.add(SET, entries(0, 65_536))).every((r) => r.ok)).toBe(true);
    const observed = emptyObserved();
    observed.ipsets.set(SET, new Set(entries(0, 65_536)));
    observed.ipsetCapacity.set(SET, 65536);
    const p = plan(indexWith(70_000), observed, 'full', new GracefulState(), opts);
    const r = await applyPlan(p, clients(ipset), observed);
    expect(r.errors).toEqual([]);
    expect(r.grown).toEqual([{ set: SET, from: 65536, to: 262144, entries: 70_000 }]);
    const [info] = await ipset.list(SET);
    expect([info!.maxElem, info!.entries.length]).toEqual([262144, 70_000]);
    expect(await ipset.listNames()).toEqual([SET]);
    expect(ipset.calls.swap).toBe(1);
    expect(observed.ipsets.get(SET)!.size).toBe(70_000);
    expect(observed.ipsetCapacity.get(SET)).toBe(262144);
  });

  it('without growth (what kube-proxy does), the entries past 65,536 are refused: the failure this guards against', async () => {
    const ipset = new FakeIpsetClient();
    await ipset.create({ ...ownedSet(SET)!.spec });
    const results = await ipset.add(SET, entries(0, 65_537));
    expect(results.filter((r) => !r.ok).map((r) => (r as { error: { code: string } }).error.code)).toEqual(['IPSET_ERR_HASH_FULL']);
  });

  it('a set smaller than observed believes (made by someone else): the full hash is an error, and the next plan grows it', async () => {
    const ipset = new FakeIpsetClient();
    await ipset.create({ ...ownedSet(SET)!.spec, maxElem: 1000 });
    await ipset.add(SET, entries(0, 1000));
    const observed = emptyObserved();
    observed.ipsets.set(SET, new Set(entries(0, 1000)));
    observed.ipsetCapacity.set(SET, 65536);
    const ix = indexWith(1001);
    const first = await applyPlan(plan(ix, observed, 'full', new GracefulState(), opts), clients(ipset), observed);
    expect(first.errors.map((e) => e.object)).toEqual([`${SET} ${entry(1000)}`]);
    expect(first.retry).toBe(true);
    expect(observed.ipsetCapacity.get(SET)).toBe(1000);
    const second = await applyPlan(plan(ix, observed, first.retryScope, new GracefulState(), opts), clients(ipset), observed);
    expect(second.errors).toEqual([]);
    expect(second.grown).toEqual([{ set: SET, from: 1000, to: 65536, entries: 1001 }]);
    expect((await ipset.list(SET))[0]!.entries).toHaveLength(1001);
  });

  it('a failed copy leaves the set as it was, reports the set and asks for a retry', async () => {
    const ipset = new FakeIpsetClient();
    await ipset.create({ ...ownedSet(SET)!.spec });
    await ipset.add(SET, entries(0, 10));
    const observed = emptyObserved();
    observed.ipsets.set(SET, new Set(entries(0, 10)));
    observed.ipsetCapacity.set(SET, 65536);
    const p = plan(indexWith(50_000), observed, 'full', new GracefulState(), opts);
    ipset.failCall('swap', Object.assign(new Error('busy'), { name: 'Error' }));
    const r = await applyPlan(p, clients(ipset), observed);
    expect(r.errors.map((e) => e.object)).toEqual([SET]);
    expect(r.retry).toBe(true);
    expect(await ipset.listNames()).toEqual([SET]);
    expect((await ipset.list(SET))[0]!.entries).toHaveLength(10);
    expect(observed.ipsetCapacity.get(SET)).toBe(65536);
  });
});

describe('the proxier', () => {
  it('adopts the sets\' sizes from their headers, destroys a copy a dead daemon left half-built, and reports entries and maxelem per set', async () => {
    const ipset = new FakeIpsetClient();
    await ipset.create({ ...ownedSet(SET)!.spec, maxElem: 131072 });
    await ipset.create({ ...ownedSet(SET)!.spec, name: growName(SET) });
    const metrics = new ProxyMetrics({ defaultMetrics: false });
    const proxier = new IpvsProxier({
      config: parseArgs(['--hostname-override', 'n1']).config,
      nodeName: 'n1',
      logger: createLogger({ format: 'json', verbosity: 0 }, { write: () => true } as never),
      dummyName: 'kube-ipvs0',
      clients: { ipvs: new FakeIpvsClient(), ipset, link: new FakeLinkClient(), iptables: { ipv4: fakeIptables().ipt, ipv6: null } },
      metrics,
      sysctl: () => [],
    });
    const h = proxier.handler(() => {});
    h.onService('ns/a', svc('a', '10.96.0.1'));
    h.onSynced();
    await proxier.sync();
    expect(await ipset.listNames()).not.toContain(growName(SET));
    expect(ipset.calls.listHeaders).toBe(1);
    const text = await metrics.expose();
    expect(text).toContain(`kube_ipvs_proxy_ipset_entries{set="${SET}"} 1`);
    expect(text).toContain(`kube_ipvs_proxy_ipset_maxelem{set="${SET}"} 131072`);
    expect(text).toContain('kube_ipvs_proxy_ipset_maxelem{set="KUBE-NODE-PORT-TCP"} 65536');
    proxier.close();
  });
});
