// Periodic resync under churn, and restart over a programmed kernel, through the real IPVS
// proxier inside UML (`node bench/resync.mjs`; BENCH_SERVICES, default 3000, x 10 endpoints):
//   - cold full sync vs ipvsadm-restore of the same table (same boot)
//   - one no-change periodic verification: duration, steps, longest hold of the sync queue, writes
//   - churn at 50 endpoint changes/s through the bounded-frequency runner (min 1 s, period 10 s)
//     while verifications run: event -> kernel latency p50/p99 (an event is in the kernel when
//     the sync that started after it ends)
//   - restart: a new proxier adopting the programmed kernel, time to its first sync, writes
import { fileURLToPath } from 'node:url';

if (process.env.KIP_IN_UML !== '1') {
  const { runInUml } = await import('../test/harness/uml.mjs');
  const r = await runInUml({ command: [process.execPath, fileURLToPath(import.meta.url)], env: { BENCH_SERVICES: process.env.BENCH_SERVICES ?? '3000' }, timeoutMs: 30 * 60_000, mem: '2G' });
  process.exit(r.code);
}

const { parseArgs } = await import('../dist/src/config.js');
const { NetlinkIpsetClient } = await import('../dist/src/kernel/ipset/client.js');
const { NetlinkIpvsClient } = await import('../dist/src/kernel/ipvs/client.js');
const { Iptables } = await import('../dist/src/kernel/iptables.js');
const { NetlinkLinkClient } = await import('../dist/src/kernel/link.js');
const { createLogger } = await import('../dist/src/log-json.js');
const { endpointSliceSchema, serviceSchema } = await import('../dist/src/model/k8s-schemas.js');
const { IpvsProxier } = await import('../dist/src/proxy/ipvs/proxier.js');
const { BoundedFrequencyRunner } = await import('../dist/src/proxy/runner.js');
const { reloadIpvs, restoreText, sh, time } = await import('./uml-kernel.mjs');

const N = Number(process.env.BENCH_SERVICES ?? 3000);
const vip = (i) => `10.97.${i >> 8}.${i & 255}`;
const ep = (n) => `10.244.${(n >> 8) & 255}.${n & 255}`;
const mk = (i, extra = 0) => ({
  service: serviceSchema.parse({ metadata: { name: `svc-${i}`, namespace: 'bench' }, spec: { clusterIP: vip(i), ports: [{ name: 'http', port: 80, targetPort: 8080 }] } }),
  slice: endpointSliceSchema.parse({
    metadata: { name: `svc-${i}-1`, namespace: 'bench', labels: { 'kubernetes.io/service-name': `svc-${i}` } },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    endpoints: Array.from({ length: 10 }, (_, j) => ({ addresses: [j === 0 && extra ? `10.245.${extra >> 8 & 255}.${extra & 255}` : ep(i * 10 + j)], conditions: { ready: true } })),
  }),
});
const objects = Array.from({ length: N }, (_, i) => mk(i));
/** The latest slice per service (churn replaces them), so the restarted proxier wants what the kernel holds. */
const current = objects.map((o) => o.slice);
sh('sh', ['-c', 'iptables-legacy -t mangle -N KUBE-IPTABLES-HINT 2>/dev/null || true']);
const { config } = parseArgs(['--hostname-override', 'kip-node', '--cluster-cidr', '10.244.0.0/16', '--ipvs-sync-period', '10s', '--ipvs-min-sync-period', '1s', '--graceful-termination-timeout', '0s']);
const logger = createLogger({ format: 'text', verbosity: 0 }, { write: () => true });
const stateDir = '/run/kip-bench-state';

async function proxier() {
  const ipvs = (await NetlinkIpvsClient.open()).client;
  const read = (await NetlinkIpvsClient.open()).client;
  const p = new IpvsProxier({
    config, nodeName: 'kip-node', logger, dummyName: 'kube-ipvs0', stateDir,
    clients: {
      ipvs, ipset: await NetlinkIpsetClient.open(), link: NetlinkLinkClient.open(), iptables: { ipv4: await Iptables.create({ family: 'ipv4' }), ipv6: null },
      read: { ipvs: read, ipset: await NetlinkIpsetClient.open(), link: NetlinkLinkClient.open() },
    },
    conntrack: async () => undefined,
  });
  const h = p.handler(() => {});
  objects.forEach(({ service }, i) => {
    h.onService(`bench/${service.metadata.name}`, service);
    h.onEndpointSlice(`bench/${current[i].metadata.name}`, current[i]);
  });
  return { p, h };
}
const f = (ms) => `${Math.round(ms)} ms`;

sh('node', ['dist/bin/cli.js', 'cleanup']);
reloadIpvs();
const restoreMs = await time(() => sh('ipvsadm-restore', [], restoreText(objects.map((o, i) => ({ address: vip(i), port: 80, destinations: o.slice.endpoints.map((e) => ({ address: e.addresses[0], port: 8080 })) })))));
sh('node', ['dist/bin/cli.js', 'cleanup']);
reloadIpvs();
sh('rm', ['-rf', stateDir]);
const a = await proxier();
const coldMs = await time(() => a.p.sync({ full: true }));
console.log(`resync bench: ${N} services x 10 endpoints, kernel ${sh('uname', ['-r']).trim()}`);
console.log(`  cold full sync ${f(coldMs)}; ipvsadm-restore of the IPVS table ${f(restoreMs)} (ratio ${(coldMs / restoreMs).toFixed(2)})`);

await a.p.sync({ periodic: true });
const idle = await a.p.verified();
console.log(`  no-change verification: ${JSON.stringify(idle)}`);

// churn: 50 changes/s for 25 s through the runner; once with the periodic verification every
// 10 s (two or three run meanwhile), once without any (the reference for the same churn)
const pct = (a, q) => [...a].sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(q * a.length))];
let k = 0;
async function churn(periodMs) {
  const pending = [];
  const latencies = [];
  let verifications = 0;
  const runner = new BoundedFrequencyRunner(
    async ({ periodic }) => {
      const served = pending.splice(0, pending.length);
      await a.p.sync({ periodic });
      if (periodic) verifications++;
      const end = performance.now();
      for (const t of served) latencies.push(end - t);
    },
    { minIntervalMs: 1000, maxIntervalMs: periodMs, retryIntervalMs: 1000 },
  );
  runner.start();
  const t0 = performance.now();
  const k0 = k;
  await new Promise((resolve) => {
    const timer = setInterval(() => {
      if (performance.now() - t0 > 25_000) return clearInterval(timer), resolve();
      const i = (k * 7919) % N;
      k++;
      current[i] = mk(i, k).slice;
      a.h.onEndpointSlice(`bench/svc-${i}-1`, current[i]);
      pending.push(performance.now());
      runner.run();
    }, 20);
  });
  await runner.stop();
  await a.p.verified();
  return `${k - k0} changes, ${verifications} verifications: event->kernel p50 ${f(pct(latencies, 0.5))} p99 ${f(pct(latencies, 0.99))} max ${f(Math.max(...latencies))}`;
}
console.log(`  churn 50/s for 25 s with verifications every 10 s: ${await churn(10_000)}`);
const v = await a.p.verified();
if (v) console.log(`  last verification during churn: ${JSON.stringify(v)}`);
console.log(`  the same churn without verifications (reference): ${await churn(3_600_000)}`);

// restart over the programmed kernel (after the drains of the churn are done with)
await a.p.sync();
a.p.close();
const b = await proxier();
const restartMs = await time(() => b.p.sync());
const rv = await b.p.verified();
console.log(`  restart (adopt) first sync ${f(restartMs)} vs cold full sync ${f(coldMs)}; adoption: ${JSON.stringify(rv)}`);
b.p.close();
sh('node', ['dist/bin/cli.js', 'cleanup']);
