// Helpers for benchmarks that run inside UML (test/harness/uml.mjs sets KIP_UML_MODULES).
import { execFileSync } from 'node:child_process';
import { performance } from 'node:perf_hooks';

/** Runs a command, returns stdout; throws on failure. */
export const sh = (cmd, args, input) => execFileSync(cmd, args, { encoding: 'utf8', maxBuffer: 1 << 28, ...(input ? { input } : {}) });

/** The median of a list of numbers. */
export const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Milliseconds `fn` took. */
export async function time(fn) {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

/** Refuses to run outside the UML harness. */
export function requireUml(script) {
  if (!process.env.KIP_UML_MODULES) throw new Error(`run inside UML: npm run bench (or node test/harness/uml.mjs -- node ${script})`);
}

/**
 * An empty IPVS for the next measurement. A flush is not enough: the kernel keeps deleted real
 * servers in a trash list for 120 s (IP_VS_DEST_TRASH_PERIOD) and every NEW_DEST scans it, so
 * whoever re-adds after a flush pays O(n^2). Reloading the module starts from nothing.
 */
export function reloadIpvs() {
  sh('ipvsadm', ['-C']);
  const holders = sh('ls', ['/sys/module/ip_vs/holders']).split(/\s+/).filter(Boolean);
  sh('rmmod', [...holders, 'ip_vs']);
  sh('modprobe', ['-a', '-d', process.env.KIP_UML_MODULES, 'ip_vs', ...holders]);
}

/** `ipvsadm-restore` input for services `{address, port, destinations: [{address, port}]}` (TCP, rr, masq). */
export function restoreText(services) {
  return `${services.flatMap((s) => [`-A -t ${s.address}:${s.port} -s rr`, ...s.destinations.map((d) => `-a -t ${s.address}:${s.port} -r ${d.address}:${d.port} -m -w 1`)]).join('\n')}\n`;
}
