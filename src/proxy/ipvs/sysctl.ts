// The sysctls kube-proxy sets: its IPVS mode's (pkg/proxy/ipvs/proxier.go, NewProxier) and the
// conntrack ones (cmd/kube-proxy/app/conntrack.go, server_linux.go), in every mode.
import { accessSync, constants, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, release } from 'node:os';

import type { Config } from '../../config.js';

/** One sysctl the proxier wants, and why. */
export interface SysctlSetting {
  /** Under /proc/sys (`net/ipv4/ip_forward`), or a path under /sys (`/sys/module/…`). */
  key: string;
  value: string;
  reason: string;
  /** Skipped (not a failure) unless this key is writable: nf_conntrack_max is read-only outside the initial netns. */
  onlyIfWritable?: string;
  /** Only ever raised: left alone while the kernel's value is at least this one. */
  raiseOnly?: boolean;
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

const NF_CONNTRACK_MAX = 'net/netfilter/nf_conntrack_max';

/**
 * kube-proxy's conntrack settings (0 or false: left alone). nf_conntrack_max is max(maxPerCore ×
 * CPUs, min) (getConntrackMax) and the hash size is raised to a quarter of it (SetMax), both only
 * where nf_conntrack_max is writable (the initial netns; the hash size is global too).
 */
export function conntrackSysctls(c: Config['conntrack'], cpuCount = cpus().length || 1): SysctlSetting[] {
  const out: SysctlSetting[] = [];
  const max = c.maxPerCore > 0 ? Math.max(c.maxPerCore * cpuCount, c.min) : 0;
  if (max > 0) {
    const why = `--conntrack-max-per-core ${c.maxPerCore} x ${cpuCount} CPUs, at least --conntrack-min ${c.min}`;
    out.push({ key: NF_CONNTRACK_MAX, value: String(max), reason: why, onlyIfWritable: NF_CONNTRACK_MAX });
    const hashsize = String(Math.floor(max / 4));
    out.push({ key: '/sys/module/nf_conntrack/parameters/hashsize', value: hashsize, reason: `a quarter of nf_conntrack_max (${why})`, onlyIfWritable: NF_CONNTRACK_MAX, raiseOnly: true });
  }
  const timeout = (name: string, ms: number, flag: string): void => {
    if (ms > 0) out.push({ key: `net/netfilter/${name}`, value: String(Math.floor(ms / 1000)), reason: flag });
  };
  timeout('nf_conntrack_tcp_timeout_established', c.tcpEstablishedTimeoutMs, '--conntrack-tcp-timeout-established');
  timeout('nf_conntrack_tcp_timeout_close_wait', c.tcpCloseWaitTimeoutMs, '--conntrack-tcp-timeout-close-wait');
  if (c.tcpBeLiberal) out.push({ key: 'net/netfilter/nf_conntrack_tcp_be_liberal', value: '1', reason: '--conntrack-tcp-be-liberal' });
  timeout('nf_conntrack_udp_timeout', c.udpTimeoutMs, '--conntrack-udp-timeout');
  timeout('nf_conntrack_udp_timeout_stream', c.udpStreamTimeoutMs, '--conntrack-udp-timeout-stream');
  return out;
}

function writable(path: string): boolean {
  try {
    accessSync(path, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * Writes each setting that differs (a raiseOnly one only when the kernel's is lower, an
 * onlyIfWritable one only where that key is writable); returns the ones that failed (the caller
 * reports them). Keys under /sys/ are read under `sys`, the others under `root`.
 */
export function applySysctls(settings: readonly SysctlSetting[], root = '/proc/sys', sys = '/sys'): Array<SysctlSetting & { error: string }> {
  const failed: Array<SysctlSetting & { error: string }> = [];
  for (const s of settings) {
    const path = s.key.startsWith('/sys/') ? `${sys}${s.key.slice(4)}` : `${root}/${s.key}`;
    try {
      if (s.onlyIfWritable !== undefined && !writable(`${root}/${s.onlyIfWritable}`)) continue;
      const have = readFileSync(path, 'utf8').trim();
      if (s.raiseOnly ? Number(have) < Number(s.value) : have !== s.value) writeFileSync(path, s.value);
    } catch (e) {
      failed.push({ ...s, error: e instanceof Error ? e.message : String(e) });
    }
  }
  return failed;
}
