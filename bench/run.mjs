// `npm run bench`: every benchmark, each a ratio against a reference tool in the same run.
//   IPVS (inside User-Mode Linux): addon vs ipvsadm-restore / ipvsadm -Sn   -> bench/ipvs.mjs
//   ipset (host kernel, fresh netns): client vs ipset restore / ipset save    -> bench/ipset.mjs
//   iptables mode (host kernel, fresh netns): proxier vs iptables-restore     -> bench/iptables.mjs
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import { runInUml } from '../test/harness/uml.mjs';

const here = (f) => fileURLToPath(new URL(f, import.meta.url));
const only = process.argv.slice(2);
let failed = 0;

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
if (!only.length || only.includes('ipvs')) {
  console.log('== IPVS (User-Mode Linux)');
  const r = await runInUml({ command: [process.execPath, here('./ipvs.mjs')], timeoutMs: 15 * 60_000 });
  if (r.code !== 0) failed++;
}
process.exitCode = failed ? 1 : 0;
