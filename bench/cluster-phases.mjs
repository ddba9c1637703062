// The phases of the cluster-scale benchmark (bench/cluster.mjs), each against a running daemon
// (the built dist/bin/cli.js) and the real kernel, inside UML.
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

import { Daemon, forks, startSpawner, percentile, sizeOf, systemCpu, verificationOps, workOf } from './daemon-probe.mjs';
import { churnIp, makeService, makeSlice, replaceEndpoint, vip } from './objects.mjs';
import { reloadIpvs, restoreText, sh, time } from './uml-kernel.mjs';

/** The daemons' state directory (its default: the benchmark does not move it). */
const STATE_DIR = '/run/kube-ipvs-proxy';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc');
/**
 * A full garbage collection of this process, and half a second for its concurrent sweeping. Run
 * before each timed spawn: UML has one CPU, and this process's collector (hundreds of MiB at
 * 10,000: the fake API server's objects, the manifests' YAML text) otherwise runs in the daemon's
 * time. Measured at 10,000: this process took 1.74 s of CPU between a daemon's spawn and its first
 * list request (the request came 3.46 s after the spawn, where a node process that only sends it
 * took 1.16 s); 0.12 s with a collection first. The reference (`ipvsadm-restore`) runs while this
 * process waits in spawnSync.
 */
export async function collect() {
  gc();
  await sleep(500);
}

/** Waits for the fake API server's first list request; throws after 60 s or if the process exits first. */
async function firstList(api, what, exited, { anyRequest = false } = {}) {
  const ac = new AbortController();
  const kind = anyRequest ? 'request' : 'list request';
  const failed = Promise.race([
    exited.then((r) => `${what}: exited before its first ${kind} (${JSON.stringify(r)})`),
    sleep(60_000, null, { signal: ac.signal }).then(() => `${what}: no ${kind} after 60 s`, () => null),
  ]);
  const error = await Promise.race([(anyRequest ? api.requested : api.listed).then(() => null), failed]);
  ac.abort();
  if (error) throw new Error(error);
}

/**
 * Who had the CPU since `from` (UML has one): the daemon (its CPU and page faults), this process
 * (polls, the fake API server), other processes and the kernel, nobody (idle).
 */
function cpuShares(daemon, from) {
  const used = process.cpuUsage(from.bench);
  const sys = systemCpu();
  const d = daemon.stat();
  const bench = (used.user + used.system) / 1000;
  return { cpuMs: d.cpuMs, faults: d.faults, benchCpuMs: bench, otherMs: Math.max(0, sys.busy - from.sys.busy - d.cpuMs - bench), idleMs: sys.idle - from.sys.idle };
}

const extraCleanups = [];

/** Adds a cleanup cleanKernel runs too (a peer proxy's own, e.g. `kube-proxy --cleanup`). */
export function addCleanup(fn) {
  extraCleanups.push(fn);
}

/**
 * The cluster's objects (n Services × `endpoints`) and what the kernel should hold; `pick` draws a
 * service at random. The cold start's poll runs every 100 ms: a poll costs this process 2 ms of CPU
 * in an idle UML and ~5 ms beside a daemon's cold start (UML has one CPU), so every 50 ms it took
 * 1.5 s of a 10,000 cold start.
 */
export function makeCluster(n, endpoints) {
  const services = Array.from({ length: n }, (_, i) => makeService(i));
  const slices = Array.from({ length: n }, (_, i) => makeSlice(i, endpoints));
  const current = slices.map((sl) => sl.endpoints.map((e) => e.addresses[0]));
  return {
    n, endpoints, services, slices, current, nextIp: 1, nextSlot: 0, pollMs: 100,
    addresses: (i) => current[i],
    pick: () => Math.floor(Math.random() * n),
    restore: () => restoreText(current.map((addrs, i) => ({ address: vip(i), port: 80, destinations: addrs.map((address) => ({ address, port: 8080 })) }))),
  };
}

/** Removes everything the daemon, a peer and ipvsadm-restore made: cleanups, then a fresh ip_vs module. */
export function cleanKernel() {
  execFileSync(process.execPath, ['dist/bin/cli.js', 'cleanup'], { stdio: 'ignore' });
  for (const fn of extraCleanups) fn();
  reloadIpvs();
}

/** `ipvsadm-restore` of the reference table into an empty kernel, in ms. */
export async function restoreMs(text) {
  cleanKernel();
  await collect();
  return time(() => sh('ipvsadm-restore', [], text));
}

/** Services sampled by the cold-start poll: first, last and evenly spread. */
function samples(n) {
  const k = Math.min(n, 16);
  return [...new Set(Array.from({ length: k }, (_, j) => Math.round((j * (n - 1)) / (k - 1 || 1))))];
}

/**
 * Spawns the daemon over an empty kernel and polls until every VS/RS is there: every `pollMs`
 * the real servers of 16 sampled services (first, last, evenly spread), the first one not yet
 * complete alone, then the others once it is (one dump per poll while the table fills: the polls
 * take little of the CPU the daemon needs); once all are complete, a full dump (1 + N) right after
 * must find every VS and RS. The time is when the samples were complete; if the dump finds the
 * table incomplete, polling goes on over all samples and the time is the end of the first full
 * dump that finds it complete.
 */
export async function coldStart({ args, log, probe, cluster, api, peer = null }) {
  cleanKernel();
  await probe.reopen();
  api?.resetStats();
  await collect();
  const daemon = await Daemon.start(args, log, peer);
  const from = { bench: process.cpuUsage(), sys: systemCpu() };
  const all = samples(cluster.n).map((i) => [vip(i), cluster.addresses(i)]);
  let pending = all;
  let confirms = 0;
  let beforeList = null;
  let polls = 0;
  for (;;) {
    daemon.alive();
    // Against the API server nothing can be programmed before the first list request: the poll
    // (netlink dumps from this process) starts then, so it does not slow the start-up it times.
    if (api && !beforeList) {
      await firstList(api, 'cold start: the daemon', daemon.exited);
      beforeList = cpuShares(daemon, from);
    }
    polls++;
    if (await probe.has(pending.slice(0, 1))) pending = await probe.incomplete(pending.slice(1));
    if (!pending.length) {
      const t = performance.now();
      const own = { ...cpuShares(daemon, from), polls };
      const c = await probe.count();
      confirms++;
      if (c.vs >= cluster.n && c.rs >= cluster.n * cluster.endpoints) {
        const end = performance.now();
        return { daemon, ms: daemon.elapsed(confirms === 1 ? t : end), checkMs: end - t, confirms, own, beforeList, firstListMs: api?.stats.firstListAt ? daemon.elapsed(api.stats.firstListAt) : null };
      }
      pending = all;
    }
    if (daemon.elapsed() > 900_000) throw new Error('cold start: the kernel table was not complete after 15 min');
    await sleep(cluster.pollMs);
  }
}

/**
 * The reference for the daemon's first list request: spawn of a node process that only sends one
 * list request (with the same token) → the server has it, in ms. Node's own start-up is most of it.
 * `ms`: spawned by the spawner, as the daemon is; `direct`: the same process spawned by this one
 * (`spawnMs`: its spawn() call, the fork of this process), which shows what the spawner leaves out.
 */
export async function requestOnlyMs(api, url, token) {
  const code = `require('node:http').get(${JSON.stringify(`${url}/api/v1/nodes?limit=1`)}, { headers: { authorization: ${JSON.stringify(`Bearer ${token}`)} } }, (r) => r.resume())`;
  const once = async (start) => {
    api.resetStats();
    await collect();
    const child = await start();
    await firstList(api, 'request-only reference', child.exited);
    await child.exited;
    return { ms: api.stats.firstListAt - child.startedAt, spawnMs: child.spawnMs };
  };
  const { ms } = await once(() => startSpawner().start(process.execPath, ['-e', code]));
  const direct = await once(async () => {
    const startedAt = performance.now();
    const child = spawn(process.execPath, ['-e', code], { stdio: 'ignore' });
    const spawnMs = performance.now() - startedAt;
    return { startedAt, spawnMs, exited: new Promise((res) => child.once('exit', (c, signal) => res({ code: c, signal }))) };
  });
  return { ms, direct };
}

/** Writes one endpoint change and returns {i, ip, at}: service i's endpoint slot now has address ip. */
function change(cluster, api, i) {
  const ip = churnIp(cluster.nextIp++);
  const j = cluster.nextSlot++ % cluster.endpoints;
  cluster.slices[i] = replaceEndpoint(cluster.slices[i], i, j, ip);
  cluster.current[i][j] = ip;
  const at = performance.now();
  api.put('endpointslices', cluster.slices[i]);
  return { i, ip, at, wall: Date.now() };
}

/** `count` single changes `gapMs` apart: event written to the watch -> new real server in the kernel (ms). */
export async function oneChange({ daemon, probe, cluster, api, count, gapMs, timeoutMs = 60_000 }) {
  const lat = [];
  for (let k = 0; k < count; k++) {
    await sleep(gapMs);
    const c = change(cluster, api, cluster.pick());
    for (;;) {
      daemon.alive();
      if ((await probe.destinations(vip(c.i))).has(c.ip)) break;
      if (performance.now() - c.at > timeoutMs) throw new Error(`one change: ${vip(c.i)} never got ${c.ip}`);
      await sleep(2);
    }
    lat.push({ ms: performance.now() - c.at, wall: c.wall });
  }
  const ms = lat.map((x) => x.ms);
  // Every change with its wall-clock write time, to find each in the daemon's log.
  return { p50: percentile(ms, 50), p99: percentile(ms, 99), max: Math.max(...ms), n: ms.length, all: lat.map((w) => ({ ms: Math.round(w.ms), at: new Date(w.wall).toISOString() })) };
}

/**
 * The floor under oneChange, in the same boot: the same changes against bench/change-floor.mjs (a
 * node process that watches the slices and, per event, adds the slice's endpoints in one netlink
 * batch; no tracker, plan or min interval), over the table ipvsadm-restore left in the kernel.
 */
export async function oneChangeFloor({ probe, cluster, api, url, token, count, gapMs }) {
  await probe.reopen(); // ip_vs was reloaded before the restore
  const child = spawn(process.execPath, ['bench/change-floor.mjs', url, token, String(api.rv)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise((res) => child.once('exit', (code, signal) => res({ code, signal })));
  let gone = null;
  exited.then((r) => (gone = r));
  const ready = new Promise((res) => child.stdout.on('data', (d) => String(d).includes('ready') && res()));
  await Promise.race([ready, exited.then((r) => Promise.reject(new Error(`change floor exited before watching: ${JSON.stringify(r)}`)))]);
  const process_ = { alive: () => { if (gone) throw new Error(`change floor exited: ${JSON.stringify(gone)}`); } };
  try {
    return await oneChange({ daemon: process_, probe, cluster, api, count, gapMs });
  } finally {
    child.kill();
    await exited;
  }
}

/**
 * Changes at `rate`/s for `seconds` (each to a service with no change in flight); a checker reads
 * the oldest 32 outstanding services every 10 ms, in one trip (at once again when all 32 had landed).
 * Latency: write -> seen in the kernel. `cpuMs`: the daemon's CPU (its own and its exited children's)
 * from the first change until the last was in the kernel.
 */
export async function churn({ daemon, probe, cluster, api, rate, seconds, drainMs = 120_000 }) {
  const cpu = (st = daemon.stat()) => st.cpuMs + st.childMs;
  const cpu0 = cpu();
  const outstanding = [];
  const busy = new Set();
  const seen = []; // every change: its latency and wall-clock write time (the slowest are returned, to find them in the daemon's log)
  const t0 = performance.now();
  let issued = 0;
  let writing = true;
  const writer = (async () => {
    while (performance.now() - t0 < seconds * 1000) {
      const due = Math.floor(((performance.now() - t0) / 1000) * rate);
      // Every service with a change in flight (a proxy far behind): the rest waits, the rate drops.
      for (; issued < due && busy.size < cluster.n; issued++) {
        let i = cluster.pick();
        while (busy.has(i)) i = cluster.pick();
        busy.add(i);
        outstanding.push(change(cluster, api, i));
      }
      await sleep(5);
    }
    writing = false;
  })();
  const deadline = t0 + seconds * 1000 + drainMs;
  while (writing || outstanding.length) {
    daemon.alive();
    if (performance.now() > deadline) throw new Error(`churn: ${outstanding.length} changes not in the kernel ${drainMs / 1000} s after the last`);
    let landed = 0;
    const batch = outstanding.slice(0, 32);
    // One trip for the 32 (the probe shares UML's one CPU with the daemon: keep its own load low).
    const reads = await probe.destinationsMany(batch.map((c) => vip(c.i)));
    const at = performance.now();
    for (const [k, c] of batch.entries()) {
      if (!reads[k].has(c.ip)) continue;
      seen.push({ ms: at - c.at, wall: c.wall });
      outstanding.splice(outstanding.indexOf(c), 1);
      busy.delete(c.i);
      landed++;
    }
    if (landed < batch.length || !batch.length) await sleep(10); // all 32 landed: read the next ones at once
  }
  await writer;
  const cpuMs = cpu() - cpu0;
  const lat = seen.map((x) => x.ms);
  seen.sort((a, b) => b.ms - a.ms);
  return { p50: percentile(lat, 50), p99: percentile(lat, 99), max: Math.max(...lat), n: lat.length, rate: issued / seconds, cpuMs, worst: seen.slice(0, 10).map((w) => ({ ms: Math.round(w.ms), at: new Date(w.wall).toISOString() })) };
}

/**
 * Stops the daemon, makes one change while it is down, starts it again over the programmed
 * kernel: first request (a resumed daemon's is a watch, it lists nothing), first useful write
 * (that change in the kernel), ready (first successful sync), kernel writes made by then. Polled
 * as the cold start is (from the first request, every `pollMs`, one dump), so both are timed
 * under the same load; /metrics is read only once the change is in (a scrape costs the daemon
 * CPU). `resume: false` removes the stopped daemon's resume record first (source/resume.ts):
 * the restart then lists, as after a record too old to use.
 */
export async function restart({ daemon, args, log, probe, cluster, api, resume = true, peer = null }) {
  const stopped = await daemon.stop();
  if (!resume) rmSync(`${STATE_DIR}/source-resume.jsonl`, { force: true });
  const c = change(cluster, api, cluster.pick());
  api.resetStats();
  const logFrom = sizeOf(log);
  await collect();
  const next = await Daemon.start(args, log, peer);
  const from = { bench: process.cpuUsage(), sys: systemCpu() };
  await firstList(api, 'restart: the daemon', next.exited, { anyRequest: true });
  const beforeList = cpuShares(next, from);
  let usefulMs = null;
  let polls = 0;
  while (usefulMs === null) {
    next.alive();
    polls++;
    if ((await probe.destinations(vip(c.i))).has(c.ip)) usefulMs = next.elapsed();
    else if (next.elapsed() > 900_000) throw new Error('restart: the change was not in the kernel after 15 min');
    else await sleep(cluster.pollMs);
  }
  const own = { ...cpuShares(next, from), polls };
  const ready = await next.ready();
  const firstListMs = api.stats.firstListAt ? next.elapsed(api.stats.firstListAt) : null;
  const firstRequestMs = next.elapsed(api.stats.firstRequestAt);
  return { daemon: next, stopped, usefulMs, readyMs: ready.ms, firstListMs, firstRequestMs, lists: api.stats.lists, beforeList, own, kernelOps: workOf(ready.metrics).kernelOps, verifyOps: verificationOps(log, logFrom) };
}

/**
 * No changes for `periods` sync periods, after a period with a sync and no kernel write (at most
 * 6 periods to settle; `settled` = periods that still wrote, e.g. drained real servers): per period, kernel writes
 * (the daemon's kernel-op counters), processes+threads created (system-wide /proc/stat while the
 * bench only reads /metrics), syncs and their time (the sync duration histogram), the daemon's CPU
 * (its own and its exited children's); `execLog`: a file with one line per program a wrapper on the
 * peer's PATH ran (`name args`): `execs` counts them by name and first argument.
 */
export async function periodic({ daemon, periodMs, periods, log, execLog = null }) {
  const cpu = (st = daemon.stat()) => st.cpuMs + st.childMs;
  const snap = async () => workOf(await daemon.metrics());
  // Settle: until a whole period made no kernel write (draining real servers of earlier phases end).
  let settled = 0;
  for (let a = await snap(), k = 0; k < 6; k++) {
    await sleep(periodMs);
    const b = await snap();
    if (b.kernelOps === a.kernelOps && b.syncs > a.syncs) break;
    settled++;
    a = b;
  }
  const w0 = await snap();
  const f0 = forks();
  const c0 = cpu();
  const logFrom = sizeOf(log);
  const execFrom = execLog ? sizeOf(execLog) : 0;
  await sleep(periods * periodMs);
  const w1 = await snap();
  const f1 = forks();
  const c1 = cpu();
  const syncs = w1.syncs - w0.syncs;
  const execs = {};
  if (execLog) {
    for (const line of readFileSync(execLog).subarray(execFrom).toString().split('\n').filter(Boolean)) {
      const key = line.split(' ').slice(0, 2).join(' ');
      execs[key] = (execs[key] ?? 0) + 1 / periods;
    }
  }
  return {
    periods, settled, syncs, full: w1.fullSyncs - w0.fullSyncs, cpuMs: (c1 - c0) / periods, execs,
    kernelOps: (w1.kernelOps - w0.kernelOps) / periods, verifyOps: verificationOps(log, logFrom) / periods, forks: (f1 - f0) / periods,
    syncMs: syncs > 0 ? ((w1.syncSeconds - w0.syncSeconds) / syncs) * 1000 : 0,
  };
}

/**
 * RSS (from /proc) and heap used (from /metrics) of the running daemon, MiB; and the longest
 * event-loop delay since the last scrape (a phase's, when the phase began with one).
 */
export async function memory(daemon) {
  const w = workOf(await daemon.metrics());
  return { rss: daemon.rssMiB(), heap: w.heapMiB, heapTotal: w.heapTotalMiB, external: w.externalMiB, loopMaxMs: w.loopMaxMs };
}
