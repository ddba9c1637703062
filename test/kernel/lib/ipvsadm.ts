// ipvsadm's save format (`ipvsadm -Sn`, `ipvsadm-restore`) <-> the client's model: the
// independent reader and writer that kernel tests and benchmarks cross-check against.
import type { Destination, ServiceFlag, VirtualService } from '../../../src/kernel/ipvs/types.js';

/** A service with its real servers, as both sides see them (counters left out). */
export interface SavedService extends VirtualService {
  destinations: Destination[];
}

const PROTO_FLAG = { tcp: '-t', udp: '-u', sctp: '--sctp-service' } as const;
const FWD_FLAG = { masq: '-m', route: '-g', tunnel: '-i', local: '-g' } as const;

function hostPort(address: string, port: number): string {
  return address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
}

function serviceArgs(s: VirtualService): string {
  if (s.fwmark !== null) return `-f ${s.fwmark}${s.family === 'ipv6' ? ' -6' : ''}`;
  return `${PROTO_FLAG[s.protocol!]} ${hostPort(s.address!, s.port!)}`;
}

/** One service and its real servers as `ipvsadm-restore` input lines. */
export function toRestoreLines(s: SavedService): string[] {
  const sched = s.flags.filter((f) => f !== 'persistent' && f !== 'ops');
  let line = `-A ${serviceArgs(s)} -s ${s.scheduler}`;
  if (sched.length) line += ` -b ${sched.join(',')}`;
  if (s.flags.includes('persistent')) line += ` -p ${s.timeout} -M ${s.family === 'ipv4' ? prefixMask(s.netmask) : s.netmask}`;
  if (s.flags.includes('ops')) line += ' -o';
  const lines = [line];
  for (const d of s.destinations) {
    let l = `-a ${serviceArgs(s)} -r ${hostPort(d.address, d.port)} ${FWD_FLAG[d.forward]} -w ${d.weight}`;
    if (d.upperThreshold) l += ` -x ${d.upperThreshold}`;
    if (d.lowerThreshold) l += ` -y ${d.lowerThreshold}`;
    lines.push(l);
  }
  return lines;
}

function prefixMask(prefix: number): string {
  const m = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
  return [24, 16, 8, 0].map((s) => (m >>> s) & 0xff).join('.');
}

function maskPrefix(mask: string): number {
  if (!mask.includes('.')) return Number(mask);
  return mask.split('.').reduce((n, o) => n + Number(o).toString(2).replace(/0/g, '').length, 0);
}

function splitHostPort(text: string): [string, number] {
  const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(text);
  if (!m) throw new Error(`cannot parse address ${text}`);
  return [m[1]!, Number(m[2])];
}

/** Parses `ipvsadm -Sn` output into services with their destinations. */
export function parseSave(text: string): SavedService[] {
  const services = new Map<string, SavedService>();
  for (const raw of text.split('\n')) {
    const t = raw.trim().split(/\s+/);
    if (t[0] !== '-A' && t[0] !== '-a') continue;
    const opt = (name: string): string | undefined => {
      const i = t.indexOf(name);
      return i >= 0 ? t[i + 1] : undefined;
    };
    const kind = t[1]!;
    const target = t[2]!;
    const key = `${kind} ${target}${t.includes('-6') ? ' -6' : ''}`;
    if (t[0] === '-A') {
      const fw = kind === '-f';
      const [address, port] = fw ? [null, null] : splitHostPort(target);
      const family = fw ? (t.includes('-6') ? 'ipv6' : 'ipv4') : address!.includes(':') ? 'ipv6' : 'ipv4';
      const flags: ServiceFlag[] = [];
      const persistent = opt('-p');
      if (persistent !== undefined) flags.push('persistent');
      if (t.includes('-o')) flags.push('ops');
      flags.push(...((opt('-b')?.split(',') ?? []) as ServiceFlag[]));
      services.set(key, {
        family,
        protocol: fw ? null : kind === '-t' ? 'tcp' : kind === '-u' ? 'udp' : 'sctp',
        address,
        port,
        fwmark: fw ? Number(target) : null,
        scheduler: opt('-s')!,
        flags,
        timeout: persistent !== undefined ? Number(persistent) : 0,
        netmask: opt('-M') !== undefined ? maskPrefix(opt('-M')!) : family === 'ipv4' ? 32 : 128,
        destinations: [],
      });
    } else {
      const [address, port] = splitHostPort(opt('-r')!);
      const forward = t.includes('-m') ? 'masq' : t.includes('-i') ? 'tunnel' : 'route';
      services.get(key)!.destinations.push({
        address,
        port,
        forward,
        weight: Number(opt('-w') ?? 1),
        upperThreshold: Number(opt('-x') ?? 0),
        lowerThreshold: Number(opt('-y') ?? 0),
      });
    }
  }
  return [...services.values()];
}

/**
 * Merges thresholds into parsed services: `ipvsadm -Sn` omits them, `ipvsadm -Ln --thresholds`
 * lists them (`TCP  10.96.1.1:80 rr` then `  -> 10.255.255.4:80  100  10  0  0`).
 */
export function withThresholds(services: SavedService[], listing: string): SavedService[] {
  const proto: Record<string, string> = { TCP: 'tcp', UDP: 'udp', SCTP: 'sctp' };
  let current: SavedService | undefined;
  for (const line of listing.split('\n')) {
    const t = line.trim().split(/\s+/);
    if (t[0] === 'FWM') {
      const family = t[2] === 'IPv6' ? 'ipv6' : 'ipv4';
      current = services.find((s) => s.fwmark === Number(t[1]) && s.family === family);
    } else if (t[0]! in proto) {
      const [address, port] = splitHostPort(t[1]!);
      current = services.find((s) => s.protocol === proto[t[0]!] && s.address === address && s.port === port);
    } else if (t[0] === '->' && current && /^\d+$/.test(t[2] ?? '')) {
      const [address, port] = splitHostPort(t[1]!);
      const d = current.destinations.find((x) => x.address === address && x.port === port);
      if (d) {
        d.upperThreshold = Number(t[2]);
        d.lowerThreshold = Number(t[3]);
      }
    }
  }
  return services;
}

/** A stable order and comparable shape for equality checks. */
export function normalize(services: readonly SavedService[]): SavedService[] {
  const key = (s: VirtualService) => `${s.fwmark ?? ''}|${s.protocol ?? ''}|${s.address ?? ''}|${s.port ?? ''}|${s.family}`;
  return [...services]
    .map((s) => ({
      family: s.family,
      protocol: s.protocol,
      address: s.address,
      port: s.port,
      fwmark: s.fwmark,
      scheduler: s.scheduler,
      flags: [...s.flags].sort(),
      timeout: s.flags.includes('persistent') ? s.timeout : 0,
      netmask: s.flags.includes('persistent') ? s.netmask : s.family === 'ipv4' ? 32 : 128,
      destinations: s.destinations
        .map((d) => ({
          address: d.address,
          port: d.port,
          forward: d.forward,
          weight: d.weight,
          upperThreshold: d.upperThreshold,
          lowerThreshold: d.lowerThreshold,
        }))
        .sort((a, b) => `${a.address}:${a.port}`.localeCompare(`${b.address}:${b.port}`)),
    }))
    .sort((a, b) => key(a).localeCompare(key(b)));
}
