// Inside UML (a kernel with IPVS): switching modes cleans the other mode's leftovers, and with
// the ip_vs modules unloaded (and modprobe unable to bring them back) `--proxy-mode ipvs` falls
// back to iptables and traffic still flows. The modules are loaded again for later files.
// UML makes every process start slow (~5 s for the daemon), so each step starts as few as it can.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { optionalModules } from '../../harness/uml.mjs';
import { CLI, Daemon, Manifests, demoNetworkUp } from '../lib/daemon.js';
import { assertIsolated } from '../lib/guard.js';

assertIsolated();

const REPO = new URL('../../../', import.meta.url).pathname;
const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8' });
const ARGS = ['--hostname-override', 'kip-node', '--cluster-cidr', '10.244.0.0/16', '--log-format', 'text'];
const BACKENDS = ['be1', 'be2', 'be3'];
const IPVS_MODULES = ['ip_vs', ...optionalModules().filter((m: string) => m.startsWith('ip_vs_') || m === 'xt_ipvs')];

/** `count` fresh connections from the client namespace to each target, in one client process: target → backends seen. */
function fromClient(count: number, ...targets: string[]): Record<string, string[]> {
  const out = sh('ip', 'netns', 'exec', 'kip-client', process.execPath, `${REPO}examples/demo/client.mjs`, String(count), ...targets);
  const r = JSON.parse(out) as Record<string, Record<string, number>>;
  return Object.fromEntries(targets.map((t) => [t, Object.keys(r[t]!).sort()]));
}
/** One sync of the daemon in `mode`; its log (stderr) when it exits 0. */
function once(mode: string): string {
  const r = spawnSync(process.execPath, [CLI, '--proxy-mode', mode, '--once', '--manifests', manifests.dir, ...ARGS], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`--proxy-mode ${mode} --once exited ${r.status}: ${r.stderr}`);
  return r.stderr;
}
/** Owned chains and the built-in chains' jumps into them, from one iptables-legacy-save. */
function iptables(): { chains: string[]; jumps: string[] } {
  const lines = sh('iptables-legacy-save').split('\n');
  return {
    chains: lines.filter((l) => l.startsWith(':KUBE-')).map((l) => l.slice(1).split(' ')[0]!),
    jumps: lines.filter((l) => /^-A (INPUT|OUTPUT|FORWARD|PREROUTING|POSTROUTING) .*-j KUBE-/.test(l)),
  };
}

let manifests: Manifests;
let stubDir: string;

beforeAll(() => {
  demoNetworkUp();
  // In iptables mode nothing binds the external/LB IPs: the network routes them to the node.
  for (const vip of ['10.250.0.100', '10.250.0.200']) sh('ip', '-n', 'kip-client', 'route', 'add', `${vip}/32`, 'via', '10.250.0.1');
  manifests = new Manifests();
  stubDir = mkdtempSync('/run/kip-stub-');
  writeFileSync(join(stubDir, 'modprobe'), '#!/bin/sh\necho "modprobe: FATAL: Module $* not found (test stub)" >&2\nexit 1\n');
  chmodSync(join(stubDir, 'modprobe'), 0o755);
});
afterAll(() => {
  // Later files need IPVS (harmless when loaded) and an empty node.
  execFileSync('sh', ['-c', `for m in ${IPVS_MODULES.join(' ')}; do modprobe -q -d "$KIP_UML_MODULES" $m; done; true`]);
  execFileSync('sh', ['-c', `sh ${REPO}examples/demo/network.sh down; ${process.execPath} ${CLI} cleanup >/dev/null 2>&1; iptables-legacy -t mangle -X KUBE-IPTABLES-HINT; true`]);
  manifests?.remove();
  if (stubDir) rmSync(stubDir, { recursive: true, force: true });
});

describe('switching modes and falling back', () => {
  it('IPVS mode, then iptables mode: virtual servers, ipsets, kube-ipvs0, the IPVS chains and jumps are gone; traffic flows', () => {
    once('ipvs');
    expect(sh('ipvsadm', '-Sn')).toContain('-A -t 10.96.0.10:80');
    expect(sh('ipset', 'list', '-n')).toMatch(/^KUBE-CLUSTER-IP$/m);
    const log = once('iptables');
    expect(log).toMatch(/removed IPVS-mode leftovers step="ipvs" result="deleted \d+ virtual servers"/);
    expect(sh('ipvsadm', '-Sn').trim()).toBe('');
    expect(sh('ipset', 'list', '-n')).not.toMatch(/^KUBE-/m);
    expect(sh('ip', 'link')).not.toContain('kube-ipvs0');
    const { chains, jumps } = iptables();
    for (const gone of ['KUBE-LOAD-BALANCER', 'KUBE-NODE-PORT', 'KUBE-IPVS-FILTER', 'KUBE-SOURCE-RANGES-FIREWALL']) expect(chains).not.toContain(gone);
    expect(chains.filter((c) => c.startsWith('KUBE-SVC-')).length).toBeGreaterThan(0);
    expect(jumps.join('\n')).not.toContain('kube-proxy firewall rules'); // the IPVS mode's jump text
    // iptables mode picks a backend at random: 40 connections miss one of three with p ≈ 3·(2/3)^40 ≈ 3e-7
    // (12, as before, missed one with p ≈ 0.023 per target and did so in CI).
    expect(fromClient(40, 'tcp:10.96.0.10:80', 'tcp:10.250.0.100:80')).toEqual({ 'tcp:10.96.0.10:80': BACKENDS, 'tcp:10.250.0.100:80': BACKENDS });
  });

  it('no ip_vs module and modprobe cannot load it: `--proxy-mode ipvs` falls back (log, /proxyMode) and traffic flows', async () => {
    const holders = sh('ls', '/sys/module/ip_vs/holders').split(/\s+/).filter(Boolean);
    sh('rmmod', ...holders, 'ip_vs');
    expect(sh('ls', '/sys/module').split(/\s+/).filter((m) => m.startsWith('ip_vs'))).toEqual([]);
    // Start from empty nat/filter tables: the fallback writes everything itself. (It also keeps
    // the daemon's iptables-legacy-save for backend detection, ~20 ms per rule in UML, well
    // within that detection's 5 s limit; the KUBE-IPTABLES-HINT in mangle stays.)
    execFileSync('iptables-legacy-restore', [], { input: '*nat\nCOMMIT\n*filter\nCOMMIT\n' });
    const d = new Daemon(['--proxy-mode', 'ipvs', '--manifests', manifests.dir, ...ARGS]);
    const path = process.env.PATH;
    process.env.PATH = `${stubDir}:${path}`; // the daemon's `modprobe ip_vs` is the failing stub
    d.start();
    process.env.PATH = path;
    try {
      await d.healthy();
      expect(d.log).toMatch(/WARN IPVS is unavailable: falling back to the iptables proxy mode .*reason="the kernel has no IPVS generic netlink family.*modprobe ip_vs did not help"/);
      expect(await (await fetch('http://127.0.0.1:10249/proxyMode')).text()).toBe('iptables');
      const targets = ['tcp:10.96.0.10:80', 'tcp:10.250.0.1:30080', 'tcp:10.250.0.200:80', 'udp:10.96.0.53:53'];
      expect(fromClient(40, ...targets)).toEqual(Object.fromEntries(targets.map((t) => [t, BACKENDS])));
      expect(fromClient(8, 'tcp:10.96.0.12:80')['tcp:10.96.0.12:80']).toHaveLength(1); // affinity
    } finally {
      expect(await d.stop()).toBe(0);
    }
  });

  it('IPVS back: the first IPVS-mode sync removes the KUBE-SVC/SEP/EXT chains and the iptables-mode jumps into them', () => {
    execFileSync('sh', ['-c', `for m in ${IPVS_MODULES.join(' ')}; do modprobe -q -d "$KIP_UML_MODULES" $m; done; true`]);
    once('ipvs');
    const { chains, jumps } = iptables();
    expect(chains.filter((c) => /^KUBE-(SVC|SVL|SEP|EXT|FW)-|^KUBE-(NODEPORTS|EXTERNAL-SERVICES)$/.test(c))).toEqual([]);
    // No jump of the iptables mode is left (they carry `--ctstate NEW` or its comments).
    expect(jumps.filter((j) => /--ctstate NEW|KUBE-EXTERNAL-SERVICES|KUBE-NODEPORTS|kubernetes load balancer firewall/.test(j))).toEqual([]);
    expect(sh('ipvsadm', '-Sn')).toContain('-A -t 10.96.0.10:80 -s rr');
    expect(fromClient(12, 'tcp:10.96.0.10:80')['tcp:10.96.0.10:80']).toEqual(BACKENDS);
  });
});
