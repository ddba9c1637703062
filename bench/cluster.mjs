// Cluster-scale benchmark, run inside UML by `npm run bench -- cluster [--sizes 1000,3000] [--quick]`.
// The built daemon (dist/bin/cli.js, normal flags) against a fake API server in the same boot
// (bench/fake-apiserver.mjs) serving realistic objects (bench/objects.mjs), over the real kernel:
//   cold start (spawn -> every VS/RS in the kernel) vs ipvsadm-restore of the same table
//   (interleaved pairs, ip_vs reloaded before each), one-change latency, churn, restarts over a
//   programmed kernel (resumed from the stopped daemon's record, then one without it), a no-change
//   periodic sync, RSS/heap after each phase, and the cold start
//   with --manifests (the same objects as YAML in a tmpfs directory).
// --peer kube-proxy: the same phases with kube-proxy v1.34 beside this daemon (bench/cluster-peer.mjs).
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { stringify } from 'yaml';

import { churn, cleanKernel, coldStart, makeCluster, memory, oneChange, oneChangeFloor, periodic, requestOnlyMs, restart, restoreMs } from './cluster-phases.mjs';
import { benchCgroup, KernelProbe, startSpawner } from './daemon-probe.mjs';
import { FakeApiServer } from './fake-apiserver.mjs';
import { CLUSTER_CIDR, NODE_NAME, makeNode } from './objects.mjs';
import { runPeer } from './cluster-peer.mjs';
import { clusterRows, peerRows } from './cluster-results.mjs';
import { recordResults } from './results.mjs';
import { median, requireUml, sh } from './uml-kernel.mjs';

requireUml('bench/cluster.mjs');
const { values: opt } = parseArgs({
  options: {
    sizes: { type: 'string', default: '1000,3000' },
    endpoints: { type: 'string', default: '10' },
    rounds: { type: 'string' },
    quick: { type: 'boolean', default: false },
    'manifests-size': { type: 'string', default: '3000' },
    'soak-minutes': { type: 'string', default: '0' },
    peer: { type: 'string' },
    // --peer: how long kube-proxy's first sync may take before its other phases are skipped.
    'first-sync-minutes': { type: 'string', default: '30' },
  },
});
if (opt.peer !== undefined && opt.peer !== 'kube-proxy') throw new Error(`--peer ${opt.peer}: the only peer is kube-proxy`);
const SIZES = opt.sizes.split(',').map(Number).filter((n) => n > 0);
const EP = Number(opt.endpoints);
const ROUNDS = Number(opt.rounds ?? (opt.quick ? 1 : 3));
const ONE = opt.quick ? { count: 8, gapMs: 1300 } : { count: 20, gapMs: 1500 };
const CHURN = { rate: 50, seconds: opt.quick ? 10 : 20 };
const PERIOD_MS = 10_000;
const MANIFESTS_N = Number(opt['manifests-size']);
/** Minutes of churn (50 changes/s) after the churn phase of the first size: RSS sampled each minute (leak check). */
const SOAK_MIN = Number(opt['soak-minutes']);
/** RSS is read this long after the first sync (the daemon returns the start-up garbage right after it). */
const SETTLE_MS = 3000;
const DIR = '/dev/shm/kip-cluster-bench'; // tmpfs inside UML
// KIP_BENCH_LOG: the daemons' log file (e.g. on the host's /tmp, which UML sees); KIP_BENCH_V: their --v (2: debug).
const LOG = process.env.KIP_BENCH_LOG ?? `${DIR}/daemon.log`;
const TOKEN = 'bench-token-0123456789';
const started = Date.now();
/** Progress on stderr (the phase about to run). */
const step = (what) => process.stderr.write(`  [${((Date.now() - started) / 1000).toFixed(0)} s] ${what}\n`);

const MiB = (x) => `${x.toFixed(0)} MiB`;
const s = (ms) => `${(ms / 1000).toFixed(2)} s`;
const msf = (ms) => `${ms.toFixed(0)} ms`;
const mem = (m) => `RSS ${MiB(m.rss)}, heap ${MiB(m.heap)}`;
const commonArgs = [...(process.env.KIP_BENCH_V ? ['--v', process.env.KIP_BENCH_V] : []), '--hostname-override', NODE_NAME, '--cluster-cidr', CLUSTER_CIDR, '--proxy-mode', 'ipvs'];

/** Who had UML's one CPU: the daemon (CPU, page faults), this process, other processes and the kernel, nobody. */
const shares = (o) => `daemon CPU ${s(o.cpuMs)} and ${(o.faults / 1000).toFixed(1)}k page faults, this process's CPU ${s(o.benchCpuMs)}, others ${s(o.otherMs)}, idle ${s(o.idleMs)}`;
/** Per cold start: the CPU shares until the first list request (API) and until the samples were complete. */
const ownLine = (rows) => rows.own.map((o, k) => `    round ${k + 1}, spawn() ${msf(rows.spawn[k])}, CPU from spawn ${rows.beforeList[k] ? `to the first list request: ${shares(rows.beforeList[k])}; ` : ''}until the samples were complete: ${shares(o)} (${o.polls} polls)${rows.confirms[k] > 1 ? ' (the first full dump found the table incomplete)' : ''}`).join('\n');

/** Cold start vs ipvsadm-restore, interleaved; `floor` runs after the last round's restore; the last daemon is left running. */
async function pairs(cluster, args, probe, api, requestOnly = null, floor = null) {
  const rows = { restore: [], cold: [], ratio: [], firstList: [], requestOnly: [], direct: [], check: [], confirms: [], own: [], beforeList: [], spawn: [] };
  let last;
  for (let r = 0; r < ROUNDS; r++) {
    step(`round ${r + 1}: ipvsadm-restore`);
    rows.restore.push(await restoreMs(cluster.restore()));
    if (requestOnly) {
      const ref = await requestOnly();
      rows.requestOnly.push(ref.ms);
      rows.direct.push(ref.direct);
    }
    if (floor && r === ROUNDS - 1) {
      step('one change, floor: a node process that adds the endpoints of each slice event');
      rows.floor = await floor();
    }
    step(`round ${r + 1}: daemon cold start`);
    last = await coldStart({ args, log: LOG, probe, cluster, api });
    rows.cold.push(last.ms);
    rows.check.push(last.checkMs);
    rows.confirms.push(last.confirms);
    rows.own.push(last.own);
    rows.beforeList.push(last.beforeList);
    rows.spawn.push(last.daemon.spawnMs);
    rows.ratio.push(last.ms / rows.restore.at(-1));
    if (last.firstListMs !== null) rows.firstList.push(last.firstListMs);
    if (r < ROUNDS - 1) await last.daemon.stop();
  }
  const ready = await last.daemon.ready();
  const cold = median(rows.cold);
  const restore = median(rows.restore);
  return { daemon: last.daemon, rows, floor: rows.floor ?? null, cold, restore, ratio: median(rows.ratio), readyMs: ready.ms, firstList: rows.firstList.length ? median(rows.firstList) : null, requestOnly: rows.requestOnly.length ? median(rows.requestOnly) : null, direct: rows.direct.length ? { ms: median(rows.direct.map((d) => d.ms)), spawnMs: median(rows.direct.map((d) => d.spawnMs)) } : null };
}

async function runSize(n, probe) {
  const cluster = makeCluster(n, EP);
  // A window of 20,000 events (~7 min at 50 changes/s): an older resume is a 410 and a relist, and a long soak
  // does not hold every event it ever wrote.
  const api = new FakeApiServer({ token: TOKEN, eventWindow: 20_000 });
  for (let i = 0; i < n; i++) {
    api.put('services', cluster.services[i]);
    api.put('endpointslices', cluster.slices[i]);
  }
  api.put('nodes', makeNode());
  api.compact();
  const bytes = [...api.store.services.values(), ...api.store.endpointslices.values()].reduce((a, e) => a + e.bytes.length, 0);
  const url = await api.start();
  const kubeconfig = `${DIR}/kubeconfig`;
  api.writeKubeconfig(kubeconfig, url);
  const args = ['--kubeconfig', kubeconfig, ...commonArgs];
  console.log(`\n== ${n} Services x ${EP} endpoints (${(bytes / n / 1024).toFixed(2)} kB of JSON per Service+EndpointSlice, ${(bytes / 2 ** 20).toFixed(1)} MiB), ${ROUNDS} round(s)`);

  const floor = () => oneChangeFloor({ probe, cluster, api, url, token: TOKEN, ...ONE });
  const p = await pairs(cluster, args, probe, api, () => requestOnlyMs(api, url, TOKEN), floor);
  const r = { n, cold: p.cold, restore: p.restore, ratio: p.ratio, firstList: p.firstList, requestOnly: p.requestOnly, requestOnlyDirect: p.direct, readyMs: p.readyMs, oneFloor: p.floor };
  r.memCold = await settledMemory(p.daemon);
  console.log(`  cold start: ${s(p.cold)} vs ipvsadm-restore ${s(p.restore)}  ratio ${p.ratio.toFixed(2)}  (median of ${ROUNDS}; pairs ${p.rows.cold.map((c, k) => `${s(c)}/${s(p.rows.restore[k])}`).join(', ')}; first list request ${p.firstList === null ? '-' : s(p.firstList)}${p.requestOnly === null ? '' : ` (a node process that only sends it: ${s(p.requestOnly)}; spawned by this process instead of the spawner: ${s(p.direct.ms)}, its spawn() ${msf(p.direct.spawnMs)})`}; confirming dump ${msf(median(p.rows.check))}, dumps ${p.rows.confirms.join(',')}; last daemon's first sync done ${s(p.readyMs)})`);
  console.log(ownLine(p.rows));
  console.log(`    after cold start: ${mem(r.memCold)}`);

  step('one change');
  await memory(p.daemon); // the scrape restarts the daemon's event-loop delay maximum
  r.one = await oneChange({ daemon: p.daemon, probe, cluster, api, ...ONE });
  r.memOne = await memory(p.daemon);
  console.log(`  one change: p50 ${msf(r.one.p50)}  p99 ${msf(r.one.p99)}  (${r.one.n} changes ${ONE.gapMs} ms apart; floor, the same changes to a node process that adds each slice's endpoints in one batch: p50 ${msf(r.oneFloor.p50)}  p99 ${msf(r.oneFloor.p99)}); longest event-loop stall ${msf(r.memOne.loopMaxMs)}; ${mem(r.memOne)}`);

  step('churn');
  r.churn = await churn({ daemon: p.daemon, probe, cluster, api, ...CHURN });
  r.memChurn = await memory(p.daemon);
  console.log(`  churn ${r.churn.rate.toFixed(0)} changes/s for ${CHURN.seconds} s: p50 ${msf(r.churn.p50)}  p99 ${msf(r.churn.p99)}  max ${msf(r.churn.max)} (${r.churn.n} changes); longest event-loop stall ${msf(r.memChurn.loopMaxMs)}; ${mem(r.memChurn)}`);

  if (SOAK_MIN > 0 && n === SIZES[0]) {
    r.soak = await soak(p.daemon, probe, cluster, api);
    const last = r.soak.rss.at(-1);
    console.log(`  soak: ${SOAK_MIN} min of churn at 50 changes/s: RSS after cold start ${MiB(r.memCold.rss)}, per minute ${r.soak.rss.map(MiB).join(' ')}; last ${MiB(last)} (${(((last - r.memCold.rss) / r.memCold.rss) * 100).toFixed(1)}% over the cold start), max ${MiB(Math.max(...r.soak.rss))}; heap last ${MiB(r.soak.heap.at(-1))}; 45 s after the last change RSS ${MiB(r.soak.idle.rss)} (${(((r.soak.idle.rss - r.memCold.rss) / r.memCold.rss) * 100).toFixed(1)}% over the cold start), heap ${MiB(r.soak.idle.heap)}; event->kernel p99 per minute max ${msf(Math.max(...r.soak.p99))}, median ${msf(median(r.soak.p99))}`);
    // RSS outside V8's heap (native: glibc, the addon's buffers, code, stacks): growing minute by minute would be a native leak.
    const outside = (m) => `${MiB(m.rss - m.heapTotal - m.external)}`;
    console.log(`    outside V8's heap and external memory: after cold start ${outside(r.memCold)}, per minute ${r.soak.rss.map((rss, k) => outside({ rss, heapTotal: r.soak.heapTotal[k], external: r.soak.external[k] })).join(' ')}, 45 s after the last change ${outside(r.soak.idle)}; V8 heap committed per minute ${r.soak.heapTotal.map(MiB).join(' ')}`);
  }

  const restartArgs = [...args, '--ipvs-sync-period', `${PERIOD_MS / 1000}s`];
  step('restart');
  // ROUNDS restarts, each with one change while down, resuming from the stopped daemon's record;
  // then one without the record (it lists, as after a record too old to use). Compared with this
  // size's cold starts (median).
  const restarts = [];
  let listing = null;
  for (let k = 0, prev = p.daemon; k <= ROUNDS; k++) {
    const resume = k < ROUNDS;
    const x = await restart({ daemon: prev, args: restartArgs, log: LOG, probe, cluster, api, resume });
    if (resume) restarts.push(x);
    else listing = x;
    prev = x.daemon;
    const memX = await memory(x.daemon);
    const how = x.lists === 0 ? 'resumed, no list' : `listed${resume ? ' (the record was not used)' : ' (no resume record)'}`;
    console.log(`  restart ${k + 1} over the programmed kernel (1 change while down; ${how}): first request ${s(x.firstRequestMs)}, change in the kernel ${s(x.usefulMs)}, first sync done ${s(x.readyMs)}, kernel writes ${x.kernelOps} (+ ${x.verifyOps} logged by verifications); ${mem(memX)}`);
    console.log(`    SIGTERM -> exit of the previous daemon: ${s(x.stopped.ms)}${x.stopped.killed ? ' (did not exit in 30 s: SIGKILL)' : ''}`);
    console.log(`    CPU from spawn to the first request: ${shares(x.beforeList)}; until the change was in the kernel: ${shares(x.own)} (${x.own.polls} polls)`);
    r.memRestart = memX;
  }
  r.restart = { ...restarts.at(-1), usefulMs: median(restarts.map((x) => x.usefulMs)), readyMs: median(restarts.map((x) => x.readyMs)), listing };
  console.log(`  restarts: change in the kernel ${restarts.map((x) => s(x.usefulMs)).join(', ')} (median ${s(r.restart.usefulMs)}; without the resume record ${s(listing.usefulMs)}) against cold starts ${p.rows.cold.map(s).join(', ')} (median ${s(p.cold)})`);

  step('periodic sync');
  r.periodic = await periodic({ daemon: listing.daemon, periodMs: PERIOD_MS, periods: 2, log: LOG });
  r.memPeriodic = await memory(listing.daemon);
  console.log(`  no changes for ${r.periodic.periods} periods (--ipvs-sync-period ${PERIOD_MS / 1000}s, after ${r.periodic.settled} period(s) still writing): ${r.periodic.syncs} syncs (${r.periodic.full} full), ${s(r.periodic.syncMs)} each; per period ${r.periodic.kernelOps.toFixed(0)} kernel writes (+ ${r.periodic.verifyOps.toFixed(0)} logged by verifications), ${r.periodic.forks.toFixed(1)} processes+threads created (system-wide); ${mem(r.memPeriodic)}`);
  console.log(`  api server: ${JSON.stringify({ ...api.stats, listParams: [...api.stats.listParams], watchParams: [...api.stats.watchParams] })}`);

  r.stop = await listing.daemon.stop();
  console.log(`  SIGTERM -> exit: ${s(r.stop.ms)}${r.stop.killed ? ' (did not exit in 30 s: SIGKILL)' : ''}`);
  await api.close();
  return r;
}

/** RSS and heap SETTLE_MS after the first sync. */
async function settledMemory(daemon) {
  await sleep(SETTLE_MS);
  return memory(daemon);
}

/** Churn minute after minute; RSS, heap and the minute's p99 after each. */
async function soak(daemon, probe, cluster, api) {
  const out = { rss: [], heap: [], heapTotal: [], external: [], p99: [] };
  for (let m = 1; m <= SOAK_MIN; m++) {
    step(`soak minute ${m}/${SOAK_MIN}`);
    const c = await churn({ daemon, probe, cluster, api, ...CHURN, seconds: 60 });
    const mem = await memory(daemon);
    out.rss.push(mem.rss);
    out.heap.push(mem.heap);
    out.heapTotal.push(mem.heapTotal);
    out.external.push(mem.external);
    out.p99.push(c.p99);
  }
  // Then no changes: the daemon's next sync period (30 s by default) and its verification pass.
  step('soak: 45 s without changes');
  await sleep(45_000);
  out.idle = await memory(daemon);
  return out;
}

/** The same cold start with --manifests: the objects as YAML files (one per namespace) in tmpfs. */
async function runManifests(n, probe) {
  const cluster = makeCluster(n, EP);
  const dir = `${DIR}/manifests`;
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const byNs = new Map();
  for (let i = 0; i < n; i++) {
    const ns = cluster.services[i].metadata.namespace;
    if (!byNs.has(ns)) byNs.set(ns, []);
    byNs.get(ns).push(cluster.services[i], cluster.slices[i]);
  }
  let bytes = 0;
  for (const [ns, docs] of byNs) {
    const text = docs.map((d) => stringify(d, { lineWidth: 0 })).join('---\n');
    bytes += text.length;
    writeFileSync(`${dir}/${ns}.yaml`, text);
  }
  writeFileSync(`${dir}/node.yaml`, stringify(makeNode()));
  console.log(`\n== --manifests: ${n} Services x ${EP} endpoints as ${byNs.size} YAML files (${(bytes / 2 ** 20).toFixed(1)} MiB) in tmpfs, ${ROUNDS} round(s)`);
  // Only the addresses are read from here on: the objects go (a smaller heap for this process's collector).
  byNs.clear();
  cluster.services = cluster.slices = null;
  const p = await pairs(cluster, ['--manifests', dir, ...commonArgs], probe, null);
  const memCold = await settledMemory(p.daemon);
  console.log(`  cold start: ${s(p.cold)} vs ipvsadm-restore ${s(p.restore)}  ratio ${p.ratio.toFixed(2)}  (median of ${ROUNDS}; pairs ${p.rows.cold.map((c, k) => `${s(c)}/${s(p.rows.restore[k])}`).join(', ')}; confirming dump ${msf(median(p.rows.check))}, dumps ${p.rows.confirms.join(',')}; last daemon's first sync done ${s(p.readyMs)})`);
  console.log(ownLine(p.rows));
  console.log(`    after cold start: ${mem(memCold)}`);
  await p.daemon.stop();
  rmSync(dir, { recursive: true, force: true });
  return { n, cold: p.cold, restore: p.restore, ratio: p.ratio, memCold };
}

rmSync(DIR, { recursive: true, force: true });
mkdirSync(DIR, { recursive: true });
sh('sh', ['-c', 'iptables-legacy -t mangle -N KUBE-IPTABLES-HINT 2>/dev/null || true']);
const modprobe = readFileSync('/proc/sys/kernel/modprobe', 'utf8').trim();
const cgroup = benchCgroup();
startSpawner(); // forked while this process holds no cluster (see bench/spawner.mjs)
console.log(`cluster-scale benchmark: kernel ${sh('uname', ['-r']).trim()}, node ${process.version}, commit ${process.env.KIP_BENCH_COMMIT ?? 'unknown'}, sizes ${SIZES.join(',')}, manifests ${MANIFESTS_N || 'off'}${opt.quick ? ', quick' : ''}, module autoload ${modprobe === '/sbin/modprobe' ? 'off (every module request fails)' : `on (${modprobe})`}, daemon in a cgroup with memory.max ${cgroup ? `${cgroup.limit / 2 ** 20} MiB (${cgroup.label})` : 'none'}`);
const probe = await KernelProbe.open();
const results = [];
let manifests = null;
const peer = opt.peer ? [] : null;
try {
  // Peer rows are written as figures come in (kube-proxy takes long at 10,000): a stopped run keeps them.
  const record = opt.quick ? null : (r) => recordResults(peerRows({ results: [r], endpoints: EP }));
  if (opt.peer) await runPeer({ out: peer, record, sizes: SIZES, endpoints: EP, rounds: ROUNDS, quick: opt.quick, probe, dir: DIR, log: LOG, ourArgs: commonArgs, token: TOKEN, periodMs: PERIOD_MS, firstSyncMs: Number(opt['first-sync-minutes']) * 60_000, step });
  else {
    for (const n of SIZES) results.push(await runSize(n, probe));
    if (MANIFESTS_N > 0) manifests = await runManifests(MANIFESTS_N, probe);
  }
} catch (e) {
  console.log(`FAILED: ${e.stack ?? e}`);
  process.exitCode = 1;
} finally {
  probe.close();
  cleanKernel();
}

if (results.length) console.log(`\n| N × ${EP} | cold start vs ipvsadm-restore | ratio | first list (request-only node process) | RSS / heap after cold start | one change p50 / p99 (floor p50) | churn 50/s p50 / p99 (longest event-loop stall) | RSS after churn | restart (resumed): change in kernel / ready / writes; listing: change in kernel | no-change period: sync time / writes / processes |`);
if (results.length) console.log('|---|---|---|---|---|---|---|---|---|---|');
for (const r of results) {
  console.log(`| ${r.n.toLocaleString('en')} | ${s(r.cold)} vs ${s(r.restore)} | ${r.ratio.toFixed(2)} | ${r.firstList === null ? '-' : s(r.firstList)}${r.requestOnly === null ? '' : ` (${s(r.requestOnly)})`} | ${MiB(r.memCold.rss)} / ${MiB(r.memCold.heap)} | ${msf(r.one.p50)} / ${msf(r.one.p99)} (${msf(r.oneFloor.p50)}) | ${msf(r.churn.p50)} / ${msf(r.churn.p99)} (${msf(r.memChurn.loopMaxMs)}) | ${MiB(r.memChurn.rss)} | ${s(r.restart.usefulMs)} / ${s(r.restart.readyMs)} / ${r.restart.kernelOps}+${r.restart.verifyOps}; ${s(r.restart.listing.usefulMs)} | ${s(r.periodic.syncMs)} / ${r.periodic.kernelOps.toFixed(0)}+${r.periodic.verifyOps.toFixed(0)} / ${r.periodic.forks.toFixed(1)} |`);
}
if (manifests) console.log(`| ${manifests.n.toLocaleString('en')} --manifests | ${s(manifests.cold)} vs ${s(manifests.restore)} | ${manifests.ratio.toFixed(2)} | | ${MiB(manifests.memCold.rss)} / ${MiB(manifests.memCold.heap)} | | | | | |`);
console.log(`runtime ${((Date.now() - started) / 60_000).toFixed(1)} min`);
// --quick runs are shorter phases and one round: not what the results table reports.
if (opt.quick) console.log('  results: not written (--quick)');
else if (!peer) recordResults(clusterRows({ results, manifests, endpoints: EP, soakMinutes: SOAK_MIN, memoryLimit: cgroup && { mib: cgroup.limit / 2 ** 20, label: cgroup.label } }));
console.log(JSON.stringify({ bench: 'cluster', results, manifests, peer }));
// After a failure a daemon may still run (and hold this process open through the spawner).
if (process.exitCode) process.exit();
