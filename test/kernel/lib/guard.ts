import { readFileSync, readlinkSync } from 'node:fs';

/** The inode link of a process's network namespace, such as `net:[4026531840]`, or null if unreadable. */
function netnsId(pid: string): string | null {
  try {
    return readlinkSync(`/proc/${pid}/ns/net`);
  } catch {
    return null;
  }
}

/** True when the running kernel is User-Mode Linux (its /proc/cpuinfo says so). */
export function isUmlKernel(): boolean {
  try {
    return /^vendor_id\s*:\s*User Mode Linux$/m.test(readFileSync('/proc/cpuinfo', 'utf8'));
  } catch {
    return false;
  }
}

/** The parent pid of a process, or null. */
function parentPid(pid: string): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1] ?? null;
  } catch {
    return null;
  }
}

/**
 * True when this process runs in a network namespace it did not inherit from the machine:
 * one other than PID 1's, or (where PID 1's is unreadable, as in some VMs) one other than an
 * ancestor's, e.g. under `unshare -n`. Never true in the namespace named by KIP_HOST_NETNS.
 */
export function inFreshNetns(): boolean {
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

/** True when this process runs inside the test harness's User-Mode Linux (KIP_IN_UML=1 and a UML kernel). */
export function inUml(): boolean {
  return process.env.KIP_IN_UML === '1' && isUmlKernel();
}

/**
 * Refuses to run a kernel test that could touch the host's own network namespace.
 * Call it at the top of every file under test/kernel/.
 */
export function assertIsolated(): void {
  if (process.env.KIP_IN_UML === '1' && !isUmlKernel()) {
    throw new Error('KIP_IN_UML=1 is set but this kernel is not User-Mode Linux (use `npm test`)');
  }
  if (!inUml() && !inFreshNetns()) {
    throw new Error('kernel tests must run in a fresh network namespace or in UML (use `npm test`)');
  }
}
