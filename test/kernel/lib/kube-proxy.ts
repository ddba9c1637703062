// What the differential tests against kube-proxy v1.34 in IPVS mode share
// (uml/kube-proxy-parity.test.ts, uml/kube-proxy-parity-changes.test.ts): the node and flags both
// proxies run with, kube-proxy as a child process, the kernel-state capture and its
// normalisation, the documented divergences (docs/kube-proxy-parity.md) and the comparison, and
// the cleaning of the kernel between the two runs.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { expect } from 'vitest';

import { type ControlPlane, startControlPlane } from './cluster.js';
import { CLI, type Daemon, waitFor } from './daemon.js';
import { boundAddresses, boundRoutes } from './bound.js';

/** The node both proxies run as, its addresses, and the cluster CIDRs. */
export const NODE = 'kip-node';
export const NODE_IP = '10.250.0.1';
export const NODE_IP6 = 'fd00:10:250::1';
export const CLUSTER_CIDR = '10.244.0.0/16,fd00:10:244::/56';
/** Where both proxies serve their metrics. */
const METRICS = 'http://127.0.0.1:10249/metrics';

export const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
export const shq = (script: string) => execFileSync('sh', ['-c', script], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

/** The node's dummy link with its addresses, and kubelet's hint chain (both proxies look for it). */
function nodeUp(): void {
  shq([
    'ip link add kip-node0 type dummy',
    `ip addr add ${NODE_IP}/24 dev kip-node0`,
    `ip addr add ${NODE_IP6}/64 dev kip-node0 nodad`,
    'ip link set kip-node0 up',
    'iptables-legacy -t mangle -N KUBE-IPTABLES-HINT 2>/dev/null || true',
  ].join('\n'));
}

function nodeDown(): void {
  shq('ip link del kip-node0 2>/dev/null || true');
}

/**
 * The node up, the kernel clean, and the control plane started with the Node objects (this node
 * with both addresses, node-b, node-c); `baseline` is the sysctls as they were, for putting back.
 */
export async function startCluster(): Promise<{ cp: ControlPlane; baseline: Record<string, string> }> {
  nodeUp();
  flushKernel();
  const baseline = readSysctls();
  const cp = await startControlPlane({ address: NODE_IP });
  await cp.api.createNode(NODE, { addresses: [NODE_IP, NODE_IP6] });
  await cp.api.createNode('node-b', { addresses: ['10.250.0.11'] });
  await cp.api.createNode('node-c', { addresses: ['10.250.0.12'] });
  return { cp, baseline };
}

/** Whatever either proxy left removed, the sysctls put back, the control plane stopped, the node down. */
export async function stopCluster(cp: ControlPlane | undefined, baseline: Record<string, string> | undefined): Promise<void> {
  try {
    execFileSync(process.execPath, [CLI, 'cleanup'], { stdio: 'ignore' });
  } catch {
    /* best effort */
  }
  flushKernel();
  if (baseline) writeSysctls(baseline);
  await cp?.stop();
  nodeDown();
}

/** Stops a proxy (kube-proxy: then `--cleanup`; this daemon: then its `cleanup`), cleans the kernel and puts the sysctls back. */
export async function stopProxy(p: KubeProxy | Daemon, baseline: Record<string, string>): Promise<void> {
  await p.stop();
  if (p instanceof KubeProxy) p.cleanup();
  else execFileSync(process.execPath, [CLI, 'cleanup'], { stdio: 'ignore' });
  flushKernel();
  writeSysctls(baseline);
}

/** The flags both proxies run with. */
export const COMMON_FLAGS = (cp: ControlPlane) => [
  `--kubeconfig=${cp.adminKubeconfig}`, `--hostname-override=${NODE}`, `--cluster-cidr=${CLUSTER_CIDR}`, '--ipvs-scheduler=rr',
  '--healthz-bind-address=0.0.0.0:10256', '--metrics-bind-address=127.0.0.1:10249', '--conntrack-max-per-core=0',
];

// ---------------------------------------------------------------------------------------------
// Capture and normalisation
// ---------------------------------------------------------------------------------------------

/** Sysctls kube-proxy's IPVS mode (or its conntrack setup) may set. */
const SYSCTLS = [
  'net/ipv4/vs/conntrack', 'net/ipv4/vs/conn_reuse_mode', 'net/ipv4/vs/expire_nodest_conn', 'net/ipv4/vs/expire_quiescent_template',
  'net/ipv4/ip_forward', 'net/ipv4/conf/all/route_localnet', 'net/ipv6/conf/all/forwarding',
  'net/bridge/bridge-nf-call-iptables', 'net/bridge/bridge-nf-call-ip6tables',
  'net/ipv4/conf/all/arp_ignore', 'net/ipv4/conf/all/arp_announce',
  'net/netfilter/nf_conntrack_max', 'net/netfilter/nf_conntrack_tcp_timeout_established', 'net/netfilter/nf_conntrack_tcp_timeout_close_wait',
  'net/netfilter/nf_conntrack_tcp_be_liberal', 'net/netfilter/nf_conntrack_udp_timeout', 'net/netfilter/nf_conntrack_udp_timeout_stream',
];

export function readSysctls(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of SYSCTLS) {
    try {
      out[k] = readFileSync(`/proc/sys/${k}`, 'utf8').trim();
    } catch {
      /* absent on this kernel */
    }
  }
  return out;
}

export function writeSysctls(values: Record<string, string>): void {
  for (const [k, v] of Object.entries(values)) {
    try {
      writeFileSync(`/proc/sys/${k}`, v);
    } catch {
      /* read-only or absent */
    }
  }
}

export type Section = 'ipvs' | 'ipvs-timeouts' | 'ipset' | 'addresses' | 'iptables' | 'ip6tables' | 'sysctl' | 'listeners';
export type Capture = Record<Section, string[]>;
const SECTIONS: Section[] = ['ipvs', 'ipvs-timeouts', 'ipset', 'addresses', 'iptables', 'ip6tables', 'sysctl', 'listeners'];

/** iptables-save output as `table :CHAIN policy` and `table -A CHAIN rule` lines, in order; comments and counters stripped. */
function normaliseIptables(text: string): string[] {
  const out: string[] = [];
  let table = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#') || line === 'COMMIT') continue;
    if (line.startsWith('*')) {
      table = line.slice(1);
      continue;
    }
    if (line.startsWith(':')) {
      const [chain, policy] = line.slice(1).split(/\s+/);
      out.push(`${table} :${chain} ${policy}`);
      continue;
    }
    const rule = line.replace(/\s*-m comment --comment (?:"(?:[^"\\]|\\.)*"|\S+)/g, '').replace(/\s+/g, ' ');
    out.push(`${table} ${rule}`);
  }
  return out;
}

/** Everything but the KUBE-IPTABLES-HINT chain (kubelet's, created by nodeUp for both sides). */
const notHint = (l: string) => !l.includes('KUBE-IPTABLES-HINT');

function normaliseIpset(text: string): string[] {
  const out: string[] = [];
  for (const line of text.split('\n')) {
    if (!/^(create|add) KUBE-/.test(line)) continue;
    // initval is the hash seed, random per created set on either side.
    out.push(line.trim().replace(/\s+/g, ' ').replace(/ initval 0x[0-9a-f]+/, ''));
  }
  return out.sort();
}

/** The kernel state either proxy writes, normalised for order (a few execs: each costs in UML). */
export function capture(): Capture {
  const ipvs = sh('ipvsadm', '-Sn').split('\n').filter(Boolean).sort();
  const timeouts = [sh('ipvsadm', '-L', '--timeout').trim()];
  const ipset = normaliseIpset(sh('ipset', 'save'));
  // The Service IPs bound through kube-ipvs0: kube-proxy's addresses, this daemon's local routes.
  const addrs = [...boundAddresses(), ...boundRoutes()].sort();
  const iptables = normaliseIptables(sh('iptables-legacy-save')).filter(notHint);
  const ip6tables = normaliseIptables(sh('ip6tables-legacy-save')).filter(notHint);
  const sysctl = Object.entries(readSysctls()).map(([k, v]) => `${k}=${v}`);
  // Health-check node ports and every other listener in the NodePort range (none is expected).
  const listeners = sh('ss', '-Hltn').split('\n').filter(Boolean).map((l) => l.split(/\s+/)[3]!)
    .filter((a) => Number(a.slice(a.lastIndexOf(':') + 1)) >= 30000).sort();
  return { ipvs, 'ipvs-timeouts': timeouts, ipset, addresses: addrs, iptables, ip6tables, sysctl, listeners };
}

/** Polls capture() until two in a row, `intervalMs` apart, are the same; returns the last. `onMove` hears what changed. */
export async function settled(intervalMs = 1500, timeoutMs = 60_000, onMove?: (change: string) => void): Promise<Capture> {
  let last = capture();
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await new Promise((r) => setTimeout(r, intervalMs));
    const now = capture();
    const moved = SECTIONS.filter((s) => JSON.stringify(last[s]) !== JSON.stringify(now[s]));
    if (moved.length === 0) return now;
    const change = moved.map((s) => `${s}: ${[...last[s].filter((l) => !now[s].includes(l)).map((l) => `-${l}`), ...now[s].filter((l) => !last[s].includes(l)).map((l) => `+${l}`)].join(' ')}`).join('; ');
    if (Date.now() > deadline) throw new Error(`the kernel state did not settle: ${change}`);
    onMove?.(change);
    last = now;
  }
}

/**
 * Per IP family (kube-proxy in dual-stack mode labels its series with ip_family; '' for a series
 * without), in ms since the epoch: `last`, the end of the last successful sync
 * (`kubeproxy_sync_proxy_rules_last_timestamp_seconds`), and `queued`, the last change queued for
 * a sync (`..._last_queued_timestamp_seconds`), of whichever proxy serves the metrics. Empty before
 * the metrics answer.
 */
export async function syncTimes(): Promise<Map<string, { last: number; queued: number }>> {
  const out = new Map<string, { last: number; queued: number }>();
  let text: string;
  try {
    text = await (await fetch(METRICS)).text();
  } catch {
    return out;
  }
  for (const m of text.matchAll(/^kubeproxy_sync_proxy_rules_last_(queued_)?timestamp_seconds(?:\{([^}]*)\})? (\S+)$/gm)) {
    const family = m[2]?.match(/ip_family="([^"]*)"/)?.[1] ?? '';
    const f = out.get(family) ?? { last: 0, queued: 0 };
    f[m[1] ? 'queued' : 'last'] = Number(m[3]) * 1000;
    out.set(family, f);
  }
  return out;
}

/**
 * A sync that ended after `after` (ms since the epoch) in every IP family (`every`) or in one, and
 * no change queued since the last sync of any family.
 */
export async function syncedAfter(after: number, every: boolean): Promise<boolean> {
  const f = [...(await syncTimes()).values()];
  const done = (x: { last: number }) => x.last > 0 && x.last > after;
  return f.length > 0 && (every ? f.every(done) : f.some(done)) && f.every((x) => x.queued <= x.last);
}

// ---------------------------------------------------------------------------------------------
// Cleaning the kernel between the two runs
// ---------------------------------------------------------------------------------------------

/** Removes every KUBE-* chain, set, virtual server and kube-ipvs0, whoever created them. */
export function flushKernel(): void {
  // A restore without --noflush replaces the table: every line naming KUBE-* (chains, jumps, set
  // matches) dropped, kubelet's hint chain kept.
  for (const bin of ['iptables-legacy', 'ip6tables-legacy']) {
    for (const table of ['nat', 'filter', 'mangle', 'raw']) {
      const kept = shq(`${bin}-save -t ${table} 2>/dev/null || true`).split('\n').filter((l) => !l.includes('KUBE-') || l.includes('KUBE-IPTABLES-HINT'));
      if (kept.some((l) => l.startsWith('*'))) execFileSync(`${bin}-restore`, [], { input: `${kept.join('\n')}\n`, stdio: ['pipe', 'pipe', 'pipe'] });
    }
  }
  shq('ipvsadm -C');
  for (const name of shq('ipset list -n 2>/dev/null || true').split('\n').filter((n) => n.startsWith('KUBE-'))) shq(`ipset destroy ${name}`);
  shq('ip link del kube-ipvs0 2>/dev/null || true');
}

/** Nothing of either proxy left: each run starts from the same kernel. */
export function expectClean(): void {
  const c = capture();
  const left = [...c.ipvs, ...c.ipset, ...c.addresses, ...[...c.iptables, ...c.ip6tables].filter((l) => l.includes('KUBE-'))];
  expect(left, 'left in the kernel after the cleanup').toEqual([]);
}

// ---------------------------------------------------------------------------------------------
// kube-proxy
// ---------------------------------------------------------------------------------------------

/** kube-proxy as a child process, with iptables meaning iptables-legacy and no nft (UML has no nf_tables). */
export class KubeProxy {
  private child: ChildProcess | null = null;
  private readonly path = legacyPath();
  log = '';
  constructor(private readonly bin: string) {}

  start(args: string[]): void {
    this.child = spawn(this.bin, args, { stdio: ['ignore', 'pipe', 'pipe'], env: this.env() });
    this.child.stdout!.on('data', (d) => (this.log += d));
    this.child.stderr!.on('data', (d) => (this.log += d));
  }

  /** Waits for syncedAfter(after, every): by default its first sync in every IP family. */
  async synced(after = 0, { every = true, timeoutMs = 90_000 } = {}): Promise<void> {
    await waitFor('kube-proxy to sync', async () => {
      if (this.child?.exitCode !== null) throw new Error(`kube-proxy exited: ${this.log.slice(-4000)}`);
      return syncedAfter(after, every);
    }, timeoutMs).catch(async (e: Error) => {
      throw new Error(`${e.message}; sync times ${JSON.stringify([...(await syncTimes())])}\nkube-proxy log:\n${this.log.slice(-4000)}`);
    });
  }

  async stop(): Promise<void> {
    const c = this.child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const done = new Promise((r) => c.once('exit', r));
    c.kill('SIGTERM');
    await done;
  }

  /** `kube-proxy --cleanup`, then the legacy PATH directory removed. */
  cleanup(): void {
    try {
      execFileSync(this.bin, ['--cleanup', '--proxy-mode=ipvs', '--v=0'], { stdio: ['ignore', 'pipe', 'pipe'], env: this.env() });
    } catch {
      /* --cleanup exits non-zero when a part (e.g. nftables) is unavailable; flushKernel follows */
    }
    shq(`rm -rf ${this.path}`);
  }

  private env(): NodeJS.ProcessEnv {
    return { ...process.env, PATH: `${this.path}:${process.env.PATH}` };
  }
}

/** A PATH directory where iptables is iptables-legacy and nft is absent. */
function legacyPath(): string {
  const dir = mkdtempSync('/run/kip-kp-bin-');
  for (const n of ['iptables', 'iptables-save', 'iptables-restore', 'ip6tables', 'ip6tables-save', 'ip6tables-restore']) {
    symlinkSync(sh('sh', '-c', `command -v ${n.replace(/^(ip6?tables)/, '$1-legacy')}`).trim(), join(dir, n));
  }
  writeFileSync(join(dir, 'nft'), '#!/bin/sh\necho "nft: not in this kernel" >&2\nexit 1\n', { mode: 0o755 });
  return dir;
}

// ---------------------------------------------------------------------------------------------
// The documented divergences (docs/kube-proxy-parity.md), and the comparison
// ---------------------------------------------------------------------------------------------

/** `optional`: may or may not occur (the stale check skips it). */
export type Divergence = { what: string; section: Section; only: 'ours' | 'kube-proxy'; line: RegExp; optional?: boolean };

const esc = (ip: string) => ip.replace(/[.[\]]/g, '\\$&');
/**
 * A redirect of internal clients (Pods from the cluster CIDR, the node by addrtype LOCAL; behind
 * source ranges only Pods inside them) of one eTP Local VIP port to the cluster IP. kube-proxy's
 * nat KUBE-SERVICES has no rule on a single destination and port.
 */
const REDIRECT = /^nat -A KUBE-SERVICES (-s \S+ )?-d \S+ -p \w+ -m \w+ --dport \d+ (-m addrtype --src-type LOCAL |-m set --match-set KUBE-(6-)?LOAD-BALANCER-SOURCE-CIDR? dst,dst,src )?-j (DNAT --to-destination \S+|KUBE-MARK-MASQ)$/;
const SOURCE_RANGES_OUTPUT = /^mangle (:KUBE-PROXY-FIREWALL -|:KUBE-SOURCE-RANGES-FIREWALL -|-A OUTPUT -j KUBE-PROXY-FIREWALL|-A KUBE-PROXY-FIREWALL .*-j KUBE-SOURCE-RANGES-FIREWALL|-A KUBE-SOURCE-RANGES-FIREWALL .*-j (RETURN|DROP))$/;

/**
 * Lines expected on one side only: each row of docs/kube-proxy-parity.md that shows up in a
 * capture. `localNone`: the `ip:port` of each eTP Local external or load-balancer IP port whose
 * Service has no local endpoint.
 */
export function divergences(localNone: string[]): Divergence[] {
  return [
    ...(localNone.length ? [{
      what: 'eTP Local external / load-balancer IP without a local endpoint: no cluster endpoints as real servers',
      section: 'ipvs', only: 'kube-proxy', line: new RegExp(`^-a -t (${localNone.map(esc).join('|')}) -r `),
    } as const] : []),
    { what: 'eTP Local external / load-balancer IP: internal clients DNATed to the cluster IP', section: 'iptables', only: 'ours', line: REDIRECT },
    { what: 'eTP Local external / load-balancer IP: internal clients DNATed to the cluster IP (IPv6)', section: 'ip6tables', only: 'ours', line: REDIRECT },
    { what: 'source ranges also enforced for node-originated connections, in mangle OUTPUT', section: 'iptables', only: 'ours', line: SOURCE_RANGES_OUTPUT },
    { what: 'source ranges also enforced for node-originated connections, in mangle OUTPUT (IPv6)', section: 'ip6tables', only: 'ours', line: SOURCE_RANGES_OUTPUT },
  ];
}

/**
 * Normalising rules applied before the comparison, each a documented divergence too:
 * health-check node ports listen per IP family here (`0.0.0.0:P` and `[::]:P`), where
 * kube-proxy has one dual-stack socket (`*:P`); the pair counts as `*:P`.
 */
function normaliseListeners(lines: string[]): string[] {
  const ports = (prefix: string) => new Set(lines.filter((l) => l.startsWith(prefix)).map((l) => l.slice(prefix.length)));
  const v4 = ports('0.0.0.0:');
  const v6 = ports('[::]:');
  const both = [...v4].filter((p) => v6.has(p));
  return [...lines.filter((l) => !both.some((p) => l === `0.0.0.0:${p}` || l === `[::]:${p}`)), ...both.map((p) => `*:${p}`)].sort();
}

/** Lines on one side only that no divergence explains, and the divergences that explained some. */
export function compare(kp: Capture, ours: Capture, rows: Divergence[]): { unexplained: string[]; used: Set<Divergence> } {
  const unexplained: string[] = [];
  const used = new Set<Divergence>();
  for (const s of SECTIONS) {
    const a = kp[s];
    const b = s === 'listeners' ? normaliseListeners(ours[s]) : ours[s];
    const sides: Array<['ours' | 'kube-proxy', string[], Set<string>]> = [['kube-proxy', a, new Set(b)], ['ours', b, new Set(a)]];
    for (const [side, lines, other] of sides) {
      for (const l of lines) {
        if (other.has(l)) continue;
        const d = rows.find((x) => x.section === s && x.only === side && x.line.test(l));
        if (d) used.add(d);
        else unexplained.push(`${s}: only ${side}: ${l}`);
      }
    }
  }
  if (kp.listeners.some((l) => l.startsWith('*:')) && !ours.listeners.some((l) => l.startsWith('[::]:'))) {
    unexplained.push('listeners: no per-family health-check listener here (normaliseListeners is stale)');
  }
  return { unexplained, used };
}

/** Rules of an iptables section by `table chain`, in order. */
function chains(lines: string[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const l of lines) {
    const m = l.match(/^(\S+) -A (\S+) /);
    if (!m) continue;
    const key = `${m[1]} ${m[2]}`;
    out.set(key, [...(out.get(key) ?? []), l]);
  }
  return out;
}

/** Chains where the rules both sides write are not in the same order, each with both orders. */
export function orderDifferences(kp: Capture, ours: Capture): string[] {
  const out: string[] = [];
  for (const s of ['iptables', 'ip6tables'] as const) {
    const b = chains(ours[s]);
    for (const [chain, rules] of chains(kp[s])) {
      const theirs = b.get(chain) ?? [];
      const common = new Set(rules.filter((r) => theirs.includes(r)));
      const x = rules.filter((r) => common.has(r));
      const y = theirs.filter((r) => common.has(r));
      if (JSON.stringify(x) !== JSON.stringify(y)) out.push(`${s} ${chain}:\n kube-proxy: ${x.join('\n   ')}\n here: ${y.join('\n   ')}`);
    }
  }
  return out;
}
