// `npm run bench -- cluster --peer kube-proxy`: the cluster-scale benchmark with the real kube-proxy
// (v1.34, --proxy-mode=ipvs, built by test/tools/build.mjs) as the reference, in the same UML boot,
// on the same objects served by the same fake API server (bench/fake-apiserver.mjs, JSON: kube-proxy
// runs with --kube-api-content-type=application/json). The phases are bench/cluster-phases.mjs's,
// each run once with this daemon and once with kube-proxy; the cold starts alternate which goes first.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { ensureTools } from '../test/tools/build.mjs';
import { addCleanup, churn, coldStart, makeCluster, oneChange, periodic, restart, restoreMs } from './cluster-phases.mjs';
import { HEALTHZ, METRICS } from './daemon-probe.mjs';
import { FakeApiServer } from './fake-apiserver.mjs';
import { CLUSTER_CIDR, NODE_NAME, makeNode, makeServiceCidr } from './objects.mjs';
import { median } from './uml-kernel.mjs';

const s = (ms) => `${(ms / 1000).toFixed(2)} s`;
const msf = (ms) => `${ms.toFixed(0)} ms`;
const MiB = (x) => `${x.toFixed(0)} MiB`;

/**
 * A PATH directory for kube-proxy: iptables is the legacy one (UML has no nf_tables), ip6tables and
 * nft fail, and iptables and ipset are /bin/sh wrappers that append one line
 * (`name`, for ipset `ipset <command>`) to `execLog` and execs the real program (no extra process).
 */
function kubeProxyPath(dir, execLog) {
  mkdirSync(dir, { recursive: true });
  const real = (n) => execFileSync('sh', ['-c', `command -v ${n}`], { encoding: 'utf8' }).trim();
  const wrap = (name, target, what) => {
    writeFileSync(join(dir, name), `#!/bin/sh\necho "${what}" >>${execLog}\nexec ${target} "$@"\n`);
    chmodSync(join(dir, name), 0o755);
  };
  for (const n of ['iptables', 'iptables-save', 'iptables-restore']) wrap(n, real(`${n.replace('iptables', 'iptables-legacy')}`), n);
  // No ip6tables: kube-proxy then runs single-stack IPv4, as this daemon does for these IPv4 Services
  // (dual-stack, its IPv6 half synced empty tables and its first sync took minutes to be reported).
  for (const n of ['ip6tables', 'ip6tables-save', 'ip6tables-restore']) writeFileSync(join(dir, n), '#!/bin/sh\necho "ip6tables: not here" >&2\nexit 1\n', { mode: 0o755 });
  wrap('ipset', real('ipset'), 'ipset $1');
  writeFileSync(join(dir, 'nft'), '#!/bin/sh\necho "nft: not in this kernel" >&2\nexit 1\n', { mode: 0o755 });
  return dir;
}

/**
 * Runs the peer benchmark at each size; pushes one result per size to `out` (and returns it):
 * { n, restore, ours: side, kubeProxy: side } with side = { cold, colds, memCold, one, churn, memChurn, restart, periodic }.
 * `record(result)` is called whenever a side's figures grow (after the cold starts, after each side's phases).
 */
export async function runPeer({ out, record = null, sizes, endpoints, rounds, quick, probe, dir, log, ourArgs, token, periodMs, firstSyncMs = 1_800_000, step }) {
  const bin = ensureTools(['kube-proxy'])['kube-proxy'];
  const execLog = `${dir}/kube-proxy-execs.log`;
  const path = kubeProxyPath(`${dir}/kube-proxy-bin`, execLog);
  const env = { PATH: `${path}:${process.env.PATH}` };
  addCleanup(() => {
    try {
      execFileSync(bin, ['--cleanup', '--proxy-mode=ipvs'], { stdio: 'ignore', env: { ...process.env, ...env } });
    } catch {
      /* --cleanup exits non-zero when a part (nftables) is missing; the rest is done */
    }
  });
  const version = execFileSync(bin, ['--version'], { encoding: 'utf8' }).trim();
  const one = quick ? { count: 8, gapMs: 1300 } : { count: 20, gapMs: 1500 };
  const churnOpts = { rate: 50, seconds: quick ? 10 : 20 };
  for (const n of sizes) {
    const cluster = makeCluster(n, endpoints);
    const api = new FakeApiServer({ token, anonymous: true, eventWindow: 20_000 });
    for (let i = 0; i < n; i++) {
      api.put('services', cluster.services[i]);
      api.put('endpointslices', cluster.slices[i]);
    }
    api.put('nodes', makeNode());
    api.put('servicecidrs', makeServiceCidr());
    api.compact();
    const url = await api.start();
    api.writeKubeconfig(`${dir}/kubeconfig`, url);
    // client-go sends a kubeconfig's token only over TLS: kube-proxy's requests come without one.
    api.writeKubeconfig(`${dir}/kubeconfig-kube-proxy`, url, { token: false });
    const sides = {
      ours: { name: 'kube-ipvs-proxy', args: ['--kubeconfig', `${dir}/kubeconfig`, ...ourArgs], period: ['--ipvs-sync-period', `${periodMs / 1000}s`], peer: null, log },
      kubeProxy: {
        name: 'kube-proxy',
        args: ['--proxy-mode=ipvs', `--kubeconfig=${dir}/kubeconfig-kube-proxy`, `--hostname-override=${NODE_NAME}`, `--cluster-cidr=${CLUSTER_CIDR}`, '--kube-api-content-type=application/json',
          `--metrics-bind-address=${METRICS}`, `--healthz-bind-address=${HEALTHZ}`, '--conntrack-max-per-core=0', ...(process.env.KIP_BENCH_V ? [`--v=${process.env.KIP_BENCH_V}`] : [])],
        period: [`--ipvs-sync-period=${periodMs / 1000}s`], peer: { file: bin, env }, log: join(dirname(log), 'kube-proxy.log'),
      },
    };
    console.log(`\n== --peer ${version}: ${n} Services x ${endpoints} endpoints, ${rounds} round(s) of cold starts`);
    try {
      out.push(await runSize(n, { cluster, api, sides, rounds, probe, one, churnOpts, periodMs, firstSyncMs, execLog, step, record: record ?? (() => {}) }));
    } finally {
      await api.close();
    }
  }
  return out;
}

/** One size: the cold starts (alternating which side goes first), then each side's other phases. */
async function runSize(n, { cluster, api, sides, rounds, probe, one, churnOpts, periodMs, firstSyncMs, execLog, step, record }) {
  const restores = [];
  const colds = { ours: [], kubeProxy: [] };
  const result = { n, ours: {}, kubeProxy: {} };
  for (let r = 0; r < rounds; r++) {
    step(`round ${r + 1}: ipvsadm-restore`);
    restores.push(await restoreMs(cluster.restore()));
    const order = r % 2 ? ['kubeProxy', 'ours'] : ['ours', 'kubeProxy'];
    for (const key of order) {
      const side = sides[key];
      step(`round ${r + 1}: ${side.name} cold start`);
      const c = await coldStart({ args: side.args, log: side.log, probe, cluster, api, peer: side.peer });
      colds[key].push(c.ms);
      console.log(`  ${side.name} cold start, round ${r + 1}: ${s(c.ms)} (ipvsadm-restore ${s(restores.at(-1))}; daemon CPU ${s(c.own.cpuMs)})`);
      if (r < rounds - 1) {
        await c.daemon.stop();
        continue;
      }
      result.restore = median(restores);
      result[key] = { cold: median(colds[key]), colds: colds[key] };
      record(result);
      await phases(c.daemon, side, result[key], () => record(result), { probe, cluster, api, one, churnOpts, periodMs, firstSyncMs, execLog: side.peer ? execLog : null, step });
    }
  }
  report(result);
  return result;
}

/**
 * One side's phases after its last cold start (the daemon running): RSS, one change, churn, restart,
 * a period without changes. Each figure goes into `r` as it is measured; `record()` after each.
 */
async function phases(daemon, side, r, record, { probe, cluster, api, one, churnOpts, periodMs, firstSyncMs, execLog, step }) {
  // kube-proxy's RSS is sampled every 10 s while its first sync runs: at 10,000 x 10 in UML that sync
  // can outlast the run (it starts one ipset process per entry), and then these samples are its figure.
  const rss = [];
  const t0 = performance.now();
  const unsynced = () => {
    r.firstSyncTimeoutMs = performance.now() - t0;
    r.rssUnsynced = { first: rss[0], max: Math.max(...rss), last: rss.at(-1) };
    record(); // every 5 min: a run stopped meanwhile keeps the figure
  };
  let ready = null;
  while (ready === null && performance.now() - t0 < firstSyncMs) {
    rss.push(daemon.rssMiB());
    ready = await daemon.ready(200, side.peer ? 10_000 : firstSyncMs).catch((e) => {
      if (!side.peer) throw e;
      return null;
    });
    if (ready === null && rss.length % 30 === 0) unsynced();
  }
  if (ready === null) return unsynced();
  delete r.firstSyncTimeoutMs;
  delete r.rssUnsynced;
  r.readyMs = ready.ms;
  await sleep(3000);
  r.memCold = daemon.rssMiB();
  record();
  step(`${side.name}: one change`);
  // kube-proxy syncs everything for each change (seconds at 1,000): fewer changes past 1,000 (at least 5).
  const count = side.peer ? Math.max(5, Math.min(one.count, Math.round((one.count * 1000) / cluster.n))) : one.count;
  r.one = await oneChange({ daemon, probe, cluster, api, ...one, count, timeoutMs: 900_000 });
  record();
  step(`${side.name}: churn`);
  r.churn = await churn({ daemon, probe, cluster, api, ...churnOpts, drainMs: 1_800_000 });
  r.memChurn = daemon.rssMiB();
  record();
  step(`${side.name}: restart`);
  const x = await restart({ daemon, args: [...side.args, ...side.period], log: side.log, probe, cluster, api, peer: side.peer });
  r.restart = { usefulMs: x.usefulMs, readyMs: x.readyMs, kernelOps: side.peer ? null : x.kernelOps, lists: x.lists };
  record();
  step(`${side.name}: periodic sync`);
  r.periodic = await periodic({ daemon: x.daemon, periodMs, periods: 2, log: side.log, execLog });
  r.stop = await x.daemon.stop();
  record();
}

function report(r) {
  const line = (key) => {
    const x = r[key];
    const name = key === 'ours' ? 'kube-ipvs-proxy' : 'kube-proxy';
    if (x.periodic === undefined) return console.log(`  ${name}: only ${JSON.stringify(x)}`); // its first sync did not end
    const execs = Object.entries(x.periodic.execs).map(([k, v]) => `${k} ×${v.toFixed(1)}`).join(', ');
    console.log(`  ${name}: cold start ${s(x.cold)} (rounds ${x.colds.map(s).join(', ')}; first sync done ${s(x.readyMs)}), RSS ${MiB(x.memCold)}; one change p50 ${msf(x.one.p50)} p99 ${msf(x.one.p99)} (${x.one.n}); churn ${x.churn.rate.toFixed(0)}/s p50 ${msf(x.churn.p50)} p99 ${msf(x.churn.p99)} max ${msf(x.churn.max)} (${x.churn.n} changes), CPU ${s(x.churn.cpuMs)} = ${(x.churn.cpuMs / x.churn.n).toFixed(2)} s per 1,000 changes, RSS after ${MiB(x.memChurn)}; restart: change in the kernel ${s(x.restart.usefulMs)}, first sync ${s(x.restart.readyMs)}${x.restart.kernelOps === null ? '' : `, ${x.restart.kernelOps} writes`}; no change, per period: ${x.periodic.syncs / x.periodic.periods} syncs${key === 'ours' ? `, ${x.periodic.kernelOps.toFixed(0)} kernel writes (+${x.periodic.verifyOps.toFixed(0)} verifications)` : ''}, ${x.periodic.forks.toFixed(1)} processes+threads created, CPU ${s(x.periodic.cpuMs)}${execs ? `; exec'd: ${execs}` : ''}`);
  };
  line('ours');
  line('kubeProxy');
  if (r.kubeProxy.periodic === undefined) return;
  const q = (a, b) => (a / b).toFixed(3);
  console.log(`  ratios ours/kube-proxy: cold start ${q(r.ours.cold, r.kubeProxy.cold)} (ipvsadm-restore ${s(r.restore)}), one change p99 ${q(r.ours.one.p99, r.kubeProxy.one.p99)}, churn p99 ${q(r.ours.churn.p99, r.kubeProxy.churn.p99)}, CPU per 1,000 changes ${q(r.ours.churn.cpuMs / r.ours.churn.n, r.kubeProxy.churn.cpuMs / r.kubeProxy.churn.n)}, RSS ${q(r.ours.memCold, r.kubeProxy.memCold)}`);
}
