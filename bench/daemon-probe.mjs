// Helpers of the cluster-scale benchmark (inside UML): run the built daemon (dist/bin/cli.js) as
// a child process (of bench/spawner.mjs), read its /metrics and /proc status, and look at the
// kernel's IPVS table through the addon's netlink client (one service's real servers per dump:
// cheap to poll).
import { fork } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse } from 'yaml';

import { NetlinkIpvsClient } from '../dist/src/kernel/ipvs/client.js';
import { sh } from './uml-kernel.mjs';

/** Where the daemon serves /metrics and /healthz inside UML. */
export const METRICS = '127.0.0.1:10249';
export const HEALTHZ = '127.0.0.1:10256';

/**
 * The environment and node flags the daemon ships with: those of dist/bin/cli.js's shebang
 * (`#!/usr/bin/env -S NAME=value node --flag`; the image has the same); KIP_BENCH_NODE_FLAGS
 * (space-separated) replaces the flags, for trying other V8 flags, and KIP_BENCH_ENV
 * (`NAME=value ...`) the environment's assignments.
 */
export function shipped(cli = 'dist/bin/cli.js') {
  const m = /^#!\/usr\/bin\/env(?: -S)?((?: \w+=\S*)*) node((?: \S+)*)\n/.exec(readFileSync(cli, 'utf8'));
  if (!m) throw new Error(`${cli}: no "#!/usr/bin/env node" line`);
  const assignments = process.env.KIP_BENCH_ENV !== undefined ? process.env.KIP_BENCH_ENV : m[1];
  const env = Object.fromEntries(assignments.split(' ').filter(Boolean).map((a) => [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)]));
  const flags = process.env.KIP_BENCH_NODE_FLAGS !== undefined ? process.env.KIP_BENCH_NODE_FLAGS : m[2];
  return { env, flags: flags.split(' ').filter(Boolean) };
}

/** The chart's container memory limit (`resources.limits.memory` in values.yaml, `<n>Mi` or `<n>Gi`), in bytes. */
export function chartMemoryLimit() {
  const values = parse(readFileSync(new URL('../charts/kube-ipvs-proxy/values.yaml', import.meta.url), 'utf8'));
  const m = /^(\d+)(Mi|Gi)$/.exec(values?.resources?.limits?.memory ?? '');
  if (!m) throw new Error('charts/kube-ipvs-proxy/values.yaml: resources.limits.memory is not <n>Mi or <n>Gi');
  return Number(m[1]) * 2 ** (m[2] === 'Gi' ? 30 : 20);
}

/** The daemon's memory limit: KIP_BENCH_MEMORY_LIMIT (`<n>Mi`, `<n>Gi`, the value a user sets instead), else the chart's. */
export function memoryLimit() {
  const v = process.env.KIP_BENCH_MEMORY_LIMIT;
  if (!v) return { bytes: chartMemoryLimit(), label: "the chart's limit" };
  const m = /^(\d+)(Mi|Gi)$/.exec(v);
  if (!m) throw new Error(`KIP_BENCH_MEMORY_LIMIT=${v}: not <n>Mi or <n>Gi`);
  return { bytes: Number(m[1]) * 2 ** (m[2] === 'Gi' ? 30 : 20), label: `KIP_BENCH_MEMORY_LIMIT, not the chart's` };
}

const CGROUP_ROOT = '/sys/fs/cgroup';
let daemonCgroup;

/**
 * Inside UML, a cgroup v2 group whose memory.max is the chart's limit, which the daemon is started
 * in: V8 sizes its heap from that limit (1 MiB semi-spaces at 512Mi), as in the DaemonSet's pod.
 * Null outside UML (the host's cgroups are never touched) or with KIP_BENCH_CGROUP=off (for A/B runs).
 */
export function benchCgroup() {
  if (process.env.KIP_IN_UML !== '1' || process.env.KIP_BENCH_CGROUP === 'off') return null;
  if (daemonCgroup) return daemonCgroup;
  if (!existsSync(`${CGROUP_ROOT}/cgroup.controllers`)) sh('mount', ['-t', 'cgroup2', 'none', CGROUP_ROOT]);
  writeFileSync(`${CGROUP_ROOT}/cgroup.subtree_control`, '+memory');
  const dir = `${CGROUP_ROOT}/kip-daemon`;
  mkdirSync(dir, { recursive: true });
  const { bytes: limit, label } = memoryLimit();
  writeFileSync(`${dir}/memory.max`, String(limit));
  return (daemonCgroup = { dir, limit, label });
}

/** performance.now() of a process.hrtime.bigint() reading: both read the monotonic clock, across processes too. */
const HRTIME_TO_NOW = performance.now() - Number(process.hrtime.bigint()) / 1e6;

let spawner = null;

/**
 * The spawner (bench/spawner.mjs), forked on the first call: call it before the benchmark holds a
 * cluster (the fork copies this process's page tables). `start(file, args, { env, log, cgroup })`
 * resolves once the child has exec'd: { pid, startedAt (performance.now() just before the
 * spawner's spawn()), spawnMs (that spawn() call), exited (resolves to { code, signal }) }.
 */
export function startSpawner() {
  if (spawner) return spawner;
  const proc = fork(new URL('./spawner.mjs', import.meta.url), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const waiting = new Map();
  let next = 0;
  // The channel holds this process open only while a child runs (or is being started).
  const hold = () => (waiting.size ? proc.channel.ref() : proc.channel.unref());
  proc.unref();
  hold();
  proc.on('exit', (code, signal) => {
    for (const w of waiting.values()) w.fail(new Error(`bench/spawner.mjs exited (${code ?? signal})`));
    waiting.clear();
  });
  proc.on('message', (m) => {
    const w = waiting.get(m.id);
    if (!w) return;
    if (m.exit) {
      waiting.delete(m.id);
      w.exit(m.exit);
    } else if (m.error) {
      waiting.delete(m.id);
      w.fail(new Error(`spawn ${w.file}: ${m.error}`));
    } else w.started({ pid: m.pid, startedAt: Number(BigInt(m.at)) / 1e6 + HRTIME_TO_NOW, spawnMs: m.spawnMs, exited: w.exited });
    hold();
  });
  spawner = {
    start(file, args, { env = process.env, log = null, cgroup = null } = {}) {
      const id = next++;
      return new Promise((started, fail) => {
        let exit;
        const exited = new Promise((res) => (exit = res));
        waiting.set(id, { file, started, fail, exit, exited });
        hold();
        proc.send({ id, file, args, env, log, cgroup, root: CGROUP_ROOT });
      });
    },
  };
  return spawner;
}

/**
 * The built daemon, started with `args` (its normal flags) by the spawner; output appended to `logFile`.
 * With `peer` ({ file, env }: another proxy, e.g. kube-proxy) that program is started with `args`
 * instead, outside the daemon's cgroup; it must serve the same /metrics address.
 */
export class Daemon {
  /** Starts it; resolves once it has exec'd. */
  static async start(args, logFile, peer = null) {
    if (peer) return new Daemon(await startSpawner().start(peer.file, args, { env: { ...process.env, ...peer.env }, log: logFile }), logFile);
    // KIP_BENCH_CLI: another build's cli.js (e.g. a worktree of the base commit), for same-boot A/B runs.
    const cli = process.env.KIP_BENCH_CLI ?? 'dist/bin/cli.js';
    const { env, flags } = shipped(cli);
    const child = await startSpawner().start(process.execPath, [...flags, cli, ...args, '--metrics-bind-address', METRICS, '--healthz-bind-address', HEALTHZ], {
      env: { ...process.env, ...env },
      log: logFile,
      cgroup: benchCgroup()?.dir ?? null,
    });
    return new Daemon(child, logFile);
  }

  constructor({ pid, startedAt, spawnMs, exited }, logFile) {
    this.logFile = logFile;
    this.pid = pid;
    this.startedAt = startedAt;
    this.spawnMs = spawnMs;
    this.exited = exited;
    this.exitedEarly = null;
    this.exited.then((r) => (this.exitedEarly = r));
  }

  /** Sends `signal` unless it has exited. */
  kill(signal) {
    if (this.exitedEarly) return;
    try {
      process.kill(this.pid, signal);
    } catch (e) {
      if (e.code !== 'ESRCH') throw e;
    }
  }

  /** Milliseconds since spawn. */
  elapsed(at = performance.now()) {
    return at - this.startedAt;
  }

  /** Throws (with the log's tail) if the daemon has exited. */
  alive() {
    if (this.exitedEarly) throw new Error(`daemon exited (${JSON.stringify(this.exitedEarly)}); log tail:\n${readFileSync(this.logFile, 'utf8').split('\n').slice(-15).join('\n')}`);
  }

  /** VmRSS in MiB, from /proc/<pid>/status. */
  rssMiB() {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${this.pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  }

  /**
   * From /proc/<pid>/stat: minor page faults and CPU time (user + system, ms at 100 ticks/s);
   * `childMs`: that of its exited and waited-for children (iptables-restore, ipset, ...).
   */
  stat() {
    const f = readFileSync(`/proc/${this.pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return { faults: Number(f[7]), cpuMs: (Number(f[11]) + Number(f[12])) * 10, childMs: (Number(f[13]) + Number(f[14])) * 10 };
  }

  /** /metrics parsed: `name{labels}` -> value (null while the server is not up). */
  async metrics() {
    this.alive();
    try {
      const text = await (await fetch(`http://${METRICS}/metrics`)).text();
      const out = new Map();
      for (const line of text.split('\n')) {
        const m = /^([a-zA-Z_:][\w:]*(?:\{[^}]*\})?)\s+(\S+)$/.exec(line);
        if (m) out.set(m[1], Number(m[2]));
      }
      return out;
    } catch {
      return null;
    }
  }

  /** Resolves once the first successful sync is recorded (ms since spawn); polls /metrics every `everyMs`. */
  async ready(everyMs = 200, timeoutMs = 600_000) {
    for (const end = performance.now() + timeoutMs; performance.now() < end; await sleep(everyMs)) {
      const m = await this.metrics();
      // kube-proxy has one series per IP family (an ip_family label): every one set.
      const last = [...(m ?? [])].filter(([k]) => /^kubeproxy_sync_proxy_rules_last_timestamp_seconds(\{|$)/.test(k)).map(([, v]) => v);
      if (last.length && last.every((v) => v > 0)) return { ms: this.elapsed(), metrics: m };
    }
    throw new Error('daemon: no successful sync within the timeout');
  }

  /** SIGTERM, then SIGKILL after 30 s; resolves when it has exited: {ms, killed}. */
  async stop() {
    const t0 = performance.now();
    let killed = false;
    this.kill('SIGTERM');
    const t = setTimeout(() => ((killed = true), this.kill('SIGKILL')), 30_000);
    await this.exited;
    clearTimeout(t);
    return { ms: performance.now() - t0, killed };
  }

  /** What JSON.stringify shows of a daemon. */
  toJSON() {
    return { pid: this.pid };
  }
}

/** Sum of the samples of a metric (every label set). */
export function sum(metrics, name) {
  let total = 0;
  for (const [k, v] of metrics ?? []) if (k === name || k.startsWith(`${name}{`)) total += v;
  return total;
}

/** What a metrics snapshot says about work done: kernel ops, syncs, heap. */
export function workOf(m) {
  return {
    kernelOps: sum(m, 'kube_ipvs_proxy_kernel_ops_total'),
    syncs: sum(m, 'kubeproxy_sync_proxy_rules_duration_seconds_count'),
    syncSeconds: sum(m, 'kubeproxy_sync_proxy_rules_duration_seconds_sum'),
    fullSyncs: sum(m, 'kubeproxy_sync_full_proxy_rules_duration_seconds_count'),
    heapMiB: sum(m, 'nodejs_heap_size_used_bytes') / 2 ** 20,
    heapTotalMiB: sum(m, 'nodejs_heap_size_total_bytes') / 2 ** 20,
    externalMiB: sum(m, 'nodejs_external_memory_bytes') / 2 ** 20,
    /** The longest event-loop delay since the previous scrape (prom-client resets it on each). */
    loopMaxMs: sum(m, 'nodejs_eventloop_lag_max_seconds') * 1000,
  };
}

/**
 * Kernel ops the daemon logged for its periodic verifications (`verified ... ops=N`, text or JSON
 * log) from byte `from` of its log on; they are not in kube_ipvs_proxy_kernel_ops_total.
 */
export function verificationOps(logFile, from = 0) {
  let text;
  try {
    text = readFileSync(logFile).subarray(from).toString();
  } catch {
    return 0;
  }
  let n = 0;
  for (const m of text.matchAll(/^.*\bverified\b.*$/gm)) n += Number(/\bops"?[=:](\d+)/.exec(m[0])?.[1] ?? 0);
  return n;
}

/** Bytes in a file (0 if missing). */
export function sizeOf(file) {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}

/** CPU time of the whole system since boot (/proc/stat, ms at 100 ticks/s): idle and busy. */
export function systemCpu() {
  const f = /^cpu +(.*)$/m.exec(readFileSync('/proc/stat', 'utf8'))[1].split(' ').map(Number);
  const idle = (f[3] + f[4]) * 10;
  return { idle, busy: f.slice(0, 8).reduce((a, b) => a + b, 0) * 10 - idle };
}

/** Processes and threads created in the whole system since boot (/proc/stat `processes`). */
export function forks() {
  return Number(/^processes (\d+)$/m.exec(readFileSync('/proc/stat', 'utf8'))[1]);
}

/** Reads the kernel's IPVS table for the benchmark's services (TCP port 80). */
export class KernelProbe {
  static async open() {
    const a = await NetlinkIpvsClient.open();
    if (!a.available) throw new Error(`IPVS: ${a.reason}`);
    return new KernelProbe(a.client);
  }

  constructor(client) {
    this.client = client;
  }

  /** A new socket: needed after ip_vs is reloaded (the generic netlink family gets a new id). */
  async reopen() {
    this.close();
    const a = await NetlinkIpvsClient.open();
    if (!a.available) throw new Error(`IPVS: ${a.reason}`);
    this.client = a.client;
  }

  /** The real servers' addresses of virtual server `address`:80/TCP (empty if it is not there). */
  async destinations(address) {
    return (await this.destinationsMany([address]))[0];
  }

  /** The same for several virtual servers, in one trip to the addon. */
  async destinationsMany(addresses) {
    try {
      const all = await this.client.listDestinationsMany(addresses.map((address) => ({ family: 'ipv4', protocol: 'tcp', address, port: 80, fwmark: null })));
      return all.map((ds) => new Set(ds.map((d) => d.address)));
    } catch (e) {
      if (e.code === 'ENOENT' || e.code === 'ESRCH') return addresses.map(() => new Set()); // no such virtual server (yet)
      throw e;
    }
  }

  /** The `[vip, [addresses]]` that lack some of their real servers (one trip). */
  async incomplete(expected) {
    const got = await this.destinationsMany(expected.map(([address]) => address));
    return expected.filter(([, want], k) => !want.every((a) => got[k].has(a)));
  }

  /** Whether every `[vip, [addresses]]` has all of its real servers. */
  async has(expected) {
    return (await this.incomplete(expected)).length === 0;
  }

  /** Virtual and real servers of the whole table (1 + N dumps). */
  async count() {
    const all = await this.client.dumpAll();
    return { vs: all.length, rs: all.reduce((n, s) => n + s.destinations.length, 0) };
  }

  close() {
    this.client.close?.();
  }
}

/** p-th percentile (0..100) of a list of numbers (nearest rank). */
export function percentile(xs, p) {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}
