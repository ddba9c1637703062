// IPVS objects <-> the attribute objects of the addon's "ipvs" schema.
import { endianness } from 'node:os';

import { constantsOf } from '../../native/binding.js';
import { bytesToIp, canonicalIp, ipTo16, maskToPrefix, prefixToMask, type Family } from '../../model/ip.js';
import type {
  Destination,
  DestinationKey,
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

const AF: Record<Family, number> = { ipv4: N.AF_INET!, ipv6: N.AF_INET6! };
const PROTO: Record<Protocol, number> = { tcp: N.IPPROTO_TCP!, udp: N.IPPROTO_UDP!, sctp: N.IPPROTO_SCTP! };
const FWD: Record<ForwardMethod, number> = {
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
  return out;
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

/** A 32-bit unsigned integer at the start of `b`, little- or big-endian. */
function u32(b: Uint8Array, little: boolean): number {
  return new DataView(b.buffer, b.byteOffset, 4).getUint32(0, little);
}

/** The prefix length in NETMASK's raw bytes (inverse of netmaskBytes). */
export function netmaskPrefix(family: Family, raw: Uint8Array | undefined): number {
  if (!raw || raw.length !== 4) return family === 'ipv4' ? 32 : 128;
  if (family === 'ipv4') return maskToPrefix(u32(raw, false));
  return u32(raw, LE);
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

/** Every attribute NEW/SET_SERVICE requires: scheduler, flags, timeout, netmask. */
export function serviceAttrs(s: VirtualService): Record<string, unknown> {
  return {
    ...serviceKeyAttrs(s),
    schedName: s.scheduler,
    flags: flagBuffers.get(flagsToBits(s.flags)),
    timeout: s.timeout,
    netmask: netmaskBuffers[s.family].get(s.netmask),
    ...(s.pe ? { peName: s.pe } : {}),
  };
}

/** Every attribute NEW/SET_DEST requires: address, port, forwarding, weight, thresholds. */
export function destinationAttrs(d: Destination): Record<string, unknown> {
  return {
    addr: ipTo16(d.address),
    port: d.port,
    fwdMethod: FWD[d.forward],
    weight: d.weight,
    uThresh: d.upperThreshold,
    lThresh: d.lowerThreshold,
    addrFamily: AF[d.address.includes(':') ? 'ipv6' : 'ipv4'],
  };
}

/** Attributes that identify a destination (for DEL_DEST). */
export function destinationKeyAttrs(d: DestinationKey): Record<string, unknown> {
  return { addr: ipTo16(d.address), port: d.port, addrFamily: AF[d.address.includes(':') ? 'ipv6' : 'ipv4'] };
}

type RawStats = Partial<Record<keyof IpvsStats, number | bigint>>;

function statsFrom(raw64: RawStats | undefined, raw32: RawStats | undefined): { stats?: IpvsStats } {
  const src = raw64 ?? raw32;
  if (!src) return {};
  const n = (k: keyof IpvsStats): number => Number(src[k] ?? 0);
  const stats = {
    conns: n('conns'),
    inPkts: n('inPkts'),
    outPkts: n('outPkts'),
    inBytes: n('inBytes'),
    outBytes: n('outBytes'),
    cps: n('cps'),
    inPps: n('inPps'),
    outPps: n('outPps'),
    inBps: n('inBps'),
    outBps: n('outBps'),
  };
  return { stats };
}

function need<T>(v: T | undefined, what: string): T {
  if (v === undefined) throw new Error(`IPVS reply lacks ${what}`);
  return v;
}

/** A service nest as decoded (message objects, or a table's rows: bytes as views, counters as numbers). */
interface RawService {
  af?: number;
  protocol?: number;
  addr?: Uint8Array;
  port?: number;
  fwmark?: number;
  schedName?: string;
  flags?: Uint8Array;
  timeout?: number;
  netmask?: Uint8Array;
  peName?: string;
  stats?: RawStats;
  stats64?: RawStats;
}

/** A service nest from a GET_SERVICE reply -> ServiceStatus. Throws on a reply lacking required fields. */
export function parseService(raw: RawService): ServiceStatus {
  const family = need(familyByAf.get(need(raw.af, 'af')), `a known family (af ${raw.af})`);
  const scheduler = need(raw.schedName, 'schedName');
  const bits = raw.flags && raw.flags.length >= 4 ? u32(raw.flags, true) : 0;
  const fwmark = raw.fwmark ? raw.fwmark : null;
  return {
    family,
    protocol: fwmark === null ? need(protocolByNumber.get(need(raw.protocol, 'protocol')), `a known protocol (${raw.protocol})`) : null,
    address: fwmark === null ? bytesToIp(need(raw.addr, 'addr'), family) : null,
    port: fwmark === null ? need(raw.port, 'port') : null,
    fwmark,
    scheduler,
    flags: bitsToFlags(bits, scheduler),
    timeout: raw.timeout ?? 0,
    netmask: netmaskPrefix(family, raw.netmask),
    pe: raw.peName ?? null,
    ...statsFrom(raw.stats64, raw.stats),
  };
}

interface RawDest {
  addr?: Uint8Array;
  port?: number;
  fwdMethod?: number;
  weight?: number;
  uThresh?: number;
  lThresh?: number;
  activeConns?: number;
  inactConns?: number;
  persistConns?: number;
  addrFamily?: number;
  stats?: RawStats;
  stats64?: RawStats;
}

/** A dest nest from a GET_DEST reply -> DestinationStatus (family from ADDR_FAMILY, else the service's). */
export function parseDestination(raw: RawDest, serviceFamily: Family): DestinationStatus {
  const family = raw.addrFamily !== undefined ? need(familyByAf.get(raw.addrFamily), 'a known family') : serviceFamily;
  const fwd = need(raw.fwdMethod, 'fwdMethod') & C.IP_VS_CONN_F_FWD_MASK!;
  return {
    address: bytesToIp(need(raw.addr, 'addr'), family),
    port: need(raw.port, 'port'),
    forward: need(forwardByNumber.get(fwd), `a known forwarding method (${fwd})`),
    weight: need(raw.weight, 'weight'),
    upperThreshold: raw.uThresh ?? 0,
    lowerThreshold: raw.lThresh ?? 0,
    activeConns: raw.activeConns ?? 0,
    inactiveConns: raw.inactConns ?? 0,
    persistConns: raw.persistConns ?? 0,
    ...statsFrom(raw.stats64, raw.stats),
  };
}

/** Canonical text of the addresses in a key, so keys compare equal however they were written. */
export function canonicalKey<K extends ServiceKey>(k: K): K {
  return k.address === null ? k : { ...k, address: canonicalIp(k.address) };
}
