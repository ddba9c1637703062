// The iptables proxier wired to a recording exec (no kernel, no host state): which syncs are
// full or partial, what each one runs, failure and repair, dry-run, sysctls, UDP conntrack
// cleanup, health and metrics.
import { beforeEach, describe, expect, it } from 'vitest';

import { parseArgs } from '../../src/config.js';
import { Iptables, type Exec } from '../../src/kernel/iptables.js';
import { FakeLinkClient } from '../../src/kernel/link.js';
import { createLogger } from '../../src/log-json.js';
import { endpointSliceSchema, serviceSchema } from '../../src/model/k8s-schemas.js';
import { endpointChain, serviceChains } from '../../src/proxy/iptables/names.js';
import { IptablesProxier, type IptablesProxierOptions } from '../../src/proxy/iptables/proxier.js';
import { ProxyHealth } from '../../src/server/health.js';
import { ProxyMetrics } from '../../src/server/metrics.js';
import type { SourceHandler } from '../../src/source/types.js';

const svc = (name: string, ip: string, extra: Record<string, unknown> = {}, annotations: Record<string, string> = {}) =>
  serviceSchema.parse({ metadata: { name, namespace: 'ns', annotations }, spec: { clusterIP: ip, ports: [{ name: 'http', port: 80, protocol: 'TCP' }], ...extra } });
const slice = (name: string, ips: string[], protocol = 'TCP') =>
  endpointSliceSchema.parse({
    metadata: { name: `${name}-1`, namespace: 'ns', labels: { 'kubernetes.io/service-name': name } },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 8080, protocol }],
    endpoints: ips.map((ip) => ({ addresses: [ip], conditions: { ready: true } })),
  });
const port = (name: string) => ({ namespace: 'ns', name, port: 'http', protocol: 'tcp' as const });

let calls: Array<{ file: string; args: readonly string[]; input?: string }>;
let failRestore: boolean;
let clock: number;
let logs: Array<Record<string, unknown>>;
let sysctls: string[];
let conntrack: string[][];
let health: ProxyHealth;
let metrics: ProxyMetrics;
let proxier: IptablesProxier;
let h: SourceHandler;

const exec: Exec = async (file, args, opts) => {
  calls.push({ file, args, input: opts?.input });
  if (file.endsWith('-restore') && failRestore) return { code: 1, stdout: '', stderr: 'iptables-restore: line 3 failed', signal: null };
  if (file.endsWith('-save')) return { code: 0, stdout: '', stderr: '', signal: null };
  return { code: file.includes('-C') ? 1 : 0, stdout: '', stderr: '', signal: null };
};
const saves = () => calls.filter((c) => c.file.endsWith('-save'));
const restores = () => calls.filter((c) => c.file.endsWith('-restore'));

function make(flags: string[] = [], o: Partial<IptablesProxierOptions> = {}): void {
  const link = new FakeLinkClient();
  link.addLink('eth0', null, true, ['192.0.2.10']);
  const logger = createLogger({ format: 'json', verbosity: 0 }, { write: (l: string) => (logs.push(JSON.parse(l)), true) } as never);
  proxier = new IptablesProxier({
    config: parseArgs(['--proxy-mode', 'iptables', '--hostname-override', 'n1', '--cluster-cidr', '10.244.0.0/16', ...flags]).config,
    nodeName: 'n1',
    logger,
    clients: { iptables: { ipv4: new Iptables('legacy', { family: 'ipv4', exec }), ipv6: new Iptables('legacy', { family: 'ipv6', exec }) }, link },
    health,
    metrics,
    now: () => clock,
    sysctl: (settings) => (sysctls.push(...settings.map((s) => `${s.key}=${s.value}`)), []),
    conntrack: async (args) => void conntrack.push(args),
    tcpBeLiberal: () => false,
    ...o,
  });
  h = proxier.handler(() => {});
}

beforeEach(() => {
  calls = [];
  failRestore = false;
  clock = 1_000_000;
  logs = [];
  sysctls = [];
  conntrack = [];
  health = new ProxyHealth({ syncPeriodMs: 30_000 });
  metrics = new ProxyMetrics({ defaultMetrics: false });
  make();
  h.onService('ns/web', svc('web', '10.96.0.10'));
  h.onEndpointSlice('ns/web-1', slice('web', ['10.244.1.2', '10.244.2.2']));
  h.onService('ns/api', svc('api', '10.96.0.11'));
  h.onEndpointSlice('ns/api-1', slice('api', ['10.244.1.3']));
});

describe('IptablesProxier syncs', () => {
  it('the first sync is full: sysctls, one iptables-save and one restore for IPv4, one ip6tables-save (nothing to clean) and no ip6tables restore', async () => {
    const r = await proxier.sync();
    expect(r).toMatchObject({ full: true, changedServices: 2, families: { ipv4: { chains: 14, deleted: 0 } } });
    expect(sysctls[0]).toBe('net/ipv4/ip_forward=1'); // (and bridge-nf-call-iptables where br_netfilter is loaded)
    expect(saves().map((c) => c.file)).toEqual(['iptables-legacy-save', 'ip6tables-legacy-save']);
    expect(restores().map((c) => c.file)).toEqual(['iptables-legacy-restore']);
    const input = restores()[0]!.input!;
    expect(input).toContain(`:${serviceChains(port('web')).svc} - [0:0]`);
    expect(input).toContain('-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP');
    expect(input.indexOf('*filter')).toBeLessThan(input.indexOf('*nat'));
    expect(health.snapshot().status.get('IPv4')?.healthy).toBe(true);
    expect(await metrics.expose()).toMatch(/^kubeproxy_sync_full_proxy_rules_duration_seconds_count 1$/m);
  });

  it('an endpoint change is a partial sync: no save, one restore with only that service\'s chains', async () => {
    await proxier.sync();
    calls = [];
    h.onEndpointSlice('ns/web-1', slice('web', ['10.244.1.2']));
    const r = await proxier.sync();
    expect(r).toMatchObject({ full: false, changedServices: 1, families: { ipv4: { deleted: 1 } } });
    expect(saves()).toEqual([]);
    expect(restores()).toHaveLength(1);
    const input = restores()[0]!.input!;
    expect(input).toContain(`:${serviceChains(port('web')).svc} - [0:0]`);
    expect(input).toContain(`-X ${endpointChain(port('web'), { address: '10.244.2.2', port: 8080 })}`);
    expect(input).not.toContain(`:${serviceChains(port('api')).svc}`);
    expect(input).toContain(`-j ${serviceChains(port('api')).svc}`); // still referenced from KUBE-SERVICES
    expect(await metrics.expose()).toMatch(/^kubeproxy_sync_partial_proxy_rules_duration_seconds_count 1$/m);
  });

  it('the sync period makes the next sync full', async () => {
    await proxier.sync();
    clock += 29_000;
    expect((await proxier.sync()).full).toBe(false);
    clock += 2_000;
    expect((await proxier.sync()).full).toBe(true);
  });

  it('a failed restore throws and counts; the next sync is full', async () => {
    await proxier.sync();
    failRestore = true;
    h.onService('ns/api', null);
    await expect(proxier.sync()).rejects.toThrow(/line 3 failed/);
    expect(await metrics.expose()).toMatch(/^kubeproxy_sync_proxy_rules_iptables_restore_failures_total 1$/m);
    failRestore = false;
    calls = [];
    const r = await proxier.sync();
    expect(r.full).toBe(true);
    expect(restores()[0]!.input).not.toContain(serviceChains(port('api')).svc);
  });

  it('--dry-run prints both tables\' restore input and runs nothing', async () => {
    let out = '';
    make(['--dry-run'], { out: (t) => (out += t) });
    h.onService('ns/web', svc('web', '10.96.0.10'));
    h.onEndpointSlice('ns/web-1', slice('web', ['10.244.1.2']));
    await proxier.sync();
    expect(calls).toEqual([]);
    expect(sysctls).toEqual([]);
    expect(out).toMatch(/^# ipv4\n\*filter\n/);
    expect(out).toContain('-A KUBE-SEP-');
  });

  it('IPv6 services bring ip6tables in; with liberal conntrack no INVALID drop', async () => {
    make([], { tcpBeLiberal: () => true });
    h.onService('ns/v6', svc('v6', 'fd00:96::1'));
    const r = await proxier.sync();
    expect(Object.keys(r.families)).toEqual(['ipv4', 'ipv6']);
    const v6 = restores().find((c) => c.file === 'ip6tables-legacy-restore')!.input!;
    expect(v6).toContain('-A KUBE-SERVICES -m comment --comment "ns/v6:http has no endpoints"');
    expect(v6).not.toContain('INVALID');
  });

  it('UDP: endpoints appearing clear the service IP\'s entries; a removed endpoint\'s entries are cleared', async () => {
    h.onService('ns/dns', svc('dns', '10.96.0.53', { ports: [{ name: 'http', port: 53, protocol: 'UDP' }] }));
    h.onEndpointSlice('ns/dns-1', slice('dns', ['10.244.1.5', '10.244.1.6'], 'UDP'));
    await proxier.sync();
    expect(conntrack).toEqual([['-D', '-f', 'ipv4', '-p', 'udp', '--orig-dst', '10.96.0.53', '--orig-port-dst', '53', '--reply-src', '10.96.0.53']]); // never DNATed
    conntrack = [];
    h.onEndpointSlice('ns/dns-1', slice('dns', ['10.244.1.5'], 'UDP'));
    await proxier.sync();
    expect(conntrack).toEqual([['-D', '-f', 'ipv4', '-p', 'udp', '--orig-dst', '10.96.0.53', '--orig-port-dst', '53', '--dst-nat', '10.244.1.6']]);
  });

  it('a scheduler annotation is logged once per Service, again after it was dropped and comes back', async () => {
    const annotated = (on: boolean) => svc('web', '10.96.0.10', {}, on ? { 'kube-ipvs-proxy.io/scheduler': 'lc' } : {});
    const count = () => logs.filter((l) => String(l.msg).includes('cannot honour the scheduler')).length;
    h.onService('ns/web', annotated(true));
    await proxier.sync();
    h.onEndpointSlice('ns/web-1', slice('web', ['10.244.1.9']));
    await proxier.sync();
    expect(count()).toBe(1);
    h.onService('ns/web', annotated(false));
    await proxier.sync();
    h.onService('ns/web', annotated(true));
    await proxier.sync();
    expect(count()).toBe(2);
    expect(logs.find((l) => String(l.msg).includes('cannot honour'))).toMatchObject({ level: 40, service: 'ns/web', scheduler: 'lc' });
  });
});
