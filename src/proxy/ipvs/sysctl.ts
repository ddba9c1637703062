// The sysctls kube-proxy's IPVS mode sets (pkg/proxy/ipvs/proxier.go, NewProxier).
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { release } from 'node:os';

/** One sysctl the proxier wants, and why. */
export interface SysctlSetting {
  key: string;
  value: string;
  reason: string;
}

/** `5.9.0-x` -> [5, 9]. */
function kernelVersion(text: string): [number, number] {
  const m = /^(\d+)\.(\d+)/.exec(text);
  return m ? [Number(m[1]), Number(m[2])] : [0, 0];
}

/** The sysctls for IPVS mode on a kernel of version `kernel` (default: this one). */
export function ipvsSysctls(opts: { strictARP: boolean; kernel?: string }): SysctlSetting[] {
  const [major, minor] = kernelVersion(opts.kernel ?? release());
  const out: SysctlSetting[] = [
    { key: 'net/ipv4/ip_forward', value: '1', reason: 'route service traffic to endpoints' },
    { key: 'net/ipv4/vs/conntrack', value: '1', reason: 'keep conntrack entries for IPVS connections (needed for SNAT)' },
    { key: 'net/ipv4/vs/expire_nodest_conn', value: '1', reason: 'drop connections whose real server was removed' },
    { key: 'net/ipv4/vs/expire_quiescent_template', value: '1', reason: 'expire persistence templates of weight-0 real servers' },
  ];
  // Before 5.9, conn_reuse_mode=1 stalls reused ports for a second (kubernetes#81775); since 5.9
  // the kernel no longer does, and kube-proxy leaves it alone.
  if (major < 5 || (major === 5 && minor < 9)) out.push({ key: 'net/ipv4/vs/conn_reuse_mode', value: '0', reason: 'avoid 1 s stalls on port reuse (kernel < 5.9)' });
  if (opts.strictARP) {
    out.push({ key: 'net/ipv4/conf/all/arp_ignore', value: '1', reason: '--ipvs-strict-arp: answer ARP only for addresses on the receiving interface' });
    out.push({ key: 'net/ipv4/conf/all/arp_announce', value: '2', reason: '--ipvs-strict-arp: never announce kube-ipvs0 addresses' });
  }
  if (existsSync('/proc/sys/net/bridge/bridge-nf-call-iptables')) {
    out.push({ key: 'net/bridge/bridge-nf-call-iptables', value: '1', reason: 'bridged pod traffic must traverse iptables' });
  }
  return out;
}

/** Writes each setting that differs; returns the ones that failed (the caller logs them). */
export function applySysctls(settings: readonly SysctlSetting[], root = '/proc/sys'): Array<SysctlSetting & { error: string }> {
  const failed: Array<SysctlSetting & { error: string }> = [];
  for (const s of settings) {
    const path = `${root}/${s.key}`;
    try {
      if (readFileSync(path, 'utf8').trim() !== s.value) writeFileSync(path, s.value);
    } catch (e) {
      failed.push({ ...s, error: e instanceof Error ? e.message : String(e) });
    }
  }
  return failed;
}
