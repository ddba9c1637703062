// iptables-mode benchmark on the host kernel, in a fresh network namespace (re-executes itself
// under `unshare -n` when started outside one): 1,000 Services x 10 endpoints synced from empty
// tables through the IptablesProxier (rule generation + the driver's iptables-save + one
// iptables-restore), then one endpoint change at that size (a partial sync: one restore of the
// fixed chains and that service's chains). Each against a plain `iptables-restore --noflush` of
// the very text the proxier generated, spawned in the same run; the change also against a plain
// restore of the full text (what a proxy without partial syncs writes). Then the periodic full
// sync with nothing changed (one iptables-save, no restore when the chains read back as written)
// against that same full-text restore (what it wrote every period before). Medians of 5 rounds.
//   npm run build && node bench/iptables.mjs     (BENCH_SERVICES, BENCH_DESTS, BENCH_ROUNDS, BENCH_BACKENDS=nft,legacy)
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { Writable } from 'node:stream';

import { inFreshNetnsOrReexec } from './fresh-netns.mjs';
import { ratio, recordResults } from './results.mjs';

inFreshNetnsOrReexec(import.meta.url, 'iptables');

const { ConfigSchema } = await import('../dist/src/config.js');
const { Iptables, spawnExec, defaultBinaries } = await import('../dist/src/kernel/iptables.js');
const { NetlinkLinkClient } = await import('../dist/src/kernel/link.js');
const { endpointSliceSchema, serviceSchema } = await import('../dist/src/model/k8s-schemas.js');
const { IptablesProxier } = await import('../dist/src/proxy/iptables/proxier.js');
const { pino } = await import('pino');

const SERVICES = Number(process.env.BENCH_SERVICES ?? 1000);
const DESTS = Number(process.env.BENCH_DESTS ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const BACKENDS = (process.env.BENCH_BACKENDS ?? 'nft,legacy').split(',').filter(Boolean);

const vip = (i) => `10.97.${i >> 8}.${i & 255}`;
const ep = (n) => `10.${16 + ((n >> 16) & 15)}.${(n >> 8) & 255}.${n & 255}`;
const service = (i) => serviceSchema.parse({ metadata: { name: `svc-${i}`, namespace: 'bench' }, spec: { clusterIP: vip(i), ports: [{ name: 'http', port: 80 }] } });
const slice = (i, first = 0) =>
  endpointSliceSchema.parse({
    metadata: { name: `svc-${i}-1`, namespace: 'bench', labels: { 'kubernetes.io/service-name': `svc-${i}` } },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    endpoints: Array.from({ length: DESTS }, (_, j) => ({ addresses: [ep(i * DESTS + j + first)], conditions: { ready: true } })),
  });
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const time = async (fn) => {
  const t = performance.now();
  await fn();
  return performance.now() - t;
};
const config = ConfigSchema.parse({ clusterCIDRs: ['10.16.0.0/12'], syncPeriodMs: 3_600_000 });
const logger = pino({ level: 'warn' }, new Writable({ write: (_c, _e, done) => done() }));

function plainRestore(bin, text) {
  const r = spawnSync(bin.restore, ['-w', '5', '--noflush'], { input: text, encoding: 'utf8', maxBuffer: 1 << 28 });
  if (r.status !== 0) throw new Error(`${bin.restore}: ${r.stderr}`);
}
function ruleCount(bin) {
  return spawnSync(bin.save, ['-t', 'nat'], { encoding: 'utf8', maxBuffer: 1 << 28 }).stdout.split('\n').filter((l) => l.startsWith('-A KUBE-')).length;
}

const results = {};
for (const backend of BACKENDS) {
  const bin = defaultBinaries(backend, 'ipv4');
  if (spawnSync(bin.save, []).status !== 0) {
    console.log(`  ${backend}: not available, skipped`);
    continue;
  }
  let lastRestore = '';
  let restores = 0;
  const exec = async (file, args, opts) => {
    if (file.endsWith('-restore')) (lastRestore = opts?.input ?? ''), restores++;
    return spawnExec(file, args, opts);
  };
  const ipt = new Iptables(backend, { family: 'ipv4', exec });
  const rows = { full: [], fullRef: [], change: [], changeRef: [], changeFullRef: [], periodic: [] };
  for (let round = 0; round < ROUNDS; round++) {
    await ipt.cleanup();
    const proxier = new IptablesProxier({ config, nodeName: 'node-a', logger, clients: { iptables: { ipv4: ipt, ipv6: null }, link: NetlinkLinkClient.open() } });
    const h = proxier.handler(() => {});
    for (let i = 0; i < SERVICES; i++) {
      h.onService(`bench/svc-${i}`, service(i));
      h.onEndpointSlice(`bench/svc-${i}-1`, slice(i));
    }
    let report;
    rows.full.push(await time(async () => (report = await proxier.sync())));
    if (process.env.BENCH_DEBUG) console.log(backend, 'full', JSON.stringify(report.phases));
    const fullText = lastRestore;
    const rules = ruleCount(bin);
    if (rules < SERVICES * (2 * DESTS + 2)) throw new Error(`only ${rules} nat rules after the full sync`);

    // One endpoint of one service replaced: a partial sync.
    h.onEndpointSlice(`bench/svc-${round}-1`, slice(round, 1));
    rows.change.push(await time(async () => {
      const r = await proxier.sync();
      if (r.full || r.changedServices !== 1) throw new Error(`expected a partial sync of one service, got ${JSON.stringify(r)}`);
    }));
    const changeText = lastRestore;
    const before = restores;
    rows.periodic.push(await time(async () => {
      const r = await proxier.sync({ full: true });
      if (process.env.BENCH_DEBUG) console.log(backend, "periodic", JSON.stringify(r.phases));
      if (!r.full || restores !== before) throw new Error(`expected a full sync with no restore, got ${restores - before} restores`);
    }));
    proxier.close();

    // References, on the same kernel state: the partial text on top of the full state, and the full text from empty.
    rows.changeRef.push(await time(() => plainRestore(bin, changeText)));
    rows.changeFullRef.push(await time(() => plainRestore(bin, fullText)));
    await ipt.cleanup();
    rows.fullRef.push(await time(() => plainRestore(bin, fullText)));
    results[backend] = { rows, rules, fullBytes: fullText.length, changeBytes: changeText.length };
  }
  await ipt.cleanup();
}

const ms = (x) => `${Math.round(x).toLocaleString('en')} ms`;
const recorded = [];
console.log(`iptables mode: ${SERVICES} services x ${DESTS} endpoints, median of ${ROUNDS} rounds, kernel ${readFileSync('/proc/sys/kernel/osrelease', 'utf8').trim()}`);
for (const [backend, { rows, rules, fullBytes, changeBytes }] of Object.entries(results)) {
  const m = Object.fromEntries(Object.entries(rows).map(([k, v]) => [k, median(v)]));
  console.log(`  ${backend} (${rules} nat rules, full input ${(fullBytes / 1e6).toFixed(1)} MB, change input ${(changeBytes / 1e3).toFixed(0)} kB)`);
  console.log(`    full sync from empty: proxier ${ms(m.full).padStart(8)}   iptables-restore of its text ${ms(m.fullRef).padStart(8)}   ratio ${(m.full / m.fullRef).toFixed(2)}x`);
  console.log(`    one endpoint change:  proxier ${ms(m.change).padStart(8)}   iptables-restore of its text ${ms(m.changeRef).padStart(8)}   ratio ${(m.change / m.changeRef).toFixed(2)}x   (full-text restore ${ms(m.changeFullRef)}: ${(m.change / m.changeFullRef).toFixed(2)}x)`);
  console.log(`    periodic, no change:  proxier ${ms(m.periodic).padStart(8)}   (0 restores; full-text restore ${ms(m.changeFullRef)}: ${(m.periodic / m.changeFullRef).toFixed(2)}x)`);
  const id = (what) => `iptables.${what}.${backend}.${SERVICES}x${DESTS}`;
  const size = `${SERVICES.toLocaleString('en')} × ${DESTS} (${rules.toLocaleString('en')} nat rules)`;
  recorded.push(
    { id: id('full'), benchmark: `iptables mode, ${backend}: full sync from empty tables (host, netns)`, size, ours: ms(m.full), reference: `restore of its text ${ms(m.fullRef)}`, ratio: ratio(m.full, m.fullRef) },
    { id: id('change'), benchmark: `iptables mode, ${backend}: one endpoint replaced (host, netns)`, size, ours: ms(m.change), reference: `restore of its text ${ms(m.changeRef)}`, ratio: ratio(m.change, m.changeRef) },
    { id: id('change-full'), benchmark: `iptables mode, ${backend}: one endpoint replaced, against a full rewrite (host, netns)`, size, ours: ms(m.change), reference: `restore of the full text ${ms(m.changeFullRef)}`, ratio: ratio(m.change, m.changeFullRef) },
    { id: id('periodic'), benchmark: `iptables mode, ${backend}: periodic sync, nothing changed (host, netns)`, size, ours: `${ms(m.periodic)}, 0 restores`, reference: `restore of the full text ${ms(m.changeFullRef)}`, ratio: ratio(m.periodic, m.changeFullRef) },
  );
}
recordResults(recorded);
console.log(JSON.stringify({ bench: 'iptables', services: SERVICES, dests: DESTS, rounds: Object.fromEntries(Object.entries(results).map(([b, r]) => [b, Object.fromEntries(Object.entries(r.rows).map(([k, v]) => [k, v.map(Math.round)]))])) }));
