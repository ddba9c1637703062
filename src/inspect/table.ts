// inspect's human table for the IPVS section: ipvsadm -Ln's layout, each line followed by its
// attribution (owner, endpoint state, status) and, with --stats, its counters and rates.
import type { IpvsStats } from '../kernel/ipvs/types.js';
import type { InspectReport, InspectTraffic } from '../inspect.js';
import type { InspectDestination, InspectService } from './join.js';

const FORWARD_LABEL: Record<string, string> = { masq: 'Masq', local: 'Local', tunnel: 'Tunnel', route: 'Route' };

function hostPort(address: string, port: number, family: string): string {
  return family === 'ipv6' ? `[${address}]:${port}` : `${address}:${port}`;
}

function statusTag(s: { status?: string; differences?: string[] }): string {
  if (s.status === undefined || s.status === 'ok') return '';
  const why = s.status === 'different' && s.differences?.length ? `: ${s.differences.join('; ')}` : s.status === 'extra' ? ': not wanted by the daemon' : s.status === 'missing' ? ': wanted, not in the kernel' : '';
  return `  [${s.status.toUpperCase()}${why}]`;
}

function ownerText(s: InspectService): string {
  if (s.owner === undefined) return '';
  if (s.owner === null) return '  (no owner)';
  const o = s.owner;
  const affinity = o.sessionAffinitySeconds !== null ? ` affinity=${o.sessionAffinitySeconds}s` : '';
  return `  ${o.service} ${o.type} ${o.vip} eTP=${o.externalTrafficPolicy} iTP=${o.internalTrafficPolicy} scheduler=${o.scheduler}(${o.schedulerSource})${affinity}`;
}

function destText(d: InspectDestination): string {
  if (d.state === undefined) return '';
  const where = d.local === undefined ? '' : d.local ? ' local' : ` remote${d.node ? `(${d.node})` : ''}`;
  const drain = d.state === 'draining' ? ` since ${new Date(d.drainingSince ?? 0).toISOString()}, ${d.activeConns + d.inactiveConns} conns left` : '';
  return `  ${d.state}${where}${drain}`;
}

/** `conns 12 in 60p/3.5KB out 48p/5.2KB | 0 cps 1 pps/2 pps 120 Bps/90 Bps`. */
export function statsText(s: IpvsStats): string {
  return `conns ${s.conns} in ${s.inPkts} pkts/${s.inBytes} B out ${s.outPkts} pkts/${s.outBytes} B | rate ${s.cps} conn/s in ${s.inPps} pkt/s ${s.inBps} B/s out ${s.outPps} pkt/s ${s.outBps} B/s`;
}

/** The IPVS section: one block per virtual server. */
export function formatIpvs(r: InspectReport): string[] {
  const out: string[] = [];
  if (r.desired?.available) out.push(`desired state: ${r.desired.source} (node ${r.desired.node}); [STATUS] marks disagreements with the kernel`);
  else if (r.desired) out.push(`desired state: unavailable (${r.desired.reason}); kernel view only`);
  if (!r.ipvs.available) return [...out, `IPVS: unavailable (${r.ipvs.reason})`];
  out.push(`IP Virtual Server version ${r.ipvs.version} (size=${r.ipvs.connTableSize})`);
  out.push('Prot LocalAddress:Port Scheduler Flags');
  out.push('  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn');
  for (const s of r.ipvs.services) {
    const flags = s.flags.filter((f) => f !== 'persistent');
    const where = s.fwmark !== null ? `FWM  ${s.fwmark}${s.family === 'ipv6' ? ' IPv6' : ''}` : `${s.protocol!.toUpperCase().padEnd(4)} ${hostPort(s.address!, s.port!, s.family)}`;
    let line = `${where} ${s.scheduler}`;
    if (flags.length) line += ` (${flags.join(',')})`;
    if (s.flags.includes('persistent')) line += ` persistent ${s.timeout}${s.netmask !== (s.family === 'ipv4' ? 32 : 128) ? ` mask ${s.netmask}` : ''}`;
    out.push(line + ownerText(s) + statusTag(s));
    if (s.stats) out.push(`     ${statsText(s.stats)}`);
    for (const d of s.destinations) {
      const addr = hostPort(d.address, d.port, d.address.includes(':') ? 'ipv6' : 'ipv4');
      out.push(`  -> ${addr.padEnd(28)} ${(FORWARD_LABEL[d.forward] ?? d.forward).padEnd(7)} ${String(d.weight).padEnd(6)} ${String(d.activeConns).padEnd(10)} ${d.inactiveConns}${destText(d)}${statusTag(d)}`);
      if (d.stats) out.push(`       ${statsText(d.stats)}`);
    }
  }
  if (r.traffic) out.push('', ...formatTraffic(r.traffic));
  return out;
}

/** Traffic per Service port as a table. */
export function formatTraffic(traffic: readonly InspectTraffic[]): string[] {
  const head = ['SERVICE', 'VS', 'CONNS', 'INPKTS', 'OUTPKTS', 'INBYTES', 'OUTBYTES', 'CPS', 'INPPS', 'OUTPPS', 'INBPS', 'OUTBPS', 'ACTIVE', 'INACTIVE'];
  const rows = traffic.map((t) => [t.service, t.virtualServers, t.conns, t.inPkts, t.outPkts, t.inBytes, t.outBytes, t.cps, t.inPps, t.outPps, t.inBps, t.outBps, t.activeConns, t.inactiveConns].map(String));
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return ['Traffic per Service (IPVS counters, summed over each Service port\'s virtual servers):', line(head), ...rows.map(line)];
}
