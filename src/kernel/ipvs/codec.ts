// IPVS objects <-> the attribute objects of the addon's "ipvs" schema: what dumps read, and a
// service's key for dump requests. The ops' messages are laid out by wire.ts.
import { endianness } from 'node:os';

import { constantsOf, type DumpTable } from '../../native/binding.js';
import { bytesToIp, canonicalIp, ipTo16, maskToPrefix, prefixToMask, type Family } from '../../model/ip.js';
import { NO_FLAGS } from '../../model/service.js';
import { bytesColumn, numberColumn, stringColumn, u32Column, type Column } from '../table.js';
import type {
  DestinationStatus,
  ForwardMethod,
  IpvsStats,
  Protocol,
  ServiceFlag,
  ServiceKey,
  ServiceStatus,
  VirtualService,
} from './types.js';

const C = constantsOf('ipvs');
const N = constantsOf('netlink');

export const AF: Record<Family, number> = { ipv4: N.AF_INET!, ipv6: N.AF_INET6! };
export const PROTO: Record<Protocol, number> = { tcp: N.IPPROTO_TCP!, udp: N.IPPROTO_UDP!, sctp: N.IPPROTO_SCTP! };
export const FWD: Record<ForwardMethod, number> = {
  masq: C.IP_VS_CONN_F_MASQ!,
  local: C.IP_VS_CONN_F_LOCALNODE!,
  tunnel: C.IP_VS_CONN_F_TUNNEL!,
  route: C.IP_VS_CONN_F_DROUTE!,
};

function invert<K extends string>(m: Record<K, number>): Map<number, K> {
  return new Map(Object.entries(m).map(([k, v]) => [v as number, k as K]));
}
const familyByAf = invert(AF);
const protocolByNumber = invert(PROTO);
const forwardByNumber = invert(FWD);

/** Scheduler-flag names per scheduler (ipvsadm's names); others show as flag-N. */
function schedFlagNames(scheduler: string): [ServiceFlag, ServiceFlag, ServiceFlag] {
  if (scheduler === 'sh') return ['sh-fallback', 'sh-port', 'flag-3'];
  if (scheduler === 'mh') return ['mh-fallback', 'mh-port', 'flag-3'];
  return ['flag-1', 'flag-2', 'flag-3'];
}

const FLAG_BITS: Record<ServiceFlag, number> = {
  persistent: C.IP_VS_SVC_F_PERSISTENT!,
  ops: C.IP_VS_SVC_F_ONEPACKET!,
  'sh-fallback': C.IP_VS_SVC_F_SCHED_SH_FALLBACK!,
  'sh-port': C.IP_VS_SVC_F_SCHED_SH_PORT!,
  'mh-fallback': C.IP_VS_SVC_F_SCHED1!,
  'mh-port': C.IP_VS_SVC_F_SCHED2!,
  'flag-1': C.IP_VS_SVC_F_SCHED1!,
  'flag-2': C.IP_VS_SVC_F_SCHED2!,
  'flag-3': C.IP_VS_SVC_F_SCHED3!,
};

/** Flag names -> the kernel's bit field. */
export function flagsToBits(flags: readonly ServiceFlag[]): number {
  return flags.reduce((bits, f) => bits | FLAG_BITS[f], 0);
}

/** The kernel's bit field -> flag names, HASHED masked out (the kernel sets it on every service). */
export function bitsToFlags(bits: number, scheduler: string): ServiceFlag[] {
  const out: ServiceFlag[] = [];
  if (bits & C.IP_VS_SVC_F_PERSISTENT!) out.push('persistent');
  if (bits & C.IP_VS_SVC_F_ONEPACKET!) out.push('ops');
  const names = schedFlagNames(scheduler);
  [C.IP_VS_SVC_F_SCHED1!, C.IP_VS_SVC_F_SCHED2!, C.IP_VS_SVC_F_SCHED3!].forEach((bit, i) => {
    if (bits & bit) out.push(names[i]!);
  });
  return out.length > 0 ? out : NO_FLAGS;
}

/** Attributes that identify a service (for DEL_SERVICE, GET_DEST and the service nest of dest ops). */
export function serviceKeyAttrs(k: ServiceKey): Record<string, unknown> {
  if (k.fwmark !== null) return { af: AF[k.family], fwmark: k.fwmark };
  return { af: AF[k.family], protocol: PROTO[k.protocol!], addr: ipTo16(k.address!), port: k.port };
}

const LE = endianness() === 'LE';

/** NETMASK's 4 raw bytes: the mask in network order (IPv4) or a host-order prefix length (IPv6). */
export function netmaskBytes(family: Family, prefix: number): Buffer {
  const b = Buffer.alloc(4);
  if (family === 'ipv4') b.writeUInt32BE(prefixToMask(prefix));
  else if (LE) b.writeUInt32LE(prefix);
  else b.writeUInt32BE(prefix);
  return b;
}

/** The prefix length in NETMASK's raw bytes read as a 32-bit integer in network order (IPv4) or host order (IPv6). */
function prefixOf(family: Family, be: number | undefined, host: number | undefined): number {
  if (family === 'ipv4') return be === undefined ? 32 : maskToPrefix(be);
  return host ?? 128;
}

/**
 * One read-only buffer per distinct value, shared by every request that carries it (the encoder
 * only reads them): the first sync's services nearly all have the same flags and netmask.
 */
class SharedBuffers<K> {
  readonly #byValue = new Map<K, Buffer>();
  constructor(private readonly make: (k: K) => Buffer) {}
  get(k: K): Buffer {
    let b = this.#byValue.get(k);
    if (!b) this.#byValue.set(k, (b = this.make(k)));
    return b;
  }
}

/** FLAGS as `{flags, mask}`: every flag bit is set or cleared. */
const flagBuffers = new SharedBuffers<number>((bits) => {
  const b = Buffer.alloc(8);
  b.writeUInt32LE(bits, 0);
  b.writeUInt32LE(0xffffffff, 4);
  return b;
});
const netmaskBuffers: Record<Family, SharedBuffers<number>> = {
  ipv4: new SharedBuffers((prefix) => netmaskBytes('ipv4', prefix)),
  ipv6: new SharedBuffers((prefix) => netmaskBytes('ipv6', prefix)),
};

/** FLAGS of a service (shared: read only). */
export const flagsBytes = (s: VirtualService): Buffer => flagBuffers.get(flagsToBits(s.flags));
/** NETMASK of a service (shared: read only). */
export const netmaskOf = (s: VirtualService): Buffer => netmaskBuffers[s.family].get(s.netmask);

const STAT_KEYS = ['conns', 'inPkts', 'outPkts', 'inBytes', 'outBytes', 'cps', 'inPps', 'outPps', 'inBps', 'outBps'] as const;

const statPaths = (nest: string): readonly string[] => STAT_KEYS.map((k) => `${nest}.${k}`);

/** The column paths of each nest's counters (STATS64, STATS), made once: a reader is made per dump, one per change. */
const STAT_PATHS = {
  service: [statPaths('service.stats64'), statPaths('service.stats')],
  dest: [statPaths('dest.stats64'), statPaths('dest.stats')],
} as const;

/** The counters of `nest` (service or dest): STATS64 where the reply has it, else STATS; none without either. */
function statsReader(t: DumpTable, nest: keyof typeof STAT_PATHS): Column<IpvsStats> {
  const nestColumns = (paths: readonly string[]) => (paths.some((p) => t.columns[p]) ? paths.map((p) => numberColumn(t, p)) : null);
  const read = (cols: Column<number>[] | null, r: number): IpvsStats | undefined => {
    if (!cols || cols.every((c) => c(r) === undefined)) return undefined;
    return Object.fromEntries(STAT_KEYS.map((k, i) => [k, cols[i]!(r) ?? 0])) as unknown as IpvsStats;
  };
  const c64 = nestColumns(STAT_PATHS[nest][0]);
  const c32 = nestColumns(STAT_PATHS[nest][1]);
  return c64 || c32 ? (r) => read(c64, r) ?? read(c32, r) : () => undefined;
}

function need<T>(v: T | undefined, what: string): T {
  if (v === undefined) throw new Error(`IPVS reply lacks ${what}`);
  return v;
}

/**
 * The services of a GET_SERVICE dump decoded as a table: row -> ServiceStatus, read straight from
 * the columns (one object, its flags and its address made per row). Throws on a row lacking
 * required fields.
 */
export function serviceReader(t: DumpTable): (row: number) => ServiceStatus {
  const af = numberColumn(t, 'service.af');
  const protocol = numberColumn(t, 'service.protocol');
  const addr = bytesColumn(t, 'service.addr');
  const port = numberColumn(t, 'service.port');
  const fwmark = numberColumn(t, 'service.fwmark');
  const sched = stringColumn(t, 'service.schedName');
  const flags = u32Column(t, 'service.flags', true);
  const timeout = numberColumn(t, 'service.timeout');
  const maskBe = u32Column(t, 'service.netmask', false);
  const maskHost = u32Column(t, 'service.netmask', LE);
  const pe = stringColumn(t, 'service.peName');
  const stats = statsReader(t, 'service');
  return (r) => {
    const family = need(familyByAf.get(need(af(r), 'af')), `a known family (af ${af(r)})`);
    const scheduler = need(sched(r), 'schedName');
    const mark = fwmark(r) || null;
    const s: ServiceStatus = {
      family,
      protocol: mark === null ? need(protocolByNumber.get(need(protocol(r), 'protocol')), `a known protocol (${protocol(r)})`) : null,
      address: mark === null ? bytesToIp(need(addr(r), 'addr'), family) : null,
      port: mark === null ? need(port(r), 'port') : null,
      fwmark: mark,
      scheduler,
      flags: bitsToFlags(flags(r) ?? 0, scheduler),
      timeout: timeout(r) ?? 0,
      netmask: prefixOf(family, maskBe(r), maskHost(r)),
      pe: pe(r) ?? null,
    };
    const st = stats(r);
    if (st) s.stats = st;
    return s;
  };
}

/**
 * The destinations of GET_DEST dumps decoded as a table: (row, the service's family) ->
 * DestinationStatus (the family from ADDR_FAMILY when the reply has it).
 */
export function destinationReader(t: DumpTable): (row: number, serviceFamily: Family) => DestinationStatus {
  const addr = bytesColumn(t, 'dest.addr');
  const addrFamily = numberColumn(t, 'dest.addrFamily');
  const port = numberColumn(t, 'dest.port');
  const fwdMethod = numberColumn(t, 'dest.fwdMethod');
  const weight = numberColumn(t, 'dest.weight');
  const uThresh = numberColumn(t, 'dest.uThresh');
  const lThresh = numberColumn(t, 'dest.lThresh');
  const active = numberColumn(t, 'dest.activeConns');
  const inactive = numberColumn(t, 'dest.inactConns');
  const persist = numberColumn(t, 'dest.persistConns');
  const stats = statsReader(t, 'dest');
  return (r, serviceFamily) => {
    const af = addrFamily(r);
    const family = af !== undefined ? need(familyByAf.get(af), 'a known family') : serviceFamily;
    const fwd = need(fwdMethod(r), 'fwdMethod') & C.IP_VS_CONN_F_FWD_MASK!;
    const d: DestinationStatus = {
      address: bytesToIp(need(addr(r), 'addr'), family),
      port: need(port(r), 'port'),
      forward: need(forwardByNumber.get(fwd), `a known forwarding method (${fwd})`),
      weight: need(weight(r), 'weight'),
      upperThreshold: uThresh(r) ?? 0,
      lowerThreshold: lThresh(r) ?? 0,
      activeConns: active(r) ?? 0,
      inactiveConns: inactive(r) ?? 0,
      persistConns: persist(r) ?? 0,
    };
    const st = stats(r);
    if (st) d.stats = st;
    return d;
  };
}

/** Canonical text of the addresses in a key, so keys compare equal however they were written. */
export function canonicalKey<K extends ServiceKey>(k: K): K {
  return k.address === null ? k : { ...k, address: canonicalIp(k.address) };
}
