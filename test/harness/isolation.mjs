// Where is this process? The one place that decides whether kernel tests, fixture captures and
// benchmarks may change network state (only in a fresh netns or in UML, never the host's own).
import { readFileSync, readlinkSync } from 'node:fs';

/** The inode link of a process's network namespace, such as `net:[4026531840]`, or null if unreadable. */
function netnsId(pid) {
  try {
    return readlinkSync(`/proc/${pid}/ns/net`);
  } catch {
    return null;
  }
}

/** The parent pid of a process, or null. */
function parentPid(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1] ?? null;
  } catch {
    return null;
  }
}

/** True when the running kernel is User-Mode Linux (its /proc/cpuinfo says so). */
export function isUmlKernel() {
  try {
    return /^vendor_id\s*:\s*User Mode Linux$/m.test(readFileSync('/proc/cpuinfo', 'utf8'));
  } catch {
    return false;
  }
}

/**
 * True when this process runs in a network namespace it did not inherit from the machine:
 * one other than PID 1's, or (where PID 1's is unreadable, as in some VMs) one other than an
 * ancestor's, e.g. under `unshare -n`. Never true in the namespace named by KIP_HOST_NETNS.
 */
export function inFreshNetns() {
  const self = netnsId('self');
  if (self === null || self === process.env.KIP_HOST_NETNS) return false;
  const init = netnsId('1');
  if (init !== null) return self !== init;
  for (let pid = parentPid('self'), hops = 0; pid !== null && pid !== '0' && hops < 64; pid = parentPid(pid), hops++) {
    const id = netnsId(pid);
    if (id !== null && id !== self) return true;
  }
  return false;
}
