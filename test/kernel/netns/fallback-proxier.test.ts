// The iptables proxier in-process against the host kernel's iptables (legacy and nft) in a fresh
// network namespace: full sync through the driver, partial syncs that rewrite only the changed
// services' chains (one iptables-restore, no iptables-save), chain names stable across a restart,
// repair after a failed partial restore, IPv6, and the IPVS mode's leftovers (chains, jumps,
// ipsets) removed on the first sync. Everything is cross-checked with iptables-save / ipset.
import { assertIsolated } from '../lib/guard.js';
assertIsolated();

import { Writable } from 'node:stream';

import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ConfigSchema } from '../../../src/config.js';
import { NetlinkIpsetClient } from '../../../src/kernel/ipset/client.js';
import { defaultBinaries, Iptables, spawnExec, type Backend, type Exec } from '../../../src/kernel/iptables.js';
import { NetlinkLinkClient } from '../../../src/kernel/link.js';
import { type EndpointSlice, type Service } from '../../../src/model/k8s.js';
import { endpointSliceSchema, serviceSchema } from '../../../src/model/k8s-schemas.js';
import { endpointChain, serviceChains } from '../../../src/proxy/iptables/names.js';
import { removeIptablesModeJumps } from '../../../src/proxy/iptables/leftovers.js';
import { IptablesProxier } from '../../../src/proxy/iptables/proxier.js';
import { JUMPS } from '../../../src/proxy/iptables/rules.js';
import { OWNED_SETS } from '../../../src/proxy/ipvs/ipsets.js';
import { ipvsModeRules } from '../../../src/proxy/ipvs/rules.js';
import type { ServiceEvent } from '../../../src/source/events.js';
import { run } from '../lib/netns.js';

async function available(backend: Backend): Promise<boolean> {
  try {
    return (await spawnExec(defaultBinaries(backend, 'ipv4').save, [])).code === 0;
  } catch {
    return false;
  }
}
const backends: Backend[] = [];
for (const b of ['legacy', 'nft'] as const) if (await available(b)) backends.push(b);
if (backends.length === 0) throw new Error('no iptables backend available');

function service(name: string, clusterIPs: string[], extra: Record<string, unknown> = {}): Service {
  return serviceSchema.parse({
    metadata: { name, namespace: 'demo' },
    spec: { clusterIP: clusterIPs[0], clusterIPs, ports: [{ name: 'http', port: 80, protocol: 'TCP' }], ...extra },
  });
}
function slice(svc: string, addresses: string[], family: 'IPv4' | 'IPv6' = 'IPv4'): EndpointSlice {
  return endpointSliceSchema.parse({
    metadata: { name: `${svc}-${family}`, namespace: 'demo', labels: { 'kubernetes.io/service-name': svc } },
    addressType: family,
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    endpoints: addresses.map((a) => ({ addresses: [a], nodeName: 'node-a', conditions: { ready: true } })),
  });
}
const port = (name: string) => ({ namespace: 'demo', name, port: 'http', protocol: 'tcp' as const });
const sep = (name: string, address: string) => endpointChain(port(name), { address, port: 8080 });

/** Every protocol and external destination kind, with a Local policy and source ranges: the kernel takes them all. */
const ALL = {
  service: serviceSchema.parse({
    metadata: { name: 'all', namespace: 'demo' },
    spec: {
      type: 'LoadBalancer', clusterIP: '10.96.0.20', externalIPs: ['192.0.2.1'], externalTrafficPolicy: 'Local', healthCheckNodePort: 32000,
      loadBalancerSourceRanges: ['198.51.100.0/24'],
      ports: ['TCP', 'UDP', 'SCTP'].map((protocol, i) => ({ name: protocol.toLowerCase(), protocol, port: 80, nodePort: 31000 + i })),
    },
    status: { loadBalancer: { ingress: [{ ip: '203.0.113.7' }] } },
  }),
  slice: endpointSliceSchema.parse({
    metadata: { name: 'all-IPv4', namespace: 'demo', labels: { 'kubernetes.io/service-name': 'all' } },
    addressType: 'IPv4',
    ports: ['TCP', 'UDP', 'SCTP'].map((protocol) => ({ name: protocol.toLowerCase(), protocol, port: 8080 })),
    endpoints: [{ addresses: ['10.244.1.9'], nodeName: 'node-a' }, { addresses: ['10.244.2.9'], nodeName: 'node-b' }],
  }),
};

describe.each(backends)('IptablesProxier on %s', (backend) => {
  const bin = { v4: defaultBinaries(backend, 'ipv4'), v6: defaultBinaries(backend, 'ipv6') };
  const calls: Array<{ file: string; input?: string }> = [];
  const exec: Exec = (file, args, opts) => {
    calls.push({ file, input: opts?.input });
    return spawnExec(file, args, opts);
  };
  const ipt4 = new Iptables(backend, { family: 'ipv4', exec });
  const ipt6 = new Iptables(backend, { family: 'ipv6', exec });
  const logs: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'debug' }, new Writable({ write: (c: Buffer, _e, done) => (logs.push(JSON.parse(c.toString())), done()) }));
  const config = ConfigSchema.parse({ clusterCIDRs: ['10.244.0.0/16'], syncPeriodMs: 3_600_000, metricsBindAddress: null, healthzBindAddress: null });
  let ipset: NetlinkIpsetClient;
  const events: ServiceEvent[] = [];
  const newProxier = () =>
    new IptablesProxier({ config, nodeName: 'node-a', logger, events: { record: (e) => events.push(e) }, clients: { iptables: { ipv4: ipt4, ipv6: ipt6 }, link: NetlinkLinkClient.open(), ipset } });
  let proxier: IptablesProxier;
  let h: ReturnType<IptablesProxier['handler']>;
  const save = async (family: 'v4' | 'v6' = 'v4', table = 'nat') => (await run(bin[family].save, ['-t', table])).split('\n').filter((l) => l && !l.startsWith('#'));
  const chains = async (family: 'v4' | 'v6' = 'v4') => (await save(family)).filter((l) => l.startsWith(':KUBE-')).map((l) => l.slice(1).split(' ')[0]!).sort();
  const restoresSince = (n: number) => calls.slice(n).filter((c) => c.file.includes('restore'));
  const savesSince = (n: number) => calls.slice(n).filter((c) => c.file.endsWith('-save'));

  beforeAll(async () => {
    for (const ipt of [ipt4, ipt6]) await ipt.cleanup();
    ipset = await NetlinkIpsetClient.open();
    // What an IPVS-mode run leaves: its chains and jumps (both families), and its ipsets.
    const ctx = { config, nodeName: 'node-a', nodePortAddresses: [] };
    for (const set of OWNED_SETS) await ipset.create(set.spec, { exist: true });
    await ipt4.sync(ipvsModeRules(ctx, 'ipv4', new Set(['KUBE-CLUSTER-IP', 'KUBE-NODE-PORT-TCP'])));
    await ipt6.sync(ipvsModeRules(ctx, 'ipv6', new Set()));
    proxier = newProxier();
    h = proxier.handler(() => {});
    h.onService('demo/web', service('web', ['10.96.0.10']));
    h.onEndpointSlice('demo/web-IPv4', slice('web', ['10.244.1.2', '10.244.2.2', '10.244.3.2']));
    h.onService('demo/api', service('api', ['10.96.0.11'], { sessionAffinity: 'ClientIP' }));
    h.onEndpointSlice('demo/api-IPv4', slice('api', ['10.244.1.3', '10.244.2.3']));
    h.onService('demo/all', ALL.service);
    h.onEndpointSlice('demo/all-IPv4', ALL.slice);
  });
  afterAll(async () => {
    proxier?.close();
    ipset?.close();
    for (const ipt of [ipt4, ipt6]) await ipt.cleanup();
  });

  it('the first sync is full: KUBE-SVC/SEP chains written, the IPVS mode\'s chains, jumps and ipsets removed', async () => {
    expect(await chains()).toContain('KUBE-LOAD-BALANCER');
    const n = calls.length;
    const report = await proxier.sync();
    expect(report.full).toBe(true);
    expect(restoresSince(n).length).toBeGreaterThanOrEqual(2); // ipv4 sync + stale jumps, ipv6 cleanup
    const nat = await chains();
    expect(nat).toEqual(expect.arrayContaining([serviceChains(port('web')).svc, sep('web', '10.244.1.2'), sep('api', '10.244.2.3'), 'KUBE-NODEPORTS', 'KUBE-MARK-MASQ']));
    for (const gone of ['KUBE-LOAD-BALANCER', 'KUBE-NODE-PORT']) expect(nat).not.toContain(gone);
    const filter = (await save('v4', 'filter')).join('\n');
    expect(filter).not.toMatch(/KUBE-IPVS-FILTER|KUBE-SOURCE-RANGES-FIREWALL|kube-proxy firewall rules/);
    expect(filter.match(/^-A INPUT .*-j KUBE-PROXY-FIREWALL$/gm)).toEqual(['-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL']);
    expect(await chains('v6')).toEqual([]); // no IPv6 service: the IPVS mode's IPv6 chains are gone, nothing written
    expect(await run('ipset', ['list', '-n'])).not.toMatch(/^KUBE-/m);
    expect((await save('v4', 'mangle')).join('\n')).not.toMatch(/KUBE-PROXY-FIREWALL|KUBE-SOURCE-RANGES-FIREWALL/); // matched those sets
    const natText = (await save()).join('\n');
    expect(natText).toMatch(/-A KUBE-SVC-\w+ .*-m statistic --mode random --probability 0\.333333333\d* -j KUBE-SEP-/);
    expect(natText).toMatch(/-m recent --rcheck --seconds 10800 --reap --name KUBE-SEP-\w+ --mask 255\.255\.255\.255 --rsource -j KUBE-SEP-/);
    for (const p of ['tcp', 'udp', 'sctp']) expect(natText).toMatch(new RegExp(`^-A KUBE-SEP-\\w+ -p ${p} .*-j DNAT --to-destination 10\\.244\\.1\\.9:8080$`, 'm'));
    // eTP Local: external destinations go to the local endpoint only (KUBE-EXT -> KUBE-SVL); the cluster IP to both.
    expect(natText).toMatch(/^-A KUBE-SVL-\w+ -m comment --comment "demo\/all:sctp -> 10\.244\.1\.9:8080" -j KUBE-SEP-\w+$/m);
    expect(natText).not.toMatch(/^-A KUBE-SVL-.*10\.244\.2\.9/m);
    expect(natText).toMatch(/^-A KUBE-FW-\w+ -s 198\.51\.100\.0\/24 -m comment --comment "demo\/all:udp loadbalancer IP" -j KUBE-EXT-\w+$/m);
  });

  it('one endpoint change is one iptables-restore (no iptables-save) rewriting only that service\'s chains', async () => {
    const before = await save();
    const apiRules = before.filter((l) => l.includes(serviceChains(port('api')).svc) || l.includes(sep('api', '10.244.1.3')));
    const n = calls.length;
    h.onEndpointSlice('demo/web-IPv4', slice('web', ['10.244.1.2', '10.244.2.2']));
    const report = await proxier.sync();
    expect(report.full).toBe(false);
    expect(savesSince(n)).toHaveLength(0);
    const restores = restoresSince(n);
    expect(restores).toHaveLength(1);
    const input = restores[0]!.input!;
    expect(input).toContain(`:${serviceChains(port('web')).svc} - [0:0]`);
    expect(input).toContain(`-X ${sep('web', '10.244.3.2')}`);
    // api's chains are neither declared nor rewritten (KUBE-SERVICES still refers to them by name).
    for (const c of [serviceChains(port('api')).svc, sep('api', '10.244.1.3')]) expect(input).not.toMatch(new RegExp(`^(:|-A )${c} `, 'm'));
    const after = await save();
    expect(after.filter((l) => apiRules.includes(l))).toEqual(apiRules);
    expect(await chains()).not.toContain(sep('web', '10.244.3.2'));
    expect(after.filter((l) => l.startsWith(`-A ${serviceChains(port('web')).svc} `) && l.includes('KUBE-SEP-'))).toHaveLength(2);
  });

  it('a removed service loses its chains in a partial sync; a service with no endpoints gets REJECT', async () => {
    h.onService('demo/api', null);
    h.onService('demo/empty', service('empty', ['10.96.0.12']));
    expect((await proxier.sync()).full).toBe(false);
    const nat = await chains();
    expect(nat.filter((c) => c.includes(serviceChains(port('api')).svc.slice(9)))).toEqual([]);
    expect(nat).not.toContain(sep('api', '10.244.1.3'));
    expect((await save('v4', 'filter')).join('\n')).toMatch(/-A KUBE-SERVICES -d 10\.96\.0\.12\/32 -p tcp -m comment --comment "demo\/empty:http has no endpoints" -m tcp --dport 80 -j REJECT/);
  });

  it('a restarted proxier writes the same chain names and rules', async () => {
    const before = await save();
    const restarted = newProxier();
    const h2 = restarted.handler(() => {});
    h2.onService('demo/web', service('web', ['10.96.0.10']));
    h2.onEndpointSlice('demo/web-IPv4', slice('web', ['10.244.1.2', '10.244.2.2']));
    h2.onService('demo/empty', service('empty', ['10.96.0.12']));
    h2.onService('demo/all', ALL.service);
    h2.onEndpointSlice('demo/all-IPv4', ALL.slice);
    expect((await restarted.sync()).full).toBe(true);
    restarted.close();
    const strip = (ls: string[]) => ls.map((l) => l.replace(/\[\d+:\d+\]/, ''));
    expect(strip(await save())).toEqual(strip(before));
  });

  it('in commits of at most 3 rules (how nft splits a big restore), full and partial syncs write the same rules', async () => {
    const strip = (ls: string[]) => ls.map((l) => l.replace(/\[\d+:\d+\]/, ''));
    const before = strip(await save());
    const ipt = new Iptables(backend, { family: 'ipv4', exec, batchRules: 3 });
    const batched = new IptablesProxier({ config, nodeName: 'node-a', logger, clients: { iptables: { ipv4: ipt, ipv6: ipt6 }, link: NetlinkLinkClient.open(), ipset } });
    const h2 = batched.handler(() => {});
    h2.onService('demo/web', service('web', ['10.96.0.10']));
    h2.onEndpointSlice('demo/web-IPv4', slice('web', ['10.244.1.2', '10.244.2.2']));
    h2.onService('demo/empty', service('empty', ['10.96.0.12']));
    h2.onService('demo/all', ALL.service);
    h2.onEndpointSlice('demo/all-IPv4', ALL.slice);
    const commits = (n: number) => restoresSince(n).map((c) => c.input!.match(/^COMMIT$/gm)!.length);
    let n = calls.length;
    expect((await batched.sync()).full).toBe(true);
    expect(commits(n)[0]).toBeGreaterThan(10);
    expect(strip(await save())).toEqual(before);
    n = calls.length;
    h2.onEndpointSlice('demo/web-IPv4', slice('web', ['10.244.1.2', '10.244.2.2', '10.244.4.2']));
    expect((await batched.sync()).full).toBe(false);
    expect(commits(n)).toEqual([expect.any(Number)]);
    expect(commits(n)[0]).toBeGreaterThan(3);
    expect(await chains()).toContain(sep('web', '10.244.4.2'));
    h2.onEndpointSlice('demo/web-IPv4', slice('web', ['10.244.1.2', '10.244.2.2']));
    expect((await batched.sync()).full).toBe(false);
    expect(strip(await save())).toEqual(before);
    batched.close();
  });

  it('a partial restore that fails (a chain deleted behind our back) throws; the next sync is full and repairs', async () => {
    const web = serviceChains(port('web')).svc;
    // Someone removes the web service's chains; the next partial sync's KUBE-SERVICES refers to them.
    await run(bin.v4.restore, ['--noflush'], { input: `*nat\n:KUBE-SERVICES - [0:0]\n:${web} - [0:0]\n-X ${web}\nCOMMIT\n` });
    h.onService('demo/other', service('other', ['10.96.0.13']));
    await expect(proxier.sync()).rejects.toThrow();
    const report = await proxier.sync();
    expect(report.full).toBe(true);
    expect(await chains()).toContain(web);
  });

  it('a periodic full sync over unchanged rules runs no iptables-restore; a chain flushed by hand is rewritten alone', async () => {
    const strip = (ls: string[]) => ls.map((l) => l.replace(/\[\d+:\d+\]/, ''));
    await proxier.sync({ full: true }); // reads back what the syncs before wrote
    const before = strip(await save());
    let n = calls.length;
    expect((await proxier.sync({ full: true })).families.ipv4).toEqual({ rules: 0, chains: 0, deleted: 0 });
    expect(restoresSince(n)).toHaveLength(0);
    expect(savesSince(n)).toHaveLength(1);

    const web = serviceChains(port('web')).svc;
    await run(bin.v4.iptables, ['-w', '5', '-t', 'nat', '-F', web]);
    n = calls.length;
    const report = await proxier.sync({ full: true });
    expect(report.families.ipv4?.chains).toBe(1);
    const restores = restoresSince(n);
    expect(restores).toHaveLength(1);
    expect(restores[0]!.input!.split('\n').filter((l) => l.startsWith(':'))).toEqual([`:${web} - [0:0]`]);
    expect(strip(await save())).toEqual(before);
  });

  it('IPv6 services are written with ip6tables, and removed when they go', async () => {
    h.onService('demo/v6', service('v6', ['fd00:96::10']));
    h.onEndpointSlice('demo/v6-IPv6', slice('v6', ['fd00:244::2'], 'IPv6'));
    await proxier.sync();
    const v6 = await save('v6');
    expect(v6.join('\n')).toMatch(/-A KUBE-SEP-\w+ -p tcp -m comment --comment "demo\/v6:http" -m tcp -j DNAT --to-destination \[fd00:244::2\]:8080/);
    expect(v6.join('\n')).toContain('-A KUBE-SERVICES ! -d ::1/128 -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS');
    h.onService('demo/v6', null);
    await proxier.sync();
    expect((await chains('v6')).filter((c) => /^KUBE-(SVC|SEP)-/.test(c))).toEqual([]);
  });

  it('a scheduler annotation is reported once per service', async () => {
    const annotated = (port2: number) =>
      serviceSchema.parse({
        metadata: { name: 'hashed', namespace: 'demo', annotations: { 'kube-ipvs-proxy.io/scheduler': 'sh' } },
        spec: { clusterIP: '10.96.0.14', ports: [{ name: 'http', port: port2 }] },
      });
    h.onService('demo/hashed', annotated(80));
    await proxier.sync();
    h.onService('demo/hashed', annotated(81));
    await proxier.sync();
    expect(logs.filter((l) => l.service === 'demo/hashed' && String(l.msg).includes('cannot honour the scheduler'))).toHaveLength(1);
    expect(events.filter((e) => e.service === 'demo/hashed')).toEqual([
      { service: 'demo/hashed', type: 'Warning', reason: 'SchedulerNotHonoured', action: 'Programming', note: expect.stringContaining('scheduler "sh" is not honoured in the iptables proxy mode') },
    ]);
  });

  it('removeIptablesModeJumps (the IPVS mode at start) deletes the jumps only the iptables mode uses', async () => {
    const keep = ipvsModeRules({ config, nodeName: 'node-a', nodePortAddresses: [] }, 'ipv4', new Set()).flatMap((t) => t.jumps ?? []);
    const builtinJumps = async (table: string) => (await save('v4', table)).filter((l) => /^-A (INPUT|OUTPUT|FORWARD|PREROUTING|POSTROUTING) .*-j KUBE-/.test(l));
    expect(await builtinJumps('filter')).toHaveLength(JUMPS.filter.length);
    const natBefore = await builtinJumps('nat');
    const removed = await removeIptablesModeJumps(ipt4, keep);
    expect(removed).toHaveLength(JUMPS.filter.length - 1);
    expect(await builtinJumps('filter')).toEqual(['-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD']); // the IPVS mode's too
    expect(await builtinJumps('nat')).toEqual(natBefore); // identical in both modes
    expect(await removeIptablesModeJumps(ipt4, keep)).toEqual([]);
  });
});
