// The daemon's heap at cluster scale, on the host (no IPVS needed): the API source, the change
// tracker and the IPVS proxier of dist/src take N Services x 10 from bench/fake-apiserver.mjs
// (in a child process, so its objects are not in this heap), and the proxier's first sync adopts
// an empty kernel through kernel clients that acknowledge every write and keep nothing. Prints
// the heap after the first sync (after two full GCs), the largest heap seen between two turns of
// the event loop during it, and V8's heap limit (`--max-old-space-size=259` is what 512Mi gives).
// What it leaves out: the netlink clients' buffers, metrics, the HTTP servers, Events.
//   node --expose-gc bench/heap.mjs [N]            (default 50,000)
//   node --expose-gc bench/heap.mjs N --snapshot F (also writes a heap snapshot to F)
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getHeapStatistics, writeHeapSnapshot } from 'node:v8';

const [, , nArg, ...rest] = process.argv;

if (nArg === '--serve') {
  const { FakeApiServer } = await import('./fake-apiserver.mjs');
  const { makeService, makeSlice, makeNode } = await import('./objects.mjs');
  const n = Number(rest[0]);
  const api = new FakeApiServer({ token: 'bench', anonymous: true });
  for (let i = 0; i < n; i++) {
    api.put('services', makeService(i));
    api.put('endpointslices', makeSlice(i, 10));
  }
  api.put('nodes', makeNode());
  api.compact();
  const url = await api.start();
  api.writeKubeconfig(rest[1], url);
  process.send('ready');
  process.on('disconnect', () => process.exit(0)); // the measuring process ended (or crashed)
} else {
  if (typeof globalThis.gc !== 'function') throw new Error('run with node --expose-gc');
  const n = Number(nArg ?? 50_000);
  const snapshot = rest[0] === '--snapshot' ? rest[1] : undefined;
  const dir = mkdtempSync(join(tmpdir(), 'kip-heap-'));
  const kubeconfig = join(dir, 'kubeconfig');
  const server = fork(new URL(import.meta.url).pathname, ['--serve', String(n), kubeconfig], { stdio: 'inherit' });
  await new Promise((res, rej) => server.once('message', res).once('exit', (c) => rej(new Error(`the API server exited (${c})`))));
  const mod = (p) => import(new URL(`../dist/src/${p}`, import.meta.url).href);
  const [{ parseArgs }, { FakeIpsetClient }, { FakeIpvsClient }, { FakeLinkClient }, { createLogger }, { IpvsProxier }, { ProxyHealth }, { ProxyMetrics }, { startSource }, { NODE_NAME, CLUSTER_CIDR }] = await Promise.all([
    mod('config.js'), mod('kernel/ipset/fake.js'), mod('kernel/ipvs/fake.js'), mod('kernel/link.js'), mod('log-json.js'), mod('proxy/ipvs/proxier.js'), mod('server/health.js'), mod('server/metrics.js'), mod('source/start.js'), import('./objects.mjs'),
  ]);
  const mib = (b) => `${(b / 2 ** 20).toFixed(1)} MiB`;
  const settled = () => (globalThis.gc(), globalThis.gc(), process.memoryUsage().heapUsed);
  const base = settled();

  const config = parseArgs(['--kubeconfig', kubeconfig, '--hostname-override', NODE_NAME, '--cluster-cidr', CLUSTER_CIDR]).config;
  // Warnings and errors only (a failed adoption says why).
  const logger = createLogger({ format: 'json', verbosity: 0 }, { write: (l) => (JSON.parse(l).level >= 40 && process.stderr.write(l), true) });
  const started = await startSource(config, logger, {});
  const tracker = await started.tracker;
  await started.synced;
  const listed = settled();
  // Kernel clients that keep nothing: every IPVS op and every ipset entry acknowledged.
  const ipvs = new FakeIpvsClient();
  ipvs.apply = async (ops) => ops.map(() => ({ ok: true }));
  const ipset = new FakeIpsetClient();
  ipset.add = async (_name, entries) => entries.map(() => ({ ok: true }));
  const link = new FakeLinkClient();
  link.addLink('eth0', null, true, ['192.0.2.10']);
  const iptables = { sync: async () => [], generation: async () => null, saveOwned: async () => ({ backend: 'legacy', nat: [], filter: [] }) };
  const proxier = new IpvsProxier({
    config, nodeName: NODE_NAME, logger, dummyName: 'kube-ipvs0', tracker,
    clients: { ipvs, ipset, link, iptables: { ipv4: iptables, ipv6: null } },
    health: new ProxyHealth({ syncPeriodMs: 30_000 }), metrics: new ProxyMetrics({ defaultMetrics: false }), sysctl: () => [],
  });
  started.held.attach(proxier.handler(() => {}));
  let peak = 0;
  let sampling = true;
  const sample = () => {
    peak = Math.max(peak, process.memoryUsage().heapUsed);
    if (sampling) setImmediate(sample);
  };
  sample();
  const t0 = performance.now();
  await proxier.sync();
  await proxier.verified();
  const syncMs = performance.now() - t0;
  sampling = false;
  const after = settled();
  console.log(`${n.toLocaleString('en')} Services x 10 (host, kernel clients that keep nothing):`);
  console.log(`  heap after the list: ${mib(listed)} (${mib(listed - base)} over the start, ${((listed - base) / n).toFixed(0)} bytes per Service)`);
  console.log(`  heap after the first sync: ${mib(after)} (${((after - base) / n).toFixed(0)} bytes per Service); largest between event-loop turns during it: ${mib(peak)}; sync ${(syncMs / 1000).toFixed(1)} s; heap limit ${mib(getHeapStatistics().heap_size_limit)}`);
  if (snapshot) console.log(`  snapshot: ${writeHeapSnapshot(snapshot)}`);
  await started.source.stop();
  proxier.close();
  server.kill();
  rmSync(dir, { recursive: true, force: true });
}
