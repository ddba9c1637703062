// The host benchmarks run in a fresh network namespace: started outside one, a script re-executes
// itself under `unshare -n` and exits with its status; it never touches the host's own namespace.
import { spawnSync } from 'node:child_process';
import { basename } from 'node:path';
import { fileURLToPath } from 'node:url';

import { inFreshNetns } from '../test/harness/isolation.mjs';

/** Returns only inside a fresh network namespace; `what` names what the script would change. */
export function inFreshNetnsOrReexec(scriptUrl, what) {
  if (inFreshNetns()) return;
  if (process.env.KIP_BENCH_REEXEC) throw new Error(`not in a fresh network namespace after unshare -n: refusing to touch the host ${what}`);
  const script = fileURLToPath(scriptUrl);
  const r = spawnSync('unshare', ['-n', process.execPath, script], { stdio: 'inherit', env: { ...process.env, KIP_BENCH_REEXEC: '1' } });
  if (r.error || r.status === null) {
    console.error(`cannot create a network namespace (${r.error?.message ?? r.signal}): run as root, or \`unshare -n node bench/${basename(script)}\``);
    process.exit(1);
  }
  process.exit(r.status);
}
