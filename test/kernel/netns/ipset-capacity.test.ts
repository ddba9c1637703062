// ipset capacity (kubernetes#129389) on the host kernel, in a fresh netns: the IPVS proxier (ipset
// and iptables real; IPVS and kube-ipvs0 faked: the host has neither IPVS nor dummy links, and
// binding 70,000 addresses is not what this is about) goes from 30,000 to 70,000
// ClusterIP Services. kube-proxy's sets stop at maxelem 65,536 and refuse the rest; here the sets
// are grown by a swap while a client keeps connecting to a cluster IP, and every one of its SYNs
// is counted by the iptables rule that matches KUBE-CLUSTER-IP, before, during and after.
import { assertIsolated } from '../lib/guard.js';
assertIsolated();

import { spawn } from 'node:child_process';
import { Writable } from 'node:stream';

import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ConfigSchema } from '../../../src/config.js';
import { NetlinkIpsetClient } from '../../../src/kernel/ipset/client.js';
import { defaultBinaries, Iptables, spawnExec, type Backend } from '../../../src/kernel/iptables.js';
import { FakeIpvsClient } from '../../../src/kernel/ipvs/fake.js';
import { FakeLinkClient } from '../../../src/kernel/link.js';
import { serviceSchema } from '../../../src/model/k8s-schemas.js';
import { IpvsProxier } from '../../../src/proxy/ipvs/proxier.js';
import { ProxyMetrics } from '../../../src/server/metrics.js';
import { run } from '../lib/netns.js';

async function available(backend: Backend): Promise<boolean> {
  return (await spawnExec(defaultBinaries(backend, 'ipv4').save, []).catch(() => ({ code: 1 }))).code === 0;
}
const backend: Backend = (await available('legacy')) ? 'legacy' : 'nft';
const bin = defaultBinaries(backend, 'ipv4');

const FIRST = 30_000;
const TOTAL = 70_000;
const ip = (i: number) => `10.${96 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`;
const service = (i: number) =>
  serviceSchema.parse({ metadata: { name: `s${i}`, namespace: 'cap' }, spec: { clusterIP: ip(i), ports: [{ name: 'http', port: 80, protocol: 'TCP' }] } });
/** The rule that marks off-cluster traffic to a cluster IP (KUBE-SERVICES, nat). */
const MASQ_RULE = /^\[(\d+):\d+\] -A KUBE-SERVICES ! -s 10\.244\.0\.0\/16 .*--match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ$/m;

/** The packets the rule has matched. */
async function matched(): Promise<number> {
  const m = MASQ_RULE.exec(await run(bin.save, ['-c', '-t', 'nat']));
  if (!m) throw new Error('the KUBE-CLUSTER-IP rule is missing');
  return Number(m[1]);
}
/** maxelem and the number of entries of a set, as `ipset list -t` reports them. */
async function header(set: string): Promise<{ maxelem: number; entries: number }> {
  const t = await run('ipset', ['list', '-t', set]);
  return { maxelem: Number(/maxelem (\d+)/.exec(t)![1]), entries: Number(/Number of entries: (\d+)/.exec(t)![1]) };
}

// Connects to `host`:80 in a loop (each attempt a new connection: one SYN through nat OUTPUT)
// until stdin closes, then prints how many attempts it made.
const CLIENT_JS = `
const net = require('node:net');
let n = 0, stop = false;
process.stdin.on('end', () => (stop = true)).resume();
(function next() {
  if (stop) return process.stdout.write(String(n));
  const s = net.connect({ host: process.argv[1], port: 80 });
  const done = () => { s.destroy(); n++; setImmediate(next); };
  s.on('connect', done).on('error', done);
})();
`;

describe(`ipset capacity beyond 65,536 entries (iptables ${backend})`, () => {
  const logs: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'info' }, new Writable({ write: (c: Buffer, _e, done) => (logs.push(JSON.parse(c.toString())), done()) }));
  const config = ConfigSchema.parse({ clusterCIDRs: ['10.244.0.0/16'], syncPeriodMs: 3_600_000, minSyncPeriodMs: 0, metricsBindAddress: null, healthzBindAddress: null });
  const metrics = new ProxyMetrics({ defaultMetrics: false });
  const ipt = new Iptables(backend, { family: 'ipv4' });
  const link = new FakeLinkClient(); // one for both daemons, as the kernel's would be
  let proxier: IpvsProxier;

  beforeAll(async () => {
    await ipt.cleanup(['nat', 'filter', 'mangle']);
    await run('ipset', ['destroy']);
    await run('ip', ['addr', 'add', `${ip(1)}/32`, 'dev', 'lo']); // the cluster IP the client connects to, local as on kube-ipvs0
    proxier = new IpvsProxier({
      config,
      nodeName: 'node-a',
      logger,
      dummyName: 'kube-ipvs0',
      metrics,
      clients: { ipvs: new FakeIpvsClient(), ipset: await NetlinkIpsetClient.open(), link, iptables: { ipv4: ipt, ipv6: null } },
      sysctl: () => [],
      conntrack: async () => undefined,
    });
    const h = proxier.handler(() => {});
    for (let i = 1; i <= FIRST; i++) h.onService(`cap/s${i}`, service(i));
    h.onSynced();
    await proxier.sync();
  }, 300_000);

  afterAll(async () => {
    proxier?.close();
    await ipt.cleanup(['nat', 'filter', 'mangle']);
    await run('ipset', ['destroy']);
    await run('ip', ['addr', 'del', `${ip(1)}/32`, 'dev', 'lo']).catch(() => {});
  });

  it('30,000 Services: KUBE-CLUSTER-IP is created at kube-proxy\'s maxelem 65,536', async () => {
    expect(await header('KUBE-CLUSTER-IP')).toEqual({ maxelem: 65536, entries: FIRST });
  });

  it('70,000 Services: every entry lands, the set was grown by a swap, and the rule matching it counted every SYN throughout', async () => {
    const before = await matched();
    const client = spawn(process.execPath, ['-e', CLIENT_JS, ip(1)], { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    client.stdout.on('data', (d) => (out += d));
    const exited = new Promise((r) => client.once('exit', r));
    await new Promise((r) => setTimeout(r, 300)); // connecting before the sync starts

    const tp = Date.now();
    const h = proxier.handler(() => {});
    for (let i = FIRST + 1; i <= TOTAL; i++) h.onService(`cap/s${i}`, service(i));

    const t0 = Date.now();
    const report = await proxier.sync();


    await new Promise((r) => setTimeout(r, 300)); // and after it ends
    client.stdin.end();
    await exited;
    const attempts = Number(out);
    expect(report.ops.ipsetGrow).toBe(2); // KUBE-CLUSTER-IP and KUBE-IPVS-IPS (every bound address)
    expect(report.errors).toBe(0);
    expect(attempts).toBeGreaterThan(50);
    expect((await matched()) - before).toBe(attempts);

    expect(await header('KUBE-CLUSTER-IP')).toEqual({ maxelem: 262144, entries: TOTAL });
    expect(await header('KUBE-IPVS-IPS')).toEqual({ maxelem: 262144, entries: TOTAL });
    await run('ipset', ['test', 'KUBE-CLUSTER-IP', `${ip(TOTAL)},tcp:80`]); // the 70,000th Service
    expect(await run('ipset', ['list', '-n'])).not.toMatch(/KUBE-GROW-/);
    await run(bin.save.replace(/-save$/, ''), ['-t', 'nat', '-C', 'KUBE-SERVICES', '!', '-s', '10.244.0.0/16', '-m', 'comment', '--comment', 'Kubernetes service cluster ip + port for masquerade purpose', '-m', 'set', '--match-set', 'KUBE-CLUSTER-IP', 'dst,dst', '-j', 'KUBE-MARK-MASQ']);
    expect(logs.filter((l) => l.msg === 'ipset grown ahead of need (a larger copy swapped in)').map((l) => [l.set, l.from, l.to, l.entries])).toEqual([
      ['KUBE-CLUSTER-IP', 65536, 262144, TOTAL],
      ['KUBE-IPVS-IPS', 65536, 262144, TOTAL],
    ]);

    const text = await metrics.expose();
    expect(text).toContain(`kube_ipvs_proxy_ipset_entries{set="KUBE-CLUSTER-IP"} ${TOTAL}`);
    expect(text).toContain('kube_ipvs_proxy_ipset_maxelem{set="KUBE-CLUSTER-IP"} 262144');
    expect(text).toContain('kube_ipvs_proxy_ipset_maxelem{set="KUBE-NODE-PORT-TCP"} 65536');
  }, 300_000);

  it('a restart adopts the grown sets: their sizes are read, nothing is grown or rewritten again', async () => {
    proxier.close();
    proxier = new IpvsProxier({
      config,
      nodeName: 'node-a',
      logger,
      dummyName: 'kube-ipvs0',
      clients: { ipvs: new FakeIpvsClient(), ipset: await NetlinkIpsetClient.open(), link, iptables: { ipv4: ipt, ipv6: null } },
      sysctl: () => [],
      conntrack: async () => undefined,
    });
    const h = proxier.handler(() => {});
    for (let i = 1; i <= TOTAL; i++) h.onService(`cap/s${i}`, service(i));
    h.onSynced();
    const grownBefore = logs.filter((l) => l.set !== undefined && l.from !== undefined).length;
    const report = await proxier.sync();
    expect(report.adopted).toBe(true);
    expect(logs.filter((l) => l.set !== undefined && l.from !== undefined).length).toBe(grownBefore);
    expect(await header('KUBE-CLUSTER-IP')).toEqual({ maxelem: 262144, entries: TOTAL });
  }, 300_000);
});
