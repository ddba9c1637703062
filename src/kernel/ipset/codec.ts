// ipset entries and sets <-> the attribute objects of the addon's "ipset" / "ipset.adt" schemas.
import { constantsOf, type DumpTable } from '../../native/binding.js';
import { rowReader } from '../table.js';
import { NetlinkError } from '../errors.js';
import { formatEntry, type Addr, type Entry } from './entry.js';
import type { IpsetFamily, IpsetHeader, IpsetSetInfo } from './types.js';

const C = constantsOf('ipset');
const N = constantsOf('netlink');

/** NFPROTO_IPV4 / NFPROTO_IPV6 (equal to AF_INET / AF_INET6). */
export const FAMILY_NUMBER: Record<IpsetFamily, number> = { inet: N.AF_INET!, inet6: N.AF_INET6! };

/** The family name of NFPROTO_*; null for NFPROTO_UNSPEC (bitmap:port) and anything else. */
export function familyName(n: number | undefined): IpsetFamily | null {
  return n === N.AF_INET ? 'inet' : n === N.AF_INET6 ? 'inet6' : null;
}

/** The nfgenmsg of every request, as ipset(8) fills it. */
export const NFGEN_HEADER = { family: N.AF_INET!, version: C.NFNETLINK_V0!, resId: 0 };

/** The nfnetlink message type of an ipset command. */
export function msgType(cmd: number): number {
  return (C.NFNL_SUBSYS_IPSET! << 8) | cmd;
}

/** An address nest. */
export type AddrAttrs = { v4?: number; v6?: Uint8Array };
/** One element's attributes (ADT data), as encoded and as decoded. */
export interface AdtData {
  ip?: AddrAttrs;
  cidr?: number;
  port?: number;
  proto?: number;
  ip2?: AddrAttrs;
  cidr2?: number;
  timeout?: number;
  cadtFlags?: number;
  lineno?: number;
  comment?: string;
  packets?: Uint8Array;
  bytes?: Uint8Array;
  mark?: number;
  ether?: Uint8Array;
  iface?: string;
  setName?: string;
}

function addrAttrs(a: Addr): AddrAttrs {
  return typeof a === 'number' ? { v4: a } : { v6: a };
}

function u64be(v: bigint): Uint8Array {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(v);
  return b;
}

/** The ADT data of one entry; `lineno` ties a kernel error back to it. */
export function entryAttrs(e: Entry, lineno?: number): AdtData {
  const d: AdtData = {};
  if (e.ip !== undefined) d.ip = addrAttrs(e.ip);
  if (e.cidr !== undefined) d.cidr = e.cidr;
  if (e.port !== undefined) d.port = e.port;
  if (e.proto !== undefined) d.proto = e.proto;
  if (e.ip2 !== undefined) d.ip2 = addrAttrs(e.ip2);
  if (e.cidr2 !== undefined) d.cidr2 = e.cidr2;
  if (e.timeout !== undefined) d.timeout = e.timeout;
  if (e.nomatch) d.cadtFlags = C.IPSET_FLAG_NOMATCH!;
  if (lineno !== undefined) d.lineno = lineno;
  if (e.packets !== undefined) d.packets = u64be(e.packets);
  if (e.bytes !== undefined) d.bytes = u64be(e.bytes);
  if (e.comment !== undefined) d.comment = e.comment;
  return d;
}

/** True when an entry can go in a columnar batch (no string or 64-bit attribute). */
export function isColumnar(e: Entry): boolean {
  return e.comment === undefined && e.packets === undefined && e.bytes === undefined;
}

/** Columns for the addon's columnar LIST input: same attributes as entryAttrs(), no object per entry. */
export interface AdtColumns {
  rows: number;
  columns: Record<string, Uint8Array | Uint16Array | Uint32Array | Float64Array>;
}

function addrColumn(cols: AdtColumns['columns'], key: string, rows: number, first: Addr): (i: number, a: Addr) => void {
  if (typeof first === 'number') {
    const col = (cols[`${key}.v4`] = new Uint32Array(rows));
    return (i, a) => (col[i] = a as number);
  }
  const col = (cols[`${key}.v6`] = new Uint8Array(rows * 16));
  return (i, a) => col.set(a as Uint8Array, i * 16);
}

/** Columns of columnar entries of one set (same type, same family: the same element attributes). */
export function entryColumns(entries: readonly Entry[], linenos: readonly number[]): AdtColumns {
  const rows = entries.length;
  const out: AdtColumns = { rows, columns: {} };
  const cols = out.columns;
  const first = entries[0];
  if (!first) return out;
  const setIp = first.ip !== undefined ? addrColumn(cols, 'ip', rows, first.ip) : null;
  const cidr = first.cidr !== undefined ? (cols.cidr = new Uint8Array(rows)) : null;
  const port = first.port !== undefined ? (cols.port = new Uint16Array(rows)) : null;
  const proto = first.proto !== undefined ? (cols.proto = new Uint8Array(rows)) : null;
  const setIp2 = first.ip2 !== undefined ? addrColumn(cols, 'ip2', rows, first.ip2) : null;
  const cidr2 = first.cidr2 !== undefined ? (cols.cidr2 = new Uint8Array(rows)) : null;
  const timeout = entries.some((e) => e.timeout !== undefined) ? (cols.timeout = new Float64Array(rows).fill(NaN)) : null;
  const flags = entries.some((e) => e.nomatch) ? (cols.cadtFlags = new Float64Array(rows).fill(NaN)) : null;
  const lineno = (cols.lineno = new Uint32Array(rows));
  for (let i = 0; i < rows; i++) {
    const e = entries[i]!;
    if (setIp) setIp(i, e.ip!);
    if (cidr) cidr[i] = e.cidr!;
    if (port) port[i] = e.port!;
    if (proto) proto[i] = e.proto!;
    if (setIp2) setIp2(i, e.ip2!);
    if (cidr2) cidr2[i] = e.cidr2!;
    if (timeout && e.timeout !== undefined) timeout[i] = e.timeout;
    if (flags && e.nomatch) flags[i] = C.IPSET_FLAG_NOMATCH!;
    lineno[i] = linenos[i]!;
  }
  return out;
}

const align4 = (n: number): number => (n + 3) & ~3;

/** Upper bound of the bytes one entry takes in an IPSET_ATTR_ADT nest (for sizing messages). */
export function entrySize(e: Entry): number {
  const addr = (a: Addr | undefined): number => (a === undefined ? 0 : typeof a === 'number' ? 12 : 24);
  let n = 4 + 8 + addr(e.ip) + addr(e.ip2);
  for (const v of [e.cidr, e.port, e.proto, e.cidr2, e.timeout]) if (v !== undefined) n += 8;
  if (e.nomatch) n += 8;
  if (e.packets !== undefined) n += 12;
  if (e.bytes !== undefined) n += 12;
  if (e.comment !== undefined) n += 4 + align4(Buffer.byteLength(e.comment) + 1);
  return n;
}

function toAddr(a: AddrAttrs | undefined): Addr | undefined {
  if (!a) return undefined;
  return a.v4 ?? a.v6;
}

/** A decoded element -> Entry. */
export function entryOf(d: AdtData): Entry {
  const e: Entry = {};
  const ip = toAddr(d.ip);
  if (ip !== undefined) e.ip = ip;
  const ip2 = toAddr(d.ip2);
  if (ip2 !== undefined) e.ip2 = ip2;
  if (d.cidr !== undefined) e.cidr = d.cidr;
  if (d.port !== undefined) e.port = d.port;
  if (d.proto !== undefined) e.proto = d.proto;
  if (d.cidr2 !== undefined) e.cidr2 = d.cidr2;
  if (d.timeout !== undefined) e.timeout = d.timeout;
  if (d.cadtFlags !== undefined && d.cadtFlags & C.IPSET_FLAG_NOMATCH!) e.nomatch = true;
  if (d.packets) e.packets = Buffer.from(d.packets).readBigUInt64BE();
  if (d.bytes) e.bytes = Buffer.from(d.bytes).readBigUInt64BE();
  if (d.comment !== undefined) e.comment = d.comment;
  if (d.mark !== undefined) e.mark = d.mark;
  if (d.ether) e.ether = d.ether;
  if (d.iface !== undefined) e.iface = d.iface;
  if (d.setName !== undefined) e.setName = d.setName;
  return e;
}

/** The create data / set header attributes. */
export interface CreateData {
  port?: number;
  portTo?: number;
  timeout?: number;
  cadtFlags?: number;
  hashSize?: number;
  maxElem?: number;
  references?: number;
  memSize?: number;
  elements?: number;
}

/** Top-level attributes of ipset messages. */
export interface IpsetAttrs {
  protocol?: number;
  name?: string;
  typeName?: string;
  revision?: number;
  family?: number;
  protocolMin?: number;
  lineno?: number;
  data?: CreateData;
  adt?: AdtData[];
}

/** The header of a HEADER reply (or of a LIST message). */
export function headerOf(a: IpsetAttrs): IpsetHeader {
  return { name: a.name ?? '', type: a.typeName ?? '', family: familyName(a.family), revision: a.revision ?? 0 };
}

function setInfo(a: IpsetAttrs): IpsetSetInfo {
  const d = a.data ?? {};
  const flags = d.cadtFlags ?? 0;
  return {
    ...headerOf(a),
    hashSize: d.hashSize ?? null,
    maxElem: d.maxElem ?? null,
    range: d.port !== undefined && d.portTo !== undefined ? { from: d.port, to: d.portTo } : null,
    timeout: d.timeout ?? null,
    comment: (flags & C.IPSET_FLAG_WITH_COMMENT!) !== 0,
    counters: (flags & C.IPSET_FLAG_WITH_COUNTERS!) !== 0,
    references: d.references ?? 0,
    memSize: d.memSize ?? 0,
    entries: [],
  };
}

/**
 * The sets of a LIST dump decoded as a table (replies as rows, their IPSET_ATTR_ADT members the
 * `adt` list table). NOTE: a large set arrives as several messages (mtype_list() in
 * ip_set_hash_gen.h stops when the skb is full): the first carries the header, the rest only
 * SETNAME and more members.
 */
export function listedSets(t: DumpTable): IpsetSetInfo[] {
  const sets: IpsetSetInfo[] = [];
  const setOfRow: IpsetSetInfo[] = [];
  const message = rowReader(t);
  let current: IpsetSetInfo | undefined;
  for (let r = 0; r < t.rows; r++) {
    const a = message(r) as IpsetAttrs;
    if (a.typeName !== undefined || !current || current.name !== a.name) {
      current = setInfo(a);
      sets.push(current);
    }
    setOfRow.push(current);
  }
  const adt = t.lists?.adt;
  if (!adt) return sets;
  const member = rowReader(adt);
  for (let i = 0; i < adt.rows; i++) {
    const set = setOfRow[adt.parent[i]!]!;
    set.entries.push(formatEntry(set.type, entryOf(member(i) as AdtData)));
  }
  return sets;
}

const HASH_ERRORS = ['IPSET_ERR_HASH_FULL', 'IPSET_ERR_HASH_ELEM', 'IPSET_ERR_INVALID_PROTO', 'IPSET_ERR_MISSING_PROTO', 'IPSET_ERR_HASH_RANGE_UNSUPPORTED', 'IPSET_ERR_HASH_RANGE'];
const BITMAP_ERRORS = ['IPSET_ERR_BITMAP_RANGE', 'IPSET_ERR_BITMAP_RANGE_SIZE'];

/**
 * Names a set-type-specific code (>= IPSET_ERR_TYPE_SPECIFIC; the same numbers mean different
 * things per type, see ip_set_hash.h / ip_set_bitmap.h) after the set's type.
 */
export function nameTypeSpecific(e: NetlinkError, setType: string): NetlinkError {
  const names = setType.startsWith('hash:') ? HASH_ERRORS : setType.startsWith('bitmap:') ? BITMAP_ERRORS : [];
  const code = e.errno >= C.IPSET_ERR_TYPE_SPECIFIC! ? names.find((n) => C[n] === e.errno) : undefined;
  if (!code) return e;
  const init = { op: e.op, code, errno: e.errno } as ConstructorParameters<typeof NetlinkError>[0];
  if (e.extAck) init.extAck = e.extAck;
  if (e.object) init.object = e.object;
  return new NetlinkError(init);
}
