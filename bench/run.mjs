// `npm run bench`: every benchmark, each a ratio against a reference tool in the same run.
//   IPVS (inside User-Mode Linux): addon vs ipvsadm-restore / ipvsadm -Sn   -> bench/ipvs.mjs
//   ipset (host kernel, fresh netns): client vs ipset restore / ipset save    -> bench/ipset.mjs
//   iptables mode (host kernel, fresh netns): proxier vs iptables-restore     -> bench/iptables.mjs
// Only when named (they take minutes): `npm run bench -- cluster [--sizes 1000,3000] [--quick]`
//   the daemon against a fake API server at cluster scale, inside UML       -> bench/cluster.mjs
// `npm run bench -- link`: addresses bound to one link, client vs ip -batch (host, fresh netns) -> bench/link.mjs
// UML boots with module autoload, as a node has it (runInUml's `autoload`): without it every
//   iptables-legacy call spawned failing modprobes (`bpfilter`), 4 per iptables-legacy-restore.
// --host-busy: a busy loop at the lowest priority on the host for the whole run. UML's syscalls and
//   page faults are ping-pongs between host processes, and an idle host's cores sleep between
//   them: the same boot ran `ipvsadm-restore` of 3,000 x 10 in 28 s on an idle host and in 7.5 s
//   with one core kept busy, and a page fault cost 156 us against 41 us. A busy host is the
//   regime that reproduces (an idle one varies with whatever else the machine runs).
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import { runInUml } from '../test/harness/uml.mjs';
import { commitStamp } from './results.mjs';

const here = (f) => fileURLToPath(new URL(f, import.meta.url));
const NAMES = ['ipset', 'iptables', 'ipvs', 'link', 'cluster'];
const argv = process.argv.slice(2);
if (argv.includes('--help') || argv.includes('-h')) {
  console.log(`usage: npm run bench [-- ipset|iptables|ipvs|link|cluster ...] [--host-busy] [cluster flags]
  no name: ipset, iptables and ipvs; link and cluster only when named (bench/cluster.mjs: --sizes, --rounds, --quick,
  --manifests-size, --soak-minutes, --peer kube-proxy, --first-sync-minutes). Each benchmark rewrites its rows of the results table in
  docs/benchmarks.md (KIP_BENCH_RESULTS=FILE writes elsewhere, KIP_BENCH_RESULTS=off nowhere).`);
  process.exit(0);
}
// One stamp for every benchmark of this run (the cluster one runs in UML), taken before any writes the table.
process.env.KIP_BENCH_STAMP ||= commitStamp();
const hostBusy = argv.includes('--host-busy');
const only = argv.filter((a) => NAMES.includes(a));
const clusterArgs = argv.filter((a) => !NAMES.includes(a) && a !== '--host-busy');
let failed = 0;
const spinner = hostBusy ? spawn('nice', ['-n', '19', 'sh', '-c', 'while :; do :; done'], { stdio: 'ignore' }) : null;
spinner?.unref(); // it must not keep this process alive; killed on exit
if (spinner) console.log('(host kept busy: a nice-19 busy loop runs beside UML)');
process.on('exit', () => spinner?.kill());

if (!only.length || only.includes('ipset')) {
  console.log('== ipset (host kernel, fresh network namespace)');
  const r = spawnSync(process.execPath, [here('./ipset.mjs')], { stdio: 'inherit' });
  if (r.status !== 0) failed++;
}
if (!only.length || only.includes('iptables')) {
  console.log('== iptables mode (host kernel, fresh network namespace)');
  const r = spawnSync(process.execPath, [here('./iptables.mjs')], { stdio: 'inherit' });
  if (r.status !== 0) failed++;
}
if (only.includes('link')) {
  console.log('== addresses bound to one link (host kernel, fresh network namespace)');
  const r = spawnSync(process.execPath, [here('./link.mjs')], { stdio: 'inherit' });
  if (r.status !== 0) failed++;
}
if (!only.length || only.includes('ipvs')) {
  console.log('== IPVS (User-Mode Linux)');
  const r = await runInUml({ command: [process.execPath, here('./ipvs.mjs')], timeoutMs: 15 * 60_000, autoload: true });
  if (r.code !== 0) failed++;
}
if (only.includes('cluster')) {
  console.log('== cluster scale (User-Mode Linux): the daemon against a fake API server');
  const commit = spawnSync('git', ['describe', '--always', '--dirty', '--abbrev=12'], { encoding: 'utf8' }).stdout?.trim() || 'unknown';
  // UML's memory from the largest size named: the fake API server holds every object as JSON and as objects.
  const largest = Math.max(0, ...(clusterArgs.join(' ').match(/\d{4,}/g) ?? []).map(Number));
  // --peer kube-proxy: kube-proxy's heap beside this daemon's and the fake API server's objects.
  const peer = clusterArgs.includes('--peer');
  const mem = largest >= 50_000 ? '10G' : largest >= 10_000 ? (peer ? '4G' : '3G') : '1536M';
  const r = await runInUml({ command: [process.execPath, here('./cluster.mjs'), ...clusterArgs], env: { KIP_BENCH_COMMIT: commit }, mem, timeoutMs: 240 * 60_000, autoload: true });
  if (r.code !== 0) failed++;
}
process.exitCode = failed ? 1 : 0;
