// IPVS objects as the rest of the program sees them, and their input validation.
import type { z } from 'zod';

import { familyOf, type Family } from '../../model/ip.js';
import { NO_FLAGS, SERVICE_FLAGS, type ServiceFlag } from '../../model/service.js';
import { lazy, lazySchema, zod, type Zod } from '../../zod.js';

/** Transport protocols IPVS balances. */
export const PROTOCOLS = ['tcp', 'udp', 'sctp'] as const;
/** A transport protocol. */
export type Protocol = (typeof PROTOCOLS)[number];

/** Forwarding methods, named as ipvsadm names them (-m, -g, -i, local). */
export const FORWARD_METHODS = ['masq', 'local', 'tunnel', 'route'] as const;
/** A forwarding method. */
export type ForwardMethod = (typeof FORWARD_METHODS)[number];

// Service flags belong to the model (a Service's scheduler flags); re-exported for the kernel layer.
export { NO_FLAGS, SERVICE_FLAGS, type ServiceFlag };

/** Schedulers shipped with Linux; any other name the kernel registers is accepted too. */
export const KNOWN_SCHEDULERS = ['rr', 'wrr', 'lc', 'wlc', 'lblc', 'lblcr', 'dh', 'sh', 'sed', 'nq', 'mh', 'fo', 'ovf', 'twos'] as const;

/** Identifies a virtual service: protocol+address+port, or a firewall mark (the others null). */
export interface ServiceKey {
  family: Family;
  protocol: Protocol | null;
  address: string | null;
  port: number | null;
  fwmark: number | null;
}

/** A virtual service as programmed. `netmask` is a prefix length (persistence granularity). */
export interface VirtualService extends ServiceKey {
  scheduler: string;
  flags: ServiceFlag[];
  timeout: number;
  netmask: number;
  /** Persistence engine (e.g. `sip`), rarely used. */
  pe?: string | null;
}

/** Identifies a real server within a service. */
export interface DestinationKey {
  address: string;
  port: number;
}

/** A real server as programmed. */
export interface Destination extends DestinationKey {
  forward: ForwardMethod;
  weight: number;
  upperThreshold: number;
  lowerThreshold: number;
}

/** Traffic counters (64-bit where the kernel offers STATS64). */
export interface IpvsStats {
  conns: number;
  inPkts: number;
  outPkts: number;
  inBytes: number;
  outBytes: number;
  cps: number;
  inPps: number;
  outPps: number;
  inBps: number;
  outBps: number;
}

/** A virtual service as read back from the kernel; `stats` only when asked for. */
export interface ServiceStatus extends VirtualService {
  stats?: IpvsStats;
}

/** A real server as read back from the kernel. */
export interface DestinationStatus extends Destination {
  activeConns: number;
  inactiveConns: number;
  persistConns: number;
  stats?: IpvsStats;
}

/** Options of reads: `stats` adds the 64-bit counters (skipped by default: syncs never need them). */
export interface ReadOptions {
  stats?: boolean;
}

/** IPVS connection timeouts in seconds (0 = leave unchanged when setting). */
export interface IpvsTimeouts {
  tcp: number;
  tcpFin: number;
  udp: number;
}

/** GET_INFO: IPVS version and connection table size. */
export interface IpvsInfo {
  version: string;
  connTableSize: number;
}

/** What the kernel takes as a scheduler's name (IP_VS_SCHEDNAME_MAXLEN 16 with its NUL). */
const SCHEDULER_NAME = /^[a-z0-9_-]{1,15}$/;
/** The schemas, made with `z` (zod.ts: built on first use). */
function build(z: Zod) {
  const u32 = z.number().int().min(0).max(0xffffffff);
  const port = z.number().int().min(0).max(65535);
  const ipAddress = z.string().refine((a) => familyOf(a) !== null, { message: 'not an IP address' });
  const serviceKeyFields = {
    family: z.enum(['ipv4', 'ipv6']),
    protocol: z.enum(PROTOCOLS).nullable(),
    address: ipAddress.nullable(),
    port: port.nullable(),
    fwmark: z.number().int().min(1).max(0xffffffff).nullable(),
  };
  const serviceKey = z.object(serviceKeyFields).superRefine(checkKey);
  const virtualService = z
    .object({
      ...serviceKeyFields,
      scheduler: z.string().regex(SCHEDULER_NAME, 'invalid scheduler name (1-15 chars of [a-z0-9_-])'),
      flags: z.array(z.enum(SERVICE_FLAGS)),
      timeout: u32,
      netmask: z.number().int().min(0).max(128),
      pe: z.string().max(15).nullable().optional(),
    })
    .superRefine((s, ctx) => {
      checkKey(s, ctx);
      if (s.family === 'ipv4' && s.netmask > 32) ctx.addIssue({ code: 'custom', message: 'IPv4 netmask prefix > 32', path: ['netmask'] });
    });
  const destination = z.object({
    address: ipAddress,
    port,
    forward: z.enum(FORWARD_METHODS),
    weight: z.number().int().min(0).max(0x7fffffff),
    upperThreshold: u32,
    lowerThreshold: u32,
  });
  const destinationKey = z.object({ address: ipAddress, port });
  return { serviceKey, virtualService, destination, destinationKey };
}

/** Exactly one of (protocol, address and port) or fwmark, and an address of the key's family. */
function checkKey(k: ServiceKey, ctx: z.RefinementCtx): void {
  const byAddr = k.protocol !== null && k.address !== null && k.port !== null;
  const none = k.protocol === null && k.address === null && k.port === null;
  if (k.fwmark !== null ? !none : !byAddr)
    ctx.addIssue({ code: 'custom', message: 'needs protocol, address and port, or fwmark (alone)', path: ['fwmark'] });
  if (k.address !== null && familyOf(k.address) !== null && familyOf(k.address) !== k.family)
    ctx.addIssue({ code: 'custom', message: `address is not ${k.family}`, path: ['address'] });
}

const schemas = lazy(() => build(zod()));

/** Validates a ServiceKey. */
export const serviceKeySchema = lazySchema(() => schemas().serviceKey);
/** Validates a VirtualService. */
export const virtualServiceSchema = lazySchema(() => schemas().virtualService);
/** Validates a Destination. */
export const destinationSchema = lazySchema(() => schemas().destination);
/** Validates a DestinationKey. */
export const destinationKeySchema = lazySchema(() => schemas().destinationKey);

const inRange = (v: unknown, max: number): boolean => Number.isSafeInteger(v) && (v as number) >= 0 && (v as number) <= max;

/**
 * True when `d` is a valid DestinationKey, checked without zod (100,000 real servers in a first
 * sync at 10,000 × 10: zod's parse was most of their validation's time and garbage). False
 * does not mean invalid: the schema then decides and names the field.
 */
export function isPlainDestinationKey(d: unknown): boolean {
  if (typeof d !== 'object' || d === null || Array.isArray(d)) return false;
  const { address, port } = d as Record<string, unknown>;
  return typeof address === 'string' && familyOf(address) !== null && inRange(port, 65535);
}

/** {@link isPlainDestinationKey} for a whole Destination (destinationSchema). */
export function isPlainDestination(d: unknown): boolean {
  if (!isPlainDestinationKey(d)) return false;
  const { forward, weight, upperThreshold, lowerThreshold } = d as Record<string, unknown>;
  return FORWARD_METHODS.includes(forward as ForwardMethod) && inRange(weight, 0x7fffffff) && inRange(upperThreshold, 0xffffffff) && inRange(lowerThreshold, 0xffffffff);
}

/**
 * {@link isPlainDestinationKey} for a ServiceKey by protocol, address and port (serviceKeySchema):
 * the key of a sync's ops (zod's parse was 4 KiB of a one-change sync's ~200 KiB of garbage) and of
 * each service a verification reads the real servers of.
 */
export function isPlainServiceKey(k: unknown): boolean {
  if (typeof k !== 'object' || k === null || Array.isArray(k)) return false;
  const { family, protocol, address, port, fwmark } = k as Record<string, unknown>;
  if (fwmark !== null || !PROTOCOLS.includes(protocol as Protocol) || typeof address !== 'string' || !inRange(port, 65535)) return false;
  const f = familyOf(address);
  return f !== null && f === family; // not an address (null) is no family, whatever `family` holds
}

/**
 * {@link isPlainServiceKey} for a whole VirtualService (virtualServiceSchema): a first sync at
 * 10,000 Services adds 10,000, and zod's parse left ~2 KiB of garbage each (21 MiB, every page of
 * it a fresh one in UML).
 */
export function isPlainVirtualService(s: unknown): boolean {
  if (!isPlainServiceKey(s)) return false;
  const { family, scheduler, flags, timeout, netmask, pe } = s as Record<string, unknown>;
  return (
    typeof scheduler === 'string' &&
    SCHEDULER_NAME.test(scheduler) &&
    Array.isArray(flags) &&
    flags.every((f) => SERVICE_FLAGS.includes(f as ServiceFlag)) &&
    inRange(timeout, 0xffffffff) &&
    inRange(netmask, family === 'ipv4' ? 32 : 128) &&
    (pe === undefined || pe === null || (typeof pe === 'string' && pe.length <= 15))
  );
}

/** `tcp/10.96.0.10:80`, `udp/[2001:db8::1]:53`, `fwmark/6/ipv4`: names a service in logs and errors. */
export function serviceId(k: ServiceKey): string {
  if (k.fwmark !== null) return `fwmark/${k.fwmark}/${k.family}`;
  const host = k.family === 'ipv6' ? `[${k.address}]` : k.address;
  return [k.protocol, '/', host, ':', k.port].join(''); // one flat string (see destinationId)
}

/** A real server as programmed plus its connection counts: what syncs and inspect keep of a dump. */
export type ObservedDestination = Destination & { activeConns: number; inactiveConns: number };

/** Keeps the fields syncs compare (and the connection counts) of a dumped real server. */
export function observedDestination(d: DestinationStatus): ObservedDestination {
  return {
    address: d.address,
    port: d.port,
    forward: d.forward,
    weight: d.weight,
    upperThreshold: d.upperThreshold,
    lowerThreshold: d.lowerThreshold,
    activeConns: d.activeConns,
    inactiveConns: d.inactiveConns,
  };
}

/**
 * `10.244.1.2:8080` or `[fd00::2]:8080`. Ids and keys the proxy holds (in Maps, per real server)
 * are made by join, not a template literal: V8 makes a template of 13 characters or more a tree
 * of cons strings (two 32-byte objects above its parts) that a Map keeps as it is, where join
 * makes one flat string (a Map of 100,000 such ids: 92 → 36 bytes per entry, as fast).
 */
export function destinationId(d: DestinationKey): string {
  return d.address.includes(':') ? ['[', d.address, ']:', d.port].join('') : [d.address, d.port].join(':');
}
