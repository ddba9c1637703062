// A differential test against the real kube-proxy v1.34 in IPVS mode: one control plane (etcd,
// kube-apiserver, kube-controller-manager's EndpointSlice controller), one set of Services and
// Pods, then kube-proxy and this daemon in turn on the same kernel with the same flags. Each
// one's kernel state (IPVS, ipsets, kube-ipvs0's addresses, iptables, sysctls, health-check
// listeners) is captured, normalised and compared section by section. Every difference must be
// one of DIVERGENCES (each documented in docs/kube-proxy-parity.md), and each of those must
// still occur, so an undocumented difference or a stale entry fails the test.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ensureTools } from '../../tools/build.mjs';
import { ControlPlane, service, startControlPlane } from '../lib/cluster.js';
import { CLI, Daemon, waitFor } from '../lib/daemon.js';
import { assertIsolated } from '../lib/guard.js';

assertIsolated();

const NODE = 'kip-node';
const NODE_IP = '10.250.0.1';
const NODE_IP6 = 'fd00:10:250::1';
const NS = 'parity';
const CLUSTER_CIDR = '10.244.0.0/16,fd00:10:244::/56';
/** Load-balancer ingress IPs the Services get. */
const LB = { plain: '10.250.0.200', ranges: '10.250.0.201', local: '10.250.0.202', localNone: '10.250.0.203', proxy: '10.250.0.204', mixed: '10.250.0.205', noNp: '10.250.0.206', rangesLocal: '10.250.0.207', aff: '10.250.0.208', dsLocal: '10.250.0.209', v6: 'fd00:10:250::200', dsLocal6: 'fd00:10:250::209' };

const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const shq = (script: string) => execFileSync('sh', ['-c', script], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

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

function readSysctls(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of SYSCTLS) {
    try {
      out[k] = shq(`cat /proc/sys/${k}`).trim();
    } catch {
      /* absent on this kernel */
    }
  }
  return out;
}

function writeSysctls(values: Record<string, string>): void {
  for (const [k, v] of Object.entries(values)) shq(`echo ${v} > /proc/sys/${k} 2>/dev/null || true`);
}

type Capture = Record<Section, string[]>;
type Section = 'ipvs' | 'ipvs-timeouts' | 'ipset' | 'addresses' | 'iptables' | 'ip6tables' | 'sysctl' | 'listeners';
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

/** Everything but the KUBE-IPTABLES-HINT chain (kubelet's, created by this file for both sides). */
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

function capture(): Capture {
  const ipvs = sh('ipvsadm', '-Sn').split('\n').filter(Boolean).sort();
  const timeouts = [sh('ipvsadm', '-L', '--timeout').trim()];
  const ipset = normaliseIpset(shq('ipset save 2>/dev/null || true'));
  const addrs = shq('ip -o addr show dev kube-ipvs0 2>/dev/null || true').split('\n').filter(Boolean)
    .map((l) => l.split(/\s+/).slice(2, 4).join(' ')).sort();
  const iptables = normaliseIptables(sh('iptables-legacy-save')).filter(notHint);
  const ip6tables = normaliseIptables(sh('ip6tables-legacy-save')).filter(notHint);
  const sysctl = Object.entries(readSysctls()).map(([k, v]) => `${k}=${v}`);
  // Health-check node ports and every other listener in the NodePort range (none is expected).
  const listeners = shq('ss -Hltn').split('\n').filter(Boolean).map((l) => l.split(/\s+/)[3]!)
    .filter((a) => Number(a.slice(a.lastIndexOf(':') + 1)) >= 30000).sort();
  return { ipvs, 'ipvs-timeouts': timeouts, ipset, addresses: addrs, iptables, ip6tables, sysctl, listeners };
}

/** Polls capture() until two in a row, `intervalMs` apart, are the same; returns the last. */
async function settled(intervalMs = 1500, timeoutMs = 60_000): Promise<Capture> {
  let last = JSON.stringify(capture());
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await new Promise((r) => setTimeout(r, intervalMs));
    const now = capture();
    const text = JSON.stringify(now);
    if (text === last) return now;
    if (Date.now() > deadline) throw new Error('the kernel state did not settle');
    last = text;
  }
}

// ---------------------------------------------------------------------------------------------
// Cleaning the kernel between the two runs
// ---------------------------------------------------------------------------------------------

/** Removes every KUBE-* chain, set, virtual server and kube-ipvs0, whoever created them. */
function flushKernel(): void {
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
function expectClean(): void {
  const c = capture();
  const left = [...c.ipvs, ...c.ipset, ...c.addresses, ...[...c.iptables, ...c.ip6tables].filter((l) => l.includes('KUBE-'))];
  expect(left, 'left in the kernel after the cleanup').toEqual([]);
}

// ---------------------------------------------------------------------------------------------
// The two proxies
// ---------------------------------------------------------------------------------------------

/** A PATH directory where iptables is iptables-legacy and nft is absent (UML has no nf_tables). */
function legacyPath(): string {
  const dir = mkdtempSync('/run/kip-kp-bin-');
  for (const n of ['iptables', 'iptables-save', 'iptables-restore', 'ip6tables', 'ip6tables-save', 'ip6tables-restore']) {
    symlinkSync(sh('sh', '-c', `command -v ${n.replace(/^(ip6?tables)/, '$1-legacy')}`).trim(), join(dir, n));
  }
  writeFileSync(join(dir, 'nft'), '#!/bin/sh\necho "nft: not in this kernel" >&2\nexit 1\n', { mode: 0o755 });
  return dir;
}

const COMMON_FLAGS = (cp: ControlPlane) => [
  `--kubeconfig=${cp.adminKubeconfig}`, `--hostname-override=${NODE}`, `--cluster-cidr=${CLUSTER_CIDR}`, '--ipvs-scheduler=rr',
  '--healthz-bind-address=0.0.0.0:10256', '--metrics-bind-address=127.0.0.1:10249', '--conntrack-max-per-core=0',
];

class KubeProxy {
  private child: ChildProcess | null = null;
  log = '';
  metrics = '';
  constructor(private readonly bin: string, private readonly path: string) {}

  start(args: string[]): void {
    this.child = spawn(this.bin, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PATH: `${this.path}:${process.env.PATH}` } });
    this.child.stdout!.on('data', (d) => (this.log += d));
    this.child.stderr!.on('data', (d) => (this.log += d));
  }

  /** Waits for kube-proxy's first completed sync (its last-sync timestamp metric set). */
  async synced(): Promise<void> {
    await waitFor('kube-proxy to sync', async () => {
      if (this.child?.exitCode !== null) throw new Error(`kube-proxy exited: ${this.log.slice(-4000)}`);
      try {
        const text = await (await fetch('http://127.0.0.1:10249/metrics')).text();
        // One series per IP family in dual-stack mode (an ip_family label): every one set.
        const series = [...text.matchAll(/^kubeproxy_sync_proxy_rules_last_timestamp_seconds(?:\{[^}]*\})? (\S+)$/gm)];
        this.metrics = text;
        return series.length > 0 && series.every((m) => Number(m[1]) > 0);
      } catch {
        return false;
      }
    }, 90_000).catch((e: Error) => {
      throw new Error(`${e.message}; metrics:\n${this.metrics.split('\n').filter((l) => l.startsWith('kubeproxy_sync')).join('\n')}\nkube-proxy log:\n${this.log.slice(-4000)}`);
    });
  }

  async stop(): Promise<void> {
    const c = this.child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const done = new Promise((r) => c.once('exit', r));
    c.kill('SIGTERM');
    await done;
  }

  cleanup(): void {
    try {
      execFileSync(this.bin, ['--cleanup', '--proxy-mode=ipvs', '--v=0'], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PATH: `${this.path}:${process.env.PATH}` } });
    } catch {
      /* --cleanup exits non-zero when a part (e.g. nftables) is unavailable; flushKernel follows */
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The documented divergences (docs/kube-proxy-parity.md), and the comparison
// ---------------------------------------------------------------------------------------------

/** `optional`: may or may not occur (the stale check skips it). */
type Divergence = { what: string; section: Section; only: 'ours' | 'kube-proxy'; line: RegExp; optional?: boolean };

const esc = (ip: string) => ip.replace(/[.[\]]/g, '\\$&');
/**
 * A redirect of internal clients (Pods from the cluster CIDR, the node by addrtype LOCAL; behind
 * source ranges only Pods inside them) of one eTP Local VIP port to the cluster IP. kube-proxy's
 * nat KUBE-SERVICES has no rule on a single destination and port.
 */
const REDIRECT = /^nat -A KUBE-SERVICES (-s \S+ )?-d \S+ -p \w+ -m \w+ --dport \d+ (-m addrtype --src-type LOCAL |-m set --match-set KUBE-(6-)?LOAD-BALANCER-SOURCE-CIDR? dst,dst,src )?-j (DNAT --to-destination \S+|KUBE-MARK-MASQ)$/;

/** Lines expected on one side only. Each row of docs/kube-proxy-parity.md that shows up in a capture. */
const DIVERGENCES: Divergence[] = [
  {
    what: 'eTP Local external / load-balancer IP without a local endpoint: no cluster endpoints as real servers',
    section: 'ipvs', only: 'kube-proxy',
    line: new RegExp(`^-a -t ${esc(LB.localNone)}:80 -r `),
  },
  {
    what: 'eTP Local external / load-balancer IP: internal clients DNATed to the cluster IP',
    section: 'iptables', only: 'ours', line: REDIRECT,
  },
  {
    what: 'eTP Local external / load-balancer IP: internal clients DNATed to the cluster IP (IPv6)',
    section: 'ip6tables', only: 'ours', line: REDIRECT,
  },
  {
    what: 'source ranges also enforced for node-originated connections, in mangle OUTPUT',
    section: 'iptables', only: 'ours',
    line: /^mangle (:KUBE-PROXY-FIREWALL -|:KUBE-SOURCE-RANGES-FIREWALL -|-A OUTPUT -j KUBE-PROXY-FIREWALL|-A KUBE-PROXY-FIREWALL .*-j KUBE-SOURCE-RANGES-FIREWALL|-A KUBE-SOURCE-RANGES-FIREWALL .*-j (RETURN|DROP))$/,
  },
  {
    what: 'source ranges also enforced for node-originated connections, in mangle OUTPUT (IPv6)',
    section: 'ip6tables', only: 'ours',
    line: /^mangle (:KUBE-PROXY-FIREWALL -|:KUBE-SOURCE-RANGES-FIREWALL -|-A OUTPUT -j KUBE-PROXY-FIREWALL|-A KUBE-PROXY-FIREWALL .*-j KUBE-SOURCE-RANGES-FIREWALL|-A KUBE-SOURCE-RANGES-FIREWALL .*-j (RETURN|DROP))$/,
  },
];

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

/** Lines on one side only that no divergence explains, and divergences that explain nothing. */
function compare(kp: Capture, ours: Capture): { unexplained: string[]; unused: string[] } {
  const unexplained: string[] = [];
  const used = new Set<Divergence>();
  for (const s of SECTIONS) {
    const a = kp[s];
    const b = s === 'listeners' ? normaliseListeners(ours[s]) : ours[s];
    const sides: Array<['ours' | 'kube-proxy', string[], Set<string>]> = [['kube-proxy', a, new Set(b)], ['ours', b, new Set(a)]];
    for (const [side, lines, other] of sides) {
      for (const l of lines) {
        if (other.has(l)) continue;
        const d = DIVERGENCES.find((x) => x.section === s && x.only === side && x.line.test(l));
        if (d) used.add(d);
        else unexplained.push(`${s}: only ${side}: ${l}`);
      }
    }
  }
  if (!ours.listeners.some((l) => l.startsWith('[::]:'))) unexplained.push('listeners: no per-family health-check listener here (normaliseListeners is stale)');
  return { unexplained, unused: DIVERGENCES.filter((d) => !d.optional && !used.has(d)).map((d) => d.what) };
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

// ---------------------------------------------------------------------------------------------
// The cluster: Pods and Services
// ---------------------------------------------------------------------------------------------

type PodSpec = { name: string; node: string; ips: string[]; app: string; ports?: object[]; ready?: boolean; terminating?: boolean };
const WEB_PORTS = [
  { name: 'http', containerPort: 8080 }, { name: 'metrics', containerPort: 9090 },
  { name: 'dns', containerPort: 5353, protocol: 'UDP' }, { name: 'sctp', containerPort: 7777, protocol: 'SCTP' },
];
const PODS: PodSpec[] = [
  { name: 'web-a', node: NODE, ips: ['10.244.1.10', 'fd00:10:244:1::10'], app: 'web', ports: WEB_PORTS },
  { name: 'web-b', node: 'node-b', ips: ['10.244.2.10', 'fd00:10:244:2::10'], app: 'web', ports: WEB_PORTS },
  { name: 'web-c', node: 'node-c', ips: ['10.244.3.10', 'fd00:10:244:3::10'], app: 'web', ports: WEB_PORTS },
  { name: 'remote-b', node: 'node-b', ips: ['10.244.2.20'], app: 'remote' },
  { name: 'remote-c', node: 'node-c', ips: ['10.244.3.20'], app: 'remote' },
  { name: 'term-a', node: NODE, ips: ['10.244.1.30'], app: 'term' },
  { name: 'term-a2', node: NODE, ips: ['10.244.1.31'], app: 'term', terminating: true },
  { name: 'term-b', node: 'node-b', ips: ['10.244.2.30'], app: 'term', terminating: true },
  { name: 'allterm-a', node: NODE, ips: ['10.244.1.40'], app: 'allterm', terminating: true },
  { name: 'allterm-b', node: 'node-b', ips: ['10.244.2.40'], app: 'allterm', terminating: true },
  { name: 'nr-a', node: NODE, ips: ['10.244.1.50'], app: 'nr', ready: false },
  { name: 'nr-b', node: 'node-b', ips: ['10.244.2.50'], app: 'nr' },
  { name: 'named-a', node: NODE, ips: ['10.244.1.60'], app: 'named', ports: [{ name: 'web', containerPort: 8080 }] },
  { name: 'named-b', node: 'node-b', ips: ['10.244.2.60'], app: 'named', ports: [{ name: 'web', containerPort: 8081 }] },
];

type SvcSpec = { name: string; app?: string; spec: Record<string, unknown>; ingress?: object[] };
const HTTP = [{ name: 'http', port: 80, targetPort: 'http' }];
const SERVICES: SvcSpec[] = [
  { name: 'cip', spec: { ports: HTTP } },
  { name: 'cip-multi', spec: { ports: [...HTTP, { name: 'metrics', port: 9090, targetPort: 'metrics' }] } },
  { name: 'cip-udp', spec: { ports: [{ name: 'dns', port: 53, targetPort: 'dns', protocol: 'UDP' }] } },
  { name: 'cip-sctp', spec: { ports: [{ name: 'sctp', port: 7777, targetPort: 7777, protocol: 'SCTP' }] } },
  { name: 'np', spec: { type: 'NodePort', ports: HTTP } },
  { name: 'np-udp', spec: { type: 'NodePort', ports: [{ name: 'dns', port: 53, targetPort: 'dns', protocol: 'UDP' }] } },
  { name: 'np-local', spec: { type: 'NodePort', externalTrafficPolicy: 'Local', ports: HTTP } },
  { name: 'np-local-none', app: 'remote', spec: { type: 'NodePort', externalTrafficPolicy: 'Local', ports: [{ port: 80, targetPort: 8080 }] } },
  { name: 'lb', spec: { type: 'LoadBalancer', ports: HTTP }, ingress: [{ ip: LB.plain }] },
  { name: 'lb-ranges', spec: { type: 'LoadBalancer', ports: HTTP, loadBalancerSourceRanges: ['10.250.0.0/28', '192.0.2.0/24'] }, ingress: [{ ip: LB.ranges }] },
  { name: 'lb-local', spec: { type: 'LoadBalancer', externalTrafficPolicy: 'Local', ports: HTTP }, ingress: [{ ip: LB.local }] },
  { name: 'lb-local-none', app: 'remote', spec: { type: 'LoadBalancer', externalTrafficPolicy: 'Local', ports: [{ port: 80, targetPort: 8080 }] }, ingress: [{ ip: LB.localNone }] },
  { name: 'lb-proxy-mode', spec: { type: 'LoadBalancer', ports: HTTP }, ingress: [{ ip: LB.proxy, ipMode: 'Proxy' }] },
  { name: 'lb-mixed', spec: { type: 'LoadBalancer', ports: [...HTTP, { name: 'dns', port: 53, targetPort: 'dns', protocol: 'UDP' }] }, ingress: [{ ip: LB.mixed }] },
  { name: 'lb-no-nodeports', spec: { type: 'LoadBalancer', allocateLoadBalancerNodePorts: false, ports: HTTP }, ingress: [{ ip: LB.noNp }] },
  { name: 'lb-pending', spec: { type: 'LoadBalancer', ports: HTTP } },
  { name: 'ext', spec: { externalIPs: ['10.250.0.100'], ports: HTTP } },
  { name: 'ext-local', spec: { type: 'NodePort', externalIPs: ['10.250.0.101'], externalTrafficPolicy: 'Local', ports: HTTP } },
  { name: 'itp-local', spec: { internalTrafficPolicy: 'Local', ports: HTTP } },
  { name: 'itp-local-none', app: 'remote', spec: { internalTrafficPolicy: 'Local', ports: [{ port: 80, targetPort: 8080 }] } },
  { name: 'aff', spec: { sessionAffinity: 'ClientIP', ports: HTTP } },
  { name: 'aff-np', spec: { type: 'NodePort', sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 60 } }, ports: HTTP } },
  { name: 'ds', spec: { ipFamilyPolicy: 'RequireDualStack', ports: HTTP } },
  { name: 'ds-np', spec: { type: 'NodePort', ipFamilyPolicy: 'RequireDualStack', ports: HTTP } },
  { name: 'v6', spec: { ipFamilies: ['IPv6'], ports: HTTP } },
  { name: 'v6-lb', spec: { type: 'LoadBalancer', ipFamilies: ['IPv6'], ports: HTTP }, ingress: [{ ip: LB.v6 }] },
  { name: 'term', app: 'term', spec: { ports: [{ port: 80, targetPort: 8080 }] } },
  { name: 'term-local', app: 'term', spec: { type: 'NodePort', externalTrafficPolicy: 'Local', ports: [{ port: 80, targetPort: 8080 }] } },
  { name: 'allterm', app: 'allterm', spec: { ports: [{ port: 80, targetPort: 8080 }] } },
  { name: 'notready', app: 'nr', spec: { ports: [{ port: 80, targetPort: 8080 }] } },
  { name: 'publish-notready', app: 'nr', spec: { publishNotReadyAddresses: true, ports: [{ port: 80, targetPort: 8080 }] } },
  { name: 'named', app: 'named', spec: { ports: [{ name: 'web', port: 80, targetPort: 'web' }] } },
  { name: 'no-endpoints', app: 'nothing', spec: { ports: [{ port: 80, targetPort: 8080 }] } },
  { name: 'lb-ranges-local', spec: { type: 'LoadBalancer', externalTrafficPolicy: 'Local', loadBalancerSourceRanges: ['10.250.0.2/32'], ports: HTTP }, ingress: [{ ip: LB.rangesLocal }] },
  { name: 'lb-aff', spec: { type: 'LoadBalancer', sessionAffinity: 'ClientIP', ports: HTTP }, ingress: [{ ip: LB.aff }] },
  { name: 'np-sctp', spec: { type: 'NodePort', ports: [{ name: 'sctp', port: 7777, targetPort: 7777, protocol: 'SCTP' }] } },
  { name: 'allterm-local', app: 'allterm', spec: { type: 'NodePort', externalTrafficPolicy: 'Local', ports: [{ port: 80, targetPort: 8080 }] } },
  { name: 'ext-v6', spec: { ipFamilies: ['IPv6'], externalIPs: ['fd00:10:250::100'], ports: HTTP } },
  { name: 'ds-lb-local', spec: { type: 'LoadBalancer', ipFamilyPolicy: 'RequireDualStack', externalTrafficPolicy: 'Local', ports: HTTP }, ingress: [{ ip: LB.dsLocal }, { ip: LB.dsLocal6 }] },
  { name: 'headless', spec: { clusterIP: 'None', ports: HTTP } },
  { name: 'extname', spec: { type: 'ExternalName', externalName: 'example.invalid', selector: undefined } },
];

/** Endpoints (all slices, all families) each selector Service should list: service → count. */
const WANT_ENDPOINTS: Record<string, number> = { cip: 3, ds: 6, term: 3, allterm: 2, notready: 2, named: 2, 'np-local-none': 2 };

let cp: ControlPlane;
let kubeProxyBin: string;
let baseline: Record<string, string>;
const captures: { kubeProxy?: Capture; ours?: Capture } = {};
/** The captures, their differences and both logs, for reading after a run. */
const outDir = '/tmp/kip-parity';

beforeAll(async () => {
  kubeProxyBin = ensureTools(['kube-proxy'])['kube-proxy'];
  shq([
    'ip link add kip-node0 type dummy',
    `ip addr add ${NODE_IP}/24 dev kip-node0`,
    `ip addr add ${NODE_IP6}/64 dev kip-node0 nodad`,
    'ip link set kip-node0 up',
    'iptables-legacy -t mangle -N KUBE-IPTABLES-HINT 2>/dev/null || true',
  ].join('\n'));
  flushKernel();
  mkdirSync(outDir, { recursive: true });
  baseline = readSysctls();
  cp = await startControlPlane({ address: NODE_IP });
  await cp.api.createNode(NODE, { addresses: [NODE_IP, NODE_IP6] });
  await cp.api.createNode('node-b', { addresses: ['10.250.0.11'] });
  await cp.api.createNode('node-c', { addresses: ['10.250.0.12'] });
  await cp.api.ensureNamespace(NS);
  await Promise.all(PODS.map((p) => cp.api.createPod(NS, p.name, { node: p.node, ips: p.ips, labels: { app: p.app }, ports: p.ports ?? [{ containerPort: 8080 }], ready: p.ready ?? true })));
  await Promise.all(SERVICES.map(async (s) => {
    const svc = service(NS, s.name, { selector: { app: s.app ?? 'web' }, ...s.spec });
    if (svc.spec.type === 'ExternalName') delete svc.spec.ports;
    const stored = await cp.api.create(svc);
    if (s.ingress) await cp.api.patch(stored, { status: { loadBalancer: { ingress: s.ingress } } }, 'status');
  }));
  // Endpoints written, then the terminating Pods deleted with a grace period nobody ends.
  const endpoints = async (name: string) => {
    const l = await cp.api.list(`/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices?labelSelector=kubernetes.io/service-name=${name}`);
    return l.items.flatMap((s: any) => s.endpoints ?? []);
  };
  await waitFor('every EndpointSlice', async () => {
    for (const [name, n] of Object.entries(WANT_ENDPOINTS)) if ((await endpoints(name)).length !== n) return false;
    return true;
  }, 60_000);
  await Promise.all(PODS.filter((p) => p.terminating).map((p) => cp.api.delete({ apiVersion: 'v1', kind: 'Pod', metadata: { namespace: NS, name: p.name } }, 600)));
  await waitFor('terminating endpoints', async () => (await endpoints('term')).filter((e: any) => e.conditions.terminating).length === 2
    && (await endpoints('allterm')).every((e: any) => e.conditions.terminating), 60_000);
}, 300_000);

afterAll(async () => {
  try {
    execFileSync(process.execPath, [CLI, 'cleanup'], { stdio: 'ignore' });
  } catch {
    /* best effort */
  }
  flushKernel();
  if (baseline) writeSysctls(baseline);
  await cp?.stop();
  shq('ip link del kip-node0 2>/dev/null || true');
}, 120_000);

describe('kube-proxy v1.34 IPVS mode and this daemon on the same cluster', () => {
  it('kube-proxy programs the kernel', async () => {
    const path = legacyPath();
    const kp = new KubeProxy(kubeProxyBin, path);
    try {
      kp.start(['--proxy-mode=ipvs', ...COMMON_FLAGS(cp), '--v=1']);
      await kp.synced();
      captures.kubeProxy = await settled();
    } finally {
      await kp.stop();
      kp.cleanup();
      flushKernel();
      writeSysctls(baseline);
      rmSync(path, { recursive: true, force: true });
      writeFileSync(join(outDir, 'kube-proxy.log'), kp.log);
    }
    expectClean();
    expect(captures.kubeProxy.ipvs.length).toBeGreaterThan(30);
  }, 180_000);

  it('this daemon programs the kernel', async () => {
    const d = new Daemon([...COMMON_FLAGS(cp)]);
    try {
      d.start();
      await d.healthy();
      captures.ours = await settled();
    } finally {
      await d.stop();
      execFileSync(process.execPath, [CLI, 'cleanup'], { stdio: 'ignore' });
      flushKernel();
      writeSysctls(baseline);
      writeFileSync(join(outDir, 'ours.log'), d.log);
    }
    expectClean();
    expect(captures.ours.ipvs.length).toBeGreaterThan(30);
  }, 180_000);

  it('every difference is a documented divergence, and each of those occurs', () => {
    const kp = captures.kubeProxy!;
    const ours = captures.ours!;
    writeFileSync(join(outDir, 'captures.json'), JSON.stringify({ kubeProxy: kp, ours }, null, 1));
    const { unexplained, unused } = compare(kp, ours);
    writeFileSync(join(outDir, 'diff.txt'), unexplained.join('\n'));
    expect(unexplained, 'differences not in DIVERGENCES (docs/kube-proxy-parity.md)').toEqual([]);
    expect(unused, 'DIVERGENCES that no longer occur').toEqual([]);
  });

  it('the rules both sides write are in the same order in every chain', () => {
    for (const s of ['iptables', 'ip6tables'] as const) {
      const a = chains(captures.kubeProxy![s]);
      const b = chains(captures.ours![s]);
      for (const [chain, rules] of a) {
        const theirs = b.get(chain) ?? [];
        const common = new Set(rules.filter((r) => theirs.includes(r)));
        expect(theirs.filter((r) => common.has(r)), `${s} ${chain}`).toEqual(rules.filter((r) => common.has(r)));
      }
    }
  });
});
