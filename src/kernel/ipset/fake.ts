// An in-memory IpsetClient that answers as the kernel does (ip_set_core.c), held to it by the case
// table both run (test/kernel/lib/cases/ipset-cases.ts), with error injection and call/entry counters.
import { constants as os } from 'node:os';

import { constantsOf } from '../../native/binding.js';
import { checkWith, NetlinkError, ValidationError } from '../errors.js';
import { setNameSchema, setSpecSchema } from './client.js';
import { EntrySyntaxError, formatEntry, parseEntry, type Addr, type Entry } from './entry.js';
import {
  SET_TYPES,
  type IpsetAdtOptions,
  type IpsetClient,
  type IpsetEntryResult,
  type IpsetFamily,
  type IpsetHeader,
  type IpsetSetInfo,
  type IpsetSetSpec,
  type SetType,
} from './types.js';

const C = constantsOf('ipset');

/** The IpsetClient methods the fake counts (and can fail whole). */
export type IpsetMethod = 'create' | 'destroy' | 'flush' | 'rename' | 'swap' | 'list' | 'listNames' | 'listHeaders' | 'header' | 'test' | 'add' | 'del';

/** The revision the fake reports for every set (the client's MAX_REVISION is what a real kernel caps to). */
const REVISION = 1;
/** hash:* default maxelem and hashsize, and the smallest hashsize (ip_set_hash_gen.h, ip_set.h). */
const DEFAULT_MAXELEM = 65536;
const DEFAULT_HASHSIZE = 1024;
const MIN_HASHSIZE = 64;

/** The hash table size the kernel makes of a requested one: a power of two, at least 64 (htable_bits). */
function tableSize(hashSize: number | undefined): number {
  let size = MIN_HASHSIZE;
  while (size < (hashSize ?? DEFAULT_HASHSIZE)) size *= 2;
  return size;
}

/** Types whose last element part is a network (IP_SET_HASH_WITH_NETS): the part that `test` widens. */
const NET_PART: Partial<Record<SetType, 'cidr' | 'cidr2'>> = { 'hash:net': 'cidr', 'hash:ip,port,net': 'cidr2' };

interface FakeSet {
  name: string;
  type: SetType;
  family: IpsetFamily | null;
  spec: IpsetSetSpec;
  /** Element text (no options) -> entry (options kept for listing). */
  entries: Map<string, Entry>;
}

interface EntryFault {
  remaining: number;
  code: string;
  match: (op: 'add' | 'del', set: string, entry: string) => boolean;
}

function errnoOf(code: string): number {
  return C[code] ?? (os.errno as Record<string, number>)[code] ?? 0;
}

function kernelError(op: string, code: string, object?: string): NetlinkError {
  return new NetlinkError({ op, code, errno: errnoOf(code), ...(object !== undefined ? { object } : {}) });
}

function checkName(name: string, op: string, field: string): void {
  checkWith(setNameSchema, name, op, field);
}

/** Clears the host bits of a network, as the kernel stores hash:net elements (ip_set_mask_from_to / ip6_netmask). */
function maskAddr(a: Addr, cidr: number): Addr {
  if (typeof a === 'number') return cidr === 0 ? 0 : (a & ((0xffffffff << (32 - cidr)) >>> 0)) >>> 0;
  const out = new Uint8Array(16);
  for (let i = 0; i < 16; i++) {
    const bits = Math.max(0, Math.min(8, cidr - i * 8));
    out[i] = a[i]! & ((0xff << (8 - bits)) & 0xff);
  }
  return out;
}

/** The element alone (no options), canonical: the key of an entry in its set. */
function elementOf(type: SetType, e: Entry): string {
  const el: Entry = {};
  for (const k of ['ip', 'cidr', 'proto', 'port', 'ip2', 'cidr2'] as const) if (e[k] !== undefined) (el as Record<string, unknown>)[k] = e[k];
  if (el.ip !== undefined && el.cidr !== undefined) el.ip = maskAddr(el.ip, el.cidr);
  if (el.ip2 !== undefined && el.cidr2 !== undefined) el.ip2 = maskAddr(el.ip2, el.cidr2);
  return formatEntry(type, el);
}

/**
 * IpsetClient over in-memory sets with the kernel's answers: EEXIST for creating an existing set
 * (unless `exist` and the same type, family and options), ENOENT for a missing set (add/del/test
 * report it from their header lookup, op `ipset.header`, as the real client does),
 * IPSET_ERR_EXIST for adding an entry already in the set or deleting one that is not (unless
 * `exist`), IPSET_ERR_EXIST_SETNAME2 / IPSET_ERR_TYPE_MISMATCH for rename and swap,
 * IPSET_ERR_HASH_FULL, IPSET_ERR_BITMAP_RANGE, IPSET_ERR_TIMEOUT / _COMMENT / _COUNTER for
 * options the set lacks; ValidationError for what the real client rejects before sending.
 * Entries are keyed by their canonical element (hash:net host bits cleared); `test` matches exactly.
 */
export class FakeIpsetClient implements IpsetClient {
  readonly protocol = 7;
  private readonly sets = new Map<string, FakeSet>();
  /** Set names by index, as the kernel numbers sets: a new set takes the first free index; rename keeps it. */
  private readonly slots: Array<string | null> = [];
  private readonly entryFaults: EntryFault[] = [];
  private readonly callFaults = new Map<IpsetMethod, Error>();
  /** Calls per method. */
  readonly calls: Record<IpsetMethod, number> = { create: 0, destroy: 0, flush: 0, rename: 0, swap: 0, list: 0, listNames: 0, listHeaders: 0, header: 0, test: 0, add: 0, del: 0 };
  /** Entries received by add() and del() (failed ones included). */
  readonly entries = { add: 0, del: 0 };

  /** Zeroes the call and entry counters. */
  resetCounters(): void {
    for (const k of Object.keys(this.calls) as IpsetMethod[]) this.calls[k] = 0;
    this.entries.add = 0;
    this.entries.del = 0;
  }

  /** The next `count` entries of add/del matching `match` (default: any) fail with `code` (errno or IPSET_ERR_*). */
  failEntries(code: string, match: EntryFault['match'] = () => true, count = 1): void {
    this.entryFaults.push({ remaining: count, code, match });
  }

  /** The next call of `method` throws `error`. */
  failCall(method: IpsetMethod, error: Error): void {
    this.callFaults.set(method, error);
  }

  /** The elements of a set (canonical, no options), or undefined when there is no such set. */
  members(name: string): string[] | undefined {
    const s = this.sets.get(name);
    return s ? [...s.entries.keys()] : undefined;
  }

  private enter(method: IpsetMethod): void {
    this.calls[method]++;
    const fault = this.callFaults.get(method);
    if (fault) {
      this.callFaults.delete(method);
      throw fault;
    }
  }

  private find(name: string, op: string): FakeSet {
    const s = this.sets.get(name);
    if (!s) throw kernelError(op, 'ENOENT', name);
    return s;
  }

  async create(spec: IpsetSetSpec, options: IpsetAdtOptions = {}): Promise<void> {
    this.enter('create');
    checkWith(setSpecSchema, spec, 'ipset.create', 'set');
    const family = spec.type === 'bitmap:port' ? null : (spec.family ?? 'inet');
    const clash = this.sets.get(spec.name);
    if (clash) {
      // NOTE: ip_set_create() ignores the clash only with -exist, the same type and the same options
      // (same_set: hash table size, maxelem, timeout, extensions). Kernel 7.2 compares the family
      // too; 6.18 does not.
      const same = clash.type === spec.type && clash.family === family && JSON.stringify(normalizeSpec(clash.spec)) === JSON.stringify(normalizeSpec(spec));
      if (options.exist && same) return;
      throw kernelError('ipset.create', 'EEXIST', spec.name);
    }
    this.sets.set(spec.name, { name: spec.name, type: spec.type, family, spec: { ...spec }, entries: new Map() });
    const free = this.slots.indexOf(null);
    if (free >= 0) this.slots[free] = spec.name;
    else this.slots.push(spec.name);
  }

  /** The sets in index order. */
  private ordered(): FakeSet[] {
    return this.slots.flatMap((n) => (n === null ? [] : [this.sets.get(n)!]));
  }

  async destroy(name: string, options: IpsetAdtOptions = {}): Promise<void> {
    this.enter('destroy');
    checkName(name, 'ipset.destroy', 'name');
    if (this.sets.delete(name)) this.slots[this.slots.indexOf(name)] = null;
    else if (!options.exist) throw kernelError('ipset.destroy', 'ENOENT', name);
  }

  async flush(name: string): Promise<void> {
    this.enter('flush');
    checkName(name, 'ipset.flush', 'name');
    this.find(name, 'ipset.flush').entries.clear();
  }

  async rename(from: string, to: string): Promise<void> {
    this.enter('rename');
    checkName(from, 'ipset.rename', 'from');
    checkName(to, 'ipset.rename', 'to');
    const object = `${from} -> ${to}`;
    const s = this.sets.get(from);
    if (!s) throw kernelError('ipset.rename', 'ENOENT', object);
    if (this.sets.has(to)) throw kernelError('ipset.rename', 'IPSET_ERR_EXIST_SETNAME2', object);
    this.sets.delete(from);
    s.name = to;
    s.spec = { ...s.spec, name: to };
    this.sets.set(to, s);
    this.slots[this.slots.indexOf(from)] = to;
  }

  async swap(a: string, b: string): Promise<void> {
    this.enter('swap');
    checkName(a, 'ipset.swap', 'a');
    checkName(b, 'ipset.swap', 'b');
    const object = `${a} <-> ${b}`;
    const sa = this.sets.get(a);
    if (!sa) throw kernelError('ipset.swap', 'ENOENT', object);
    const sb = this.sets.get(b);
    if (!sb) throw kernelError('ipset.swap', 'IPSET_ERR_EXIST_SETNAME2', object);
    if (sa.type !== sb.type || sa.family !== sb.family) throw kernelError('ipset.swap', 'IPSET_ERR_TYPE_MISMATCH', object);
    this.sets.set(a, { ...sb, name: a, spec: { ...sb.spec, name: a } });
    this.sets.set(b, { ...sa, name: b, spec: { ...sa.spec, name: b } });
  }

  private info(s: FakeSet, withEntries = true): IpsetSetInfo {
    const hash = s.type !== 'bitmap:port';
    return {
      name: s.name,
      type: s.type,
      family: s.family,
      revision: REVISION,
      hashSize: hash ? tableSize(s.spec.hashSize) : null,
      maxElem: hash ? (s.spec.maxElem ?? DEFAULT_MAXELEM) : null,
      range: s.spec.range ?? null,
      timeout: s.spec.timeout ?? null,
      comment: s.spec.comment ?? false,
      counters: s.spec.counters ?? false,
      references: 0,
      memSize: 0,
      entries: withEntries ? [...s.entries.values()].map((e) => formatEntry(s.type, e)) : [],
    };
  }

  async list(name?: string): Promise<IpsetSetInfo[]> {
    this.enter('list');
    if (name === undefined) return this.ordered().map((s) => this.info(s));
    checkName(name, 'ipset.list', 'name');
    return [this.info(this.find(name, 'ipset.list'))];
  }

  async listNames(): Promise<string[]> {
    this.enter('listNames');
    return this.ordered().map((s) => s.name);
  }

  async listHeaders(): Promise<IpsetSetInfo[]> {
    this.enter('listHeaders');
    return this.ordered().map((s) => this.info(s, false));
  }

  async header(name: string): Promise<IpsetHeader> {
    this.enter('header');
    checkName(name, 'ipset.header', 'name');
    const s = this.find(name, 'ipset.header');
    return { name: s.name, type: s.type, family: s.family, revision: REVISION };
  }

  private parse(op: string, s: FakeSet, text: string): Entry {
    try {
      return parseEntry(s.type, s.family ?? 'inet', text);
    } catch (e) {
      if (e instanceof EntrySyntaxError) throw new ValidationError(op, `${s.name} entry ${JSON.stringify(text)}`, e.message);
      throw e;
    }
  }

  /** The set an add/del/test is about: a missing set is ENOENT from the header lookup, as NetlinkIpsetClient reports it. */
  private target(op: string, name: string): FakeSet {
    checkName(name, op, 'name');
    const s = this.find(name, 'ipset.header');
    if (!(SET_TYPES as readonly string[]).includes(s.type)) throw new ValidationError(op, name, `set type ${s.type} is not supported`);
    return s;
  }

  /**
   * True when the entry is in the set and not `nomatch`. NOTE: a host address in a network part
   * matches the most specific network of the set that holds it (mtype_test_cidrs in
   * ip_set_hash_gen.h); a network matches only itself.
   */
  async test(name: string, entry: string): Promise<boolean> {
    this.enter('test');
    const s = this.target('ipset.test', name);
    const e = this.parse('ipset.test', s, entry);
    const part = NET_PART[s.type];
    const host = (s.family ?? 'inet') === 'inet' ? 32 : 128;
    const cidrs = part && e[part] === host ? [...new Set([...s.entries.values()].map((x) => x[part]!))].sort((a, b) => b - a) : [e[part ?? 'cidr']];
    for (const cidr of cidrs) {
      const found = s.entries.get(elementOf(s.type, part ? { ...e, [part]: cidr } : e));
      if (found) return !found.nomatch;
    }
    return false;
  }

  async add(name: string, entries: readonly string[], options: IpsetAdtOptions = {}): Promise<IpsetEntryResult[]> {
    this.enter('add');
    return this.adt('add', name, entries, options);
  }

  async del(name: string, entries: readonly string[], options: IpsetAdtOptions = {}): Promise<IpsetEntryResult[]> {
    this.enter('del');
    return this.adt('del', name, entries, options);
  }

  private adt(kind: 'add' | 'del', name: string, texts: readonly string[], options: IpsetAdtOptions): IpsetEntryResult[] {
    const op = `ipset.${kind}`;
    this.entries[kind] += texts.length;
    if (texts.length === 0) return [];
    const s = this.target(op, name);
    return texts.map((text): IpsetEntryResult => {
      let e: Entry;
      try {
        e = this.parse(op, s, text);
      } catch (err) {
        if (err instanceof ValidationError) return { ok: false, error: err };
        throw err;
      }
      const fault = this.entryFaults.find((f) => f.remaining > 0 && f.match(kind, name, text));
      if (fault) {
        fault.remaining--;
        if (fault.remaining === 0) this.entryFaults.splice(this.entryFaults.indexOf(fault), 1);
        return { ok: false, error: kernelError(op, fault.code, `${name} ${text}`) };
      }
      const code = kind === 'add' ? this.addOne(s, e, options) : this.delOne(s, e, options);
      return code ? { ok: false, error: kernelError(op, code, `${name} ${text}`) } : { ok: true };
    });
  }

  private addOne(s: FakeSet, e: Entry, options: IpsetAdtOptions): string | null {
    if (e.timeout !== undefined && s.spec.timeout === undefined) return 'IPSET_ERR_TIMEOUT';
    if (e.comment !== undefined && !s.spec.comment) return 'IPSET_ERR_COMMENT';
    if ((e.packets !== undefined || e.bytes !== undefined) && !s.spec.counters) return 'IPSET_ERR_COUNTER';
    if (s.type === 'bitmap:port' && (e.port! < s.spec.range!.from || e.port! > s.spec.range!.to)) return 'IPSET_ERR_BITMAP_RANGE';
    const key = elementOf(s.type, e);
    const existing = s.entries.has(key);
    if (existing && !options.exist) return 'IPSET_ERR_EXIST';
    if (!existing && s.type !== 'bitmap:port' && s.entries.size >= (s.spec.maxElem ?? DEFAULT_MAXELEM)) return 'IPSET_ERR_HASH_FULL';
    const stored: Entry = { ...e };
    if (stored.ip !== undefined && stored.cidr !== undefined) stored.ip = maskAddr(stored.ip, stored.cidr);
    if (stored.ip2 !== undefined && stored.cidr2 !== undefined) stored.ip2 = maskAddr(stored.ip2, stored.cidr2);
    if (s.spec.timeout !== undefined && stored.timeout === undefined) stored.timeout = s.spec.timeout;
    if (s.spec.counters) {
      stored.packets ??= 0n;
      stored.bytes ??= 0n;
    }
    s.entries.set(key, stored);
    return null;
  }

  private delOne(s: FakeSet, e: Entry, options: IpsetAdtOptions): string | null {
    const key = elementOf(s.type, e);
    // NOTE: the kernel answers a delete of an absent element with -IPSET_ERR_EXIST (ip_set_core.c call_ad()).
    if (!s.entries.delete(key) && !options.exist) return 'IPSET_ERR_EXIST';
    return null;
  }

  close(): void {}
}

/** The options that make two creates "the same set" for -exist. */
function normalizeSpec(s: IpsetSetSpec): unknown {
  const hash = s.type !== 'bitmap:port';
  return [hash ? tableSize(s.hashSize) : null, hash ? (s.maxElem ?? DEFAULT_MAXELEM) : null, s.range ?? null, s.timeout ?? null, !!s.comment, !!s.counters];
}
