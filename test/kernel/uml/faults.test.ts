// Fault suite inside UML: the daemon runs on the example manifests with a short sync period while
// real traffic flows, and each fault an operator (or another program) can inflict on the state it
// owns is injected in turn. For each: time until the kernel state is back to exactly what it was,
// traffic restored, nothing left behind, and no warning or error logged more than once per period.
// The table of repair times is printed and written to .test-results/faults.md (README copies it).
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { CLI, Daemon, Manifests, demoNetworkUp, waitFor } from '../lib/daemon.js';
import { boundRoutes } from '../lib/bound.js';
import { assertIsolated } from '../lib/guard.js';

assertIsolated();

const REPO = new URL('../../../', import.meta.url).pathname;
const PERIOD_MS = 2000;
const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const shell = (script: string) => execFileSync('sh', ['-c', script], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const DAEMON_ARGS = ['--hostname-override', 'kip-node', '--cluster-cidr', '10.244.0.0/16', '--log-format', 'text',
  '--ipvs-min-sync-period', '100ms', '--ipvs-sync-period', `${PERIOD_MS / 1000}s`, '--graceful-termination-timeout', '2s'];
// The kernel state must be back within this long (one period, the sync, a loaded UML machine).
const REPAIR_LIMIT_MS = 3 * PERIOD_MS + 15_000;
const BULK = 500; // services x 10 endpoints for the SIGKILL-during-a-large-sync fault

/** IPVS as /proc/net/ip_vs shows it (sorted, counters dropped): read in-process, no spawn. */
function procIpvs(): string {
  const out: string[] = [];
  let vs = '';
  for (const l of readFileSync('/proc/net/ip_vs', 'utf8').split('\n')) {
    if (/^(TCP|UDP|SCTP|FWM)/.test(l)) out.push((vs = l.trim()));
    else if (/^\s+->\s+[0-9A-F]/.test(l)) out.push(`${vs} ${l.trim().split(/\s+/).slice(0, 4).join(' ')}`);
  }
  return out.sort().join('\n');
}
/** One ipset as `ipset save` writes it (sorted, initval dropped): one process. */
const setState = (name: string) => shell(`ipset save ${name} 2>&1; true`).split('\n').map((l) => l.replace(/ initval 0x[0-9a-f]+/, '')).sort().join('\n');
/** The owned nat rules (counters dropped): one process. */
const natState = () => sh('iptables-legacy-save', '-t', 'nat').split('\n').filter((l) => /KUBE-/.test(l) && !l.startsWith('#')).map((l) => l.replace(/\[\d+:\d+\]/g, '')).sort().join('\n');
/** The Service IPs bound through the dummy link (its local routes), and whether it is up. */
const addrState = () => `${shell('ip -o link show dev kube-ipvs0 2>&1; true').includes(',UP') ? 'up' : 'down'} ${boundRoutes().join(' ')}`;

/** Everything the proxy owns in the kernel, normalised (sorted, counters and comments dropped). */
function snapshot(): string {
  const ipvs = sh('ipvsadm', '-Sn').split('\n').filter(Boolean).sort();
  const sets = sh('ipset', 'save').split('\n').filter((l) => / KUBE-/.test(l)).map((l) => l.replace(/ initval 0x[0-9a-f]+/, '')).sort(); // initval: random per create
  const link = shell('ip -o link show dev kube-ipvs0 >/dev/null 2>&1 && echo present || echo absent').trim();
  const addrs = boundRoutes().join('\n');
  const rules = ['nat', 'filter'].flatMap((t) =>
    sh('iptables-legacy-save', '-t', t).split('\n')
      .filter((l) => /KUBE-/.test(l) && !l.startsWith('#'))
      .map((l) => `${t} ${l.replace(/\[\d+:\d+\]/g, '')}`),
  ).sort();
  const sysctls = ['net/ipv4/ip_forward', 'net/ipv4/vs/conntrack', 'net/ipv4/vs/expire_nodest_conn', 'net/ipv4/vs/expire_quiescent_template']
    .map((k) => `${k}=${shell(`cat /proc/sys/${k}`).trim()}`);
  return [...ipvs, ...sets, `link ${link}`, addrs, ...rules, ...sysctls].join('\n');
}

const TARGETS = { 'tcp:10.96.0.10:80': 3, 'tcp:10.250.0.1:30080': 3, 'tcp:10.250.0.200:80': 3, 'udp:10.96.0.53:53': 3, 'tcp:10.96.0.13:80': 0 }; // 0: sh with sh-port, any backend

/**
 * True when 3 fresh connections each through ClusterIP, NodePort, the LB IP and UDP (rr) reach the
 * three backends, and the sh service (source hash with ports) answers: one client process for all of them.
 */
let lastTraffic = '';
function trafficOk(): boolean {
  try {
    const out = sh('ip', 'netns', 'exec', 'kip-client', process.execPath, `${REPO}examples/demo/client.mjs`, '3', ...Object.keys(TARGETS));
    const seen = JSON.parse(out) as Record<string, Record<string, number>>;
    lastTraffic = out.trim();
    return Object.entries(TARGETS).every(([t, distinct]) => {
      const backends = Object.keys(seen[t] ?? {});
      return backends.length > 0 && backends.every((b) => /^be\d$/.test(b)) && (distinct === 0 || backends.length === distinct);
    });
  } catch (e) {
    lastTraffic = `client failed: ${(e as Error).message.slice(0, 500)}`;
    return false;
  }
}

/** The lines only in `want` (-) and only in `got` (+). */
function diff(want: string, got: string): string {
  const [a, b] = [new Set(want.split('\n')), new Set(got.split('\n'))];
  return [...[...a].filter((l) => !b.has(l)).map((l) => `- ${l}`), ...[...b].filter((l) => !a.has(l)).map((l) => `+ ${l}`)].join('\n');
}

/** Warning/error lines of `log`, keyed with numbers removed, and how often each appeared. */
function repeatedProblems(log: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const line of log.split('\n')) {
    if (!/\b(WARN|ERROR|FATAL)\b|"level":(40|50|60)/.test(line)) continue;
    const key = line.replace(/\d+(\.\d+)?/g, '#');
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}

/** The rules of nat/filter that match on set `name`, as `-D` commands. */
function rulesUsing(name: string): string[] {
  return ['nat', 'filter'].flatMap((t) =>
    sh('iptables-legacy-save', '-t', t).split('\n')
      .filter((l) => l.startsWith('-A ') && l.includes(`--match-set ${name} `))
      .map((l) => `iptables-legacy -t ${t} -D ${l.slice(3)}`),
  );
}

interface Row { fault: string; repairMs: number | string; note?: string }
const rows: Row[] = [];
let manifests: Manifests;
let d: Daemon;
let baseline = '';
let modprobeBefore = '';
const daemon = () => new Daemon(['--manifests', manifests.dir, ...DAEMON_ARGS]);

beforeAll(async () => {
  demoNetworkUp();
  // Module autoload as on a real node: the kernel asks this script for ip_vs_<scheduler>.
  writeFileSync('/run/kip-modprobe', `#!/bin/sh\nexec modprobe -d "${process.env.KIP_UML_MODULES}" "$@"\n`, { mode: 0o755 });
  modprobeBefore = readFileSync('/proc/sys/kernel/modprobe', 'utf8');
  writeFileSync('/proc/sys/kernel/modprobe', '/run/kip-modprobe\n');
  manifests = new Manifests();
  d = daemon();
  d.start();
  await d.healthy();
  await waitFor('traffic through every service', trafficOk, 30_000).catch((e: Error) => {
    throw new Error(`${e.message}: ${lastTraffic}`);
  });
  baseline = snapshot();
});

afterAll(async () => {
  await d?.stop();
  mkdirSync(join(REPO, '.test-results'), { recursive: true });
  const table = ['| fault | repaired in | note |', '|---|---|---|',
    ...rows.map((r) => `| ${r.fault} | ${typeof r.repairMs === 'number' ? `${(r.repairMs / 1000).toFixed(1)} s` : r.repairMs} | ${r.note ?? ''} |`)].join('\n');
  writeFileSync(join(REPO, '.test-results/faults.md'), `${table}\n`);
  process.stdout.write(`\nfault repair times (sync period ${PERIOD_MS / 1000} s):\n${table}\n`);
  shell(`sh ${REPO}examples/demo/network.sh down; ${process.execPath} ${CLI} cleanup >/dev/null 2>&1; true`);
  manifests?.remove();
  // Autoload off again, and what it loaded (nf_tables, for the daemon's iptables-nft probe) unloaded: later files expect the harness's kernel.
  if (modprobeBefore) writeFileSync('/proc/sys/kernel/modprobe', modprobeBefore);
  shell("for i in 1 2 3; do for m in $(awk '$1 ~ /^(nft_|nf_tables)/ {print $1}' /proc/modules); do rmmod $m 2>/dev/null; done; done; true");
});

/**
 * Injects a fault; the repair time is until `probe` (a cheap read of the damaged object) reads as
 * it did before. Then the whole owned state must equal the baseline, traffic must flow, and one
 * period later nothing is left behind and no warning/error line has repeated more than once per period.
 */
async function repair(fault: string, probe: () => string, inject: () => void, note?: string): Promise<number> {
  const logFrom = d.log.length;
  const want = probe();
  inject();
  const t0 = Date.now();
  let last = '';
  await waitFor(`repair of "${fault}"`, () => (last = probe()) === want, REPAIR_LIMIT_MS).catch((e: Error) => {
    throw new Error(`${e.message}\n${diff(want, last)}\n--- log\n${d.log.slice(logFrom).slice(-3000)}`);
  });
  const ms = Date.now() - t0;
  await waitFor(`the whole state after "${fault}"`, () => (last = snapshot()) === baseline, REPAIR_LIMIT_MS).catch((e: Error) => {
    throw new Error(`${e.message}\n${diff(baseline, last)}\n--- log\n${d.log.slice(logFrom).slice(-3000)}`);
  });
  await waitFor(`traffic after "${fault}"`, trafficOk, 15_000).catch((e: Error) => {
    throw new Error(`${e.message}: ${lastTraffic}`);
  });
  await new Promise((r) => setTimeout(r, PERIOD_MS + 500));
  const after = snapshot();
  expect(after === baseline, `nothing left behind one period later:\n${diff(baseline, after)}`).toBe(true);
  const window = Date.now() - t0;
  for (const [line, n] of repeatedProblems(d.log.slice(logFrom))) {
    expect(n, `logged ${n} times in ${window} ms: ${line}`).toBeLessThanOrEqual(Math.floor(window / PERIOD_MS) + 1);
  }
  expect(repeatedProblems(d.log.slice(logFrom)).size, 'distinct problems logged').toBeLessThanOrEqual(3);
  rows.push({ fault, repairMs: ms, ...(note ? { note } : {}) });
  return ms;
}

describe('faults while traffic flows: each is repaired within one sync period (+ the sync itself)', () => {
  it('ipvsadm -C', async () => {
    await repair('`ipvsadm -C` (every virtual server)', procIpvs, () => sh('ipvsadm', '-C'));
  });

  it('one real server deleted', async () => {
    await repair('one real server deleted (`ipvsadm -d`)', procIpvs, () => sh('ipvsadm', '-d', '-t', '10.96.0.10:80', '-r', '10.244.2.2:8080'));
  });

  it('a foreign virtual server on an owned VIP', async () => {
    await repair('foreign virtual server on an owned VIP (`ipvsadm -A -t 10.96.0.10:81`)', procIpvs, () => sh('ipvsadm', '-A', '-t', '10.96.0.10:81', '-s', 'rr'));
  });

  it('every owned ipset kind flushed, then destroyed', async () => {
    const sets = sh('ipset', 'save').split('\n').filter((l) => /^create KUBE-/.test(l)).map((l) => l.split(' '));
    const kinds = new Map<string, string[]>(); // type -> set names (non-empty ones first)
    for (const [, name, type] of sets) kinds.set(type!, [...(kinds.get(type!) ?? []), name!]);
    const nonEmpty = (n: string) => sh('ipset', 'save', n).split('\n').some((l) => l.startsWith('add '));
    expect(kinds.size).toBeGreaterThanOrEqual(4);
    for (const [type, names] of kinds) {
      const name = names.find(nonEmpty) ?? names[0]!;
      await repair(`ipset ${name} (${type}) flushed`, () => setState(name), () => sh('ipset', 'flush', name));
      const unhook = rulesUsing(name);
      await repair(`ipset ${name} (${type}) destroyed${unhook.length ? ' (after deleting the rules that use it)' : ''}`,
        () => setState(name) + natState(), () => shell([...unhook, `ipset destroy ${name}`].join('\n')));
    }
  }, 900_000);

  it('the dummy link deleted; its local routes flushed; the link set down (which drops its routes)', async () => {
    await repair('dummy link `kube-ipvs0` deleted', addrState, () => sh('ip', 'link', 'del', 'kube-ipvs0'));
    await repair('local routes through `kube-ipvs0` flushed', addrState, () => sh('ip', 'route', 'flush', 'table', 'local', 'dev', 'kube-ipvs0'));
    await repair('`kube-ipvs0` set down', addrState, () => sh('ip', 'link', 'set', 'kube-ipvs0', 'down'));
  });

  it('KUBE-SERVICES flushed; the jump into it deleted', async () => {
    await repair('`iptables -t nat -F KUBE-SERVICES`', natState, () => sh('iptables-legacy', '-t', 'nat', '-F', 'KUBE-SERVICES'));
    const jumps = sh('iptables-legacy-save', '-t', 'nat').split('\n').filter((l) => /^-A (PREROUTING|OUTPUT) .*-j KUBE-SERVICES/.test(l));
    expect(jumps.length).toBeGreaterThan(0);
    await repair('jumps into KUBE-SERVICES deleted', natState, () => shell(jumps.map((l) => `iptables-legacy -t nat -D ${l.slice(3)}`).join('\n')));
  });

  it('an IPVS sysctl reset', async () => {
    await repair('`net.ipv4.vs.conntrack` reset to 0', () => readFileSync('/proc/sys/net/ipv4/vs/conntrack', 'utf8'), () => writeFileSync('/proc/sys/net/ipv4/vs/conntrack', '0\n'));
  });

  it('the scheduler module a service uses unloaded', async () => {
    expect(sh('ipvsadm', '-Sn')).toContain('-A -t 10.96.0.13:80 -s sh');
    await repair('scheduler module `ip_vs_sh` unloaded (its service deleted first)', procIpvs, () => {
      // The kernel drops the module's reference when the service is deleted (__ip_vs_del_service),
      // but the daemon may put the service back before rmmod runs: then delete it again.
      for (let tries = 1; ; tries++) {
        if (sh('ipvsadm', '-Sn').includes('-A -t 10.96.0.13:80 ')) sh('ipvsadm', '-D', '-t', '10.96.0.13:80');
        try {
          sh('rmmod', 'ip_vs_sh');
          return;
        } catch (e) {
          if (tries === 10) throw e;
        }
      }
    }, 'reloaded by the kernel on demand');
  });

  it('a second daemon beside the first exits with a clear message; the first keeps working', async () => {
    const second = daemon();
    second.start();
    try {
      await waitFor('the second daemon to exit', () => second.exitCode() !== null, 30_000);
    } finally {
      await second.stop('SIGKILL');
    }
    const code = second.exitCode();
    expect(code).not.toBe(0);
    expect(second.log).toMatch(/another kube-ipvs-proxy|already running|lock/i);
    expect(snapshot()).toBe(baseline);
    // rr over 3 fresh UDP sockets can meet one of an earlier check's IPVS connections (same source
    // port, 300 s UDP timeout) and repeat a backend: retried as after every fault.
    await waitFor('traffic beside the second daemon', trafficOk, 15_000).catch((e: Error) => {
      throw new Error(`${e.message}: ${lastTraffic}`);
    });
    rows.push({ fault: 'second daemon started beside the first', repairMs: 'n/a', note: `exits ${code}; the first keeps working` });
  });

  it('SIGKILL during a large full sync, then restart', async () => {
    expect(await d.stop()).toBe(0);
    const docs: string[] = [];
    for (let i = 0; i < BULK; i++) {
      const ip = `10.97.${Math.floor(i / 250)}.${(i % 250) + 1}`;
      docs.push(`apiVersion: v1\nkind: Service\nmetadata: {name: bulk-${i}, namespace: bulk}\nspec: {clusterIP: ${ip}, ports: [{name: http, port: 80, targetPort: 8080}]}`);
      docs.push(`apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: bulk-${i}-1, namespace: bulk, labels: {kubernetes.io/service-name: bulk-${i}}}\naddressType: IPv4\nports: [{name: http, port: 8080, protocol: TCP}]\nendpoints:\n${
        Array.from({ length: 10 }, (_, j) => `- {addresses: [10.244.${100 + (i % 100)}.${j + 1}], conditions: {ready: true}}`).join('\n')}`);
    }
    manifests.write('bulk.yaml', docs.join('\n---\n'));
    const bulkVs = () => (readFileSync('/proc/net/ip_vs', 'utf8').match(/^TCP  0A61/gm) ?? []).length; // 10.97.x.x
    d = daemon();
    d.start();
    const until = Date.now() + 60_000; // poll /proc tightly: kill as soon as the first bulk batch lands
    while (bulkVs() === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
    await d.stop('SIGKILL');
    const partial = bulkVs();
    const partialDests = (readFileSync('/proc/net/ip_vs', 'utf8').match(/^\s+-> 0AF4(6[4-9A-F]|[7-9A-C][0-9A-F])/gm) ?? []).length; // 10.244.100-200.x
    d = daemon();
    const t0 = Date.now();
    d.start();
    await waitFor('every bulk service', () => bulkVs() === BULK && trafficOk(), 120_000);
    const ms = Date.now() - t0;
    rows.push({ fault: `SIGKILL during a full sync of ${BULK} x 10, restart`, repairMs: ms, note: `${partial}/${BULK} virtual servers, ${partialDests}/${BULK * 10} real servers programmed at the kill; time from restart` });
    manifests.write('bulk.yaml', '');
    await waitFor('the bulk services to be removed', () => snapshot() === baseline, 60_000);
    // As after every other fault: traffic within a few seconds (a loaded UML can time a request
    // out), and a first try that failed is printed, so a CI log says what failed.
    if (!trafficOk()) process.stdout.write(`traffic right after the bulk removal failed once: ${lastTraffic}\n`);
    await waitFor('traffic after the bulk removal', trafficOk, 15_000).catch((e: Error) => {
      throw new Error(`${e.message}: ${lastTraffic}\n--- log\n${d.log.slice(-4000)}`);
    });
  });
});
