// The ipset client: set commands, batched ADD/DEL with one result per entry, list dumps.
import { constantsOf, type NlRequest } from '../../native/binding.js';
import { lazy, lazySchema, zod, type Zod } from '../../zod.js';
import { checkWith as check, NetlinkError, ValidationError } from '../errors.js';
import { NetlinkConnection, OK, type OpOutcome } from '../netlink.js';
import {
  FAMILY_NUMBER,
  NFGEN_HEADER,
  entryAttrs,
  entryColumns,
  entrySize,
  headerOf,
  isColumnar,
  listedSets,
  msgType,
  nameTypeSpecific,
  type IpsetAttrs,
} from './codec.js';
import { EntrySyntaxError, MAX_TIMEOUT, parseEntry, type Entry } from './entry.js';
import {
  SET_TYPES,
  type IpsetAdtOptions,
  type IpsetClient,
  type IpsetEntryResult,
  type IpsetHeader,
  type IpsetSetInfo,
  type IpsetSetSpec,
  type SetType,
} from './types.js';

const C = constantsOf('ipset');
const N = constantsOf('netlink');

/**
 * The newest revision of each type this client creates: ipset 7.17's maxima, so that sets we
 * create stay readable by `ipset list`. The kernel's own maximum (IPSET_CMD_TYPE) caps it.
 */
export const MAX_REVISION: Record<SetType, number> = {
  'hash:ip': 6,
  'hash:ip,port': 7,
  'hash:ip,port,ip': 6,
  'hash:ip,port,net': 8,
  'hash:net': 7,
  'bitmap:port': 3,
};

/**
 * Bytes of entries per ADD/DEL message. NOTE: on a failing entry call_ad() (ip_set_core.c)
 * echoes the whole message back; it must fit the addon's 64 KiB receive slot.
 */
const MAX_ADT_BYTES = 32 * 1024;

/** At most IPSET_MAXNAMELEN - 1 bytes, no NUL (the schema checks the length of 1 first). */
const fitsSetName = (s: string): boolean => Buffer.byteLength(s) < C.IPSET_MAXNAMELEN! && !s.includes('\0');

/** A name the kernel takes for a set: 1 to IPSET_MAXNAMELEN - 1 bytes, no NUL. */
function isSetName(s: unknown): s is string {
  return typeof s === 'string' && s.length > 0 && fitsSetName(s);
}

/** The schemas, made with `z` (zod.ts: built on first use). */
function build(z: Zod) {
  const name = z
    .string()
    .min(1)
    .refine(fitsSetName, `at most ${C.IPSET_MAXNAMELEN! - 1} bytes, no NUL`);
  const u32 = z.number().int().min(1).max(0xffffffff);
  const spec = z
    .object({
      name,
      type: z.enum(SET_TYPES),
      family: z.enum(['inet', 'inet6']).optional(),
      hashSize: z.number().int().min(1).max(0x80000000).optional(),
      maxElem: u32.optional(),
      range: z.object({ from: z.number().int().min(0).max(65535), to: z.number().int().min(0).max(65535) }).optional(),
      timeout: z.number().int().min(0).max(MAX_TIMEOUT).optional(),
      comment: z.boolean().optional(),
      counters: z.boolean().optional(),
    })
    .strict()
    .superRefine((s, ctx) => {
      const bitmap = s.type === 'bitmap:port';
      if (bitmap !== (s.range !== undefined)) ctx.addIssue({ code: 'custom', path: ['range'], message: bitmap ? 'bitmap:port needs a range' : `${s.type} takes no range` });
      if (s.range && s.range.from > s.range.to) ctx.addIssue({ code: 'custom', path: ['range'], message: 'from > to' });
      if (bitmap && (s.hashSize !== undefined || s.maxElem !== undefined))
        ctx.addIssue({ code: 'custom', path: ['hashSize'], message: 'bitmap:port takes no hashSize or maxElem' });
    });
  return { name, spec };
}

const schemas = lazy(() => build(zod()));

/** Validates a set name. */
export const setNameSchema = lazySchema(() => schemas().name);
/** Validates an IpsetSetSpec. */
export const setSpecSchema = lazySchema(() => schemas().spec);

const SPEC_KEYS: ReadonlySet<string> = new Set(['name', 'type', 'family', 'hashSize', 'maxElem', 'range', 'timeout', 'comment', 'counters']);
const intIn = (v: unknown, min: number, max: number): v is number => Number.isSafeInteger(v) && (v as number) >= min && (v as number) <= max;
const optional = (v: unknown, ok: (x: unknown) => boolean): boolean => v === undefined || ok(v);

/**
 * True when `s` is a valid IpsetSetSpec, checked without zod (the daemon creates its sets at
 * every start). False does not mean invalid: setSpecSchema then decides and names the field.
 */
export function isPlainSetSpec(s: unknown): boolean {
  if (typeof s !== 'object' || s === null || Object.getPrototypeOf(s) !== Object.prototype) return false;
  const o = s as Record<string, unknown>;
  for (const k in o) if (!SPEC_KEYS.has(k)) return false;
  const { type, range, hashSize, maxElem } = o;
  if (!isSetName(o.name) || !SET_TYPES.includes(type as SetType) || !optional(o.family, (f) => f === 'inet' || f === 'inet6')) return false;
  if (!optional(hashSize, (v) => intIn(v, 1, 0x80000000)) || !optional(maxElem, (v) => intIn(v, 1, 0xffffffff)) || !optional(o.timeout, (v) => intIn(v, 0, MAX_TIMEOUT))) return false;
  if (!optional(o.comment, (v) => typeof v === 'boolean') || !optional(o.counters, (v) => typeof v === 'boolean')) return false;
  const bitmap = type === 'bitmap:port';
  if (bitmap !== (range !== undefined) || (bitmap && (hashSize !== undefined || maxElem !== undefined))) return false;
  if (range === undefined) return true;
  if (typeof range !== 'object' || range === null || Object.getPrototypeOf(range) !== Object.prototype) return false;
  const { from, to } = range as Record<string, unknown>;
  return intIn(from, 0, 65535) && intIn(to, 0, 65535) && from <= to;
}

/** Throws a ValidationError naming `what` unless `name` is a set name. */
function checkName(name: unknown, op: string, what: string): void {
  if (!isSetName(name)) check(setNameSchema, name, op, what);
}

/** The same error, about one entry of a set. */
function aboutEntry(e: NetlinkError, set: string, entry: string): NetlinkError {
  const init = { op: e.op, code: e.code, errno: e.errno, object: `${set} ${entry}` } as ConstructorParameters<typeof NetlinkError>[0];
  if (e.extAck) init.extAck = e.extAck;
  return new NetlinkError(init);
}

/** Asks the kernel's ipset protocol: 7 when it speaks it, else 6 (IPSET_PROTOCOL_MIN). */
async function negotiate(conn: NetlinkConnection): Promise<number> {
  const op = 'ipset.protocol';
  const req = { type: msgType(C.IPSET_CMD_PROTOCOL!), header: NFGEN_HEADER, attrs: { protocol: C.IPSET_PROTOCOL! } };
  let replies;
  try {
    replies = await conn.request('ipset', req, op);
  } catch (e) {
    if (e instanceof NetlinkError && e.code === 'EOPNOTSUPP')
      throw new NetlinkError({ op, code: e.code, errno: e.errno, message: `${op}: the kernel has no ipset support (module ip_set)` });
    throw e;
  }
  const a = (replies[0]?.attrs ?? {}) as IpsetAttrs;
  const max = a.protocol ?? 0;
  const min = a.protocolMin ?? max;
  if (max >= C.IPSET_PROTOCOL! && min <= C.IPSET_PROTOCOL!) return C.IPSET_PROTOCOL!;
  if (max === C.IPSET_PROTOCOL_MIN!) return max;
  const errno = C.IPSET_ERR_PROTOCOL!;
  throw new NetlinkError({ op, code: 'IPSET_ERR_PROTOCOL', errno, message: `${op}: kernel speaks ipset protocol ${min}..${max}, we speak 6..7` });
}

/** IpsetClient over an nfnetlink socket. */
export class NetlinkIpsetClient implements IpsetClient {
  private readonly revisions = new Map<string, number>();

  private constructor(
    private readonly conn: NetlinkConnection,
    readonly protocol: number,
  ) {}

  /** Opens a NETLINK_NETFILTER socket and negotiates the protocol version. */
  static async open(): Promise<NetlinkIpsetClient> {
    const conn = new NetlinkConnection(N.NETLINK_NETFILTER!);
    try {
      return new NetlinkIpsetClient(conn, await negotiate(conn));
    } catch (e) {
      conn.close();
      throw e;
    }
  }

  /** A client over a connection it then owns, speaking `protocol` (no negotiation): for tests. */
  static fromConnection(conn: NetlinkConnection, protocol: number): NetlinkIpsetClient {
    return new NetlinkIpsetClient(conn, protocol);
  }

  /** A request of this client's protocol; `attrs` after PROTOCOL. */
  request(cmd: number, attrs: Record<string, unknown>, flags = 0): NlRequest {
    return { type: msgType(cmd), flags, header: NFGEN_HEADER, attrs: { protocol: this.protocol, ...attrs } };
  }

  private async call(cmd: number, attrs: Record<string, unknown>, op: string, object?: string, flags = 0) {
    return this.conn.request('ipset', this.request(cmd, attrs, flags), op, object);
  }

  /** The revision to create `type` with: the kernel's newest, capped at MAX_REVISION. */
  async revision(type: SetType, family: number): Promise<number> {
    const key = `${type}/${family}`;
    const cached = this.revisions.get(key);
    if (cached !== undefined) return cached;
    const [reply] = await this.call(C.IPSET_CMD_TYPE!, { typeName: type, family }, 'ipset.type', type);
    const a = (reply?.attrs ?? {}) as IpsetAttrs;
    const rev = Math.min(a.revision ?? 0, MAX_REVISION[type]);
    if (rev < (a.protocolMin ?? 0)) {
      const errno = C.IPSET_ERR_FIND_TYPE!;
      throw new NetlinkError({ op: 'ipset.type', code: 'IPSET_ERR_FIND_TYPE', errno, object: type, message: `ipset.type ${type}: kernel revisions ${a.protocolMin}..${a.revision}, we know up to ${MAX_REVISION[type]}` });
    }
    this.revisions.set(key, rev);
    return rev;
  }

  async create(set: IpsetSetSpec, options: IpsetAdtOptions = {}): Promise<void> {
    if (!isPlainSetSpec(set)) check(setSpecSchema, set, 'ipset.create', 'set');
    const bitmap = set.type === 'bitmap:port';
    const family = bitmap ? 0 : FAMILY_NUMBER[set.family ?? 'inet'];
    const data: Record<string, number> = {};
    if (set.range) Object.assign(data, { port: set.range.from, portTo: set.range.to });
    if (set.hashSize !== undefined) data.hashSize = set.hashSize;
    if (set.maxElem !== undefined) data.maxElem = set.maxElem;
    if (set.timeout !== undefined) data.timeout = set.timeout;
    const cadt = (set.counters ? C.IPSET_FLAG_WITH_COUNTERS! : 0) | (set.comment ? C.IPSET_FLAG_WITH_COMMENT! : 0);
    if (cadt) data.cadtFlags = cadt;
    const revision = await this.revision(set.type, family);
    const flags = N.NLM_F_CREATE! | (options.exist ? 0 : N.NLM_F_EXCL!);
    const attrs = { name: set.name, typeName: set.type, revision, family, data };
    await this.call(C.IPSET_CMD_CREATE!, attrs, 'ipset.create', set.name, flags);
  }

  async destroy(name: string, options: IpsetAdtOptions = {}): Promise<void> {
    checkName(name, 'ipset.destroy', 'name');
    await this.call(C.IPSET_CMD_DESTROY!, { name }, 'ipset.destroy', name, options.exist ? 0 : N.NLM_F_EXCL!);
  }

  async flush(name: string): Promise<void> {
    checkName(name, 'ipset.flush', 'name');
    await this.call(C.IPSET_CMD_FLUSH!, { name }, 'ipset.flush', name);
  }

  async rename(from: string, to: string): Promise<void> {
    checkName(from, 'ipset.rename', 'from');
    checkName(to, 'ipset.rename', 'to');
    await this.call(C.IPSET_CMD_RENAME!, { name: from, typeName: to }, 'ipset.rename', `${from} -> ${to}`);
  }

  async swap(a: string, b: string): Promise<void> {
    checkName(a, 'ipset.swap', 'a');
    checkName(b, 'ipset.swap', 'b');
    await this.call(C.IPSET_CMD_SWAP!, { name: a, typeName: b }, 'ipset.swap', `${a} <-> ${b}`);
  }

  async list(name?: string): Promise<IpsetSetInfo[]> {
    if (name !== undefined) checkName(name, 'ipset.list', 'name');
    return listedSets(await this.conn.dumpTable('ipset', this.request(C.IPSET_CMD_LIST!, name === undefined ? {} : { name }), 'ipset.list', name));
  }

  async listNames(): Promise<string[]> {
    const req = this.request(C.IPSET_CMD_LIST!, { flags: C.IPSET_FLAG_LIST_SETNAME! });
    const msgs = await this.conn.dump('ipset', req, 'ipset.listNames');
    return msgs.map((m) => (m.attrs as IpsetAttrs).name ?? '');
  }

  async listHeaders(): Promise<IpsetSetInfo[]> {
    const req = this.request(C.IPSET_CMD_LIST!, { flags: C.IPSET_FLAG_LIST_HEADER! });
    return listedSets(await this.conn.dumpTable('ipset', req, 'ipset.listHeaders'));
  }

  async header(name: string): Promise<IpsetHeader> {
    checkName(name, 'ipset.header', 'name');
    const [reply] = await this.call(C.IPSET_CMD_HEADER!, { name }, 'ipset.header', name);
    return headerOf((reply?.attrs ?? {}) as IpsetAttrs);
  }

  /** The set's type (supported ones only) and family, for parsing its entries. */
  private async entryType(op: string, name: string): Promise<{ type: SetType; family: 'inet' | 'inet6' }> {
    checkName(name, op, 'name');
    const h = await this.header(name);
    if (!(SET_TYPES as readonly string[]).includes(h.type)) throw new ValidationError(op, name, `set type ${h.type} is not supported`);
    return { type: h.type as SetType, family: h.family ?? 'inet' };
  }

  async test(name: string, entry: string): Promise<boolean> {
    const op = 'ipset.test';
    const { type, family } = await this.entryType(op, name);
    const e = this.parse(op, name, type, family, entry);
    const data = entryAttrs(e);
    try {
      await this.conn.request('ipset.adt', this.request(C.IPSET_CMD_TEST!, { name, data }), op, `${name} ${entry}`);
      return true;
    } catch (err) {
      // NOTE: ip_set_utest() answers "not in set" as -IPSET_ERR_EXIST.
      if (err instanceof NetlinkError && err.code === 'IPSET_ERR_EXIST') return false;
      throw err instanceof NetlinkError ? nameTypeSpecific(err, type) : err;
    }
  }

  private parse(op: string, name: string, type: SetType, family: 'inet' | 'inet6', text: string): Entry {
    try {
      return parseEntry(type, family, text);
    } catch (e) {
      if (e instanceof EntrySyntaxError) throw new ValidationError(op, `${name} entry ${JSON.stringify(text)}`, e.message);
      throw e;
    }
  }

  add(name: string, entries: readonly string[], options: IpsetAdtOptions = {}): Promise<IpsetEntryResult[]> {
    return this.adt(C.IPSET_CMD_ADD!, 'ipset.add', name, entries, options);
  }

  del(name: string, entries: readonly string[], options: IpsetAdtOptions = {}): Promise<IpsetEntryResult[]> {
    return this.adt(C.IPSET_CMD_DEL!, 'ipset.del', name, entries, options);
  }

  /**
   * ADD/DEL: entries go many per message (IPSET_ATTR_ADT, each with its LINENO = index + 1),
   * many messages per sendmsg. NOTE: the kernel stops a message at its first failing entry
   * (ip_set_ad() in ip_set_core.c) and echoes that entry's LINENO: the entries before it were
   * applied, the rest are sent again in a next round, in smaller messages. A message failing
   * without a LINENO (the whole message rejected) is retried one entry per message.
   */
  private async adt(cmd: number, op: string, name: string, texts: readonly string[], options: IpsetAdtOptions): Promise<IpsetEntryResult[]> {
    const results: IpsetEntryResult[] = new Array(texts.length);
    if (texts.length === 0) return results;
    const { type, family } = await this.entryType(op, name);
    const parsed: Entry[] = new Array(texts.length);
    let pending: number[] = [];
    for (let i = 0; i < texts.length; i++) {
      try {
        parsed[i] = this.parse(op, name, type, family, texts[i]!);
        pending.push(i);
      } catch (e) {
        if (!(e instanceof ValidationError)) throw e;
        results[i] = { ok: false, error: e };
      }
    }
    const flags = options.exist ? 0 : N.NLM_F_EXCL!;
    let maxEntries = Number.MAX_SAFE_INTEGER;
    while (pending.length > 0) {
      const chunks = chunkEntries(pending, parsed, maxEntries);
      const reqs = chunks.map((c) => this.adtRequest(cmd, flags, name, c, parsed));
      const outcomes = await this.conn.batch('ipset.adt', reqs, () => ({ op, object: name }));
      const next: number[] = [];
      let whole = false;
      outcomes.forEach((o, j) => {
        const chunk = chunks[j]!;
        const settled = settle(o, chunk, type, name, texts, results);
        if (settled < 0) whole = true;
        next.push(...chunk.slice(settled < 0 ? 0 : settled));
      });
      maxEntries = whole ? 1 : Math.max(1, Math.floor(Math.max(...chunks.map((c) => c.length)) / 16));
      pending = next;
    }
    return results;
  }

  private adtRequest(cmd: number, flags: number, name: string, chunk: readonly number[], parsed: readonly Entry[]): NlRequest {
    const entries = chunk.map((i) => parsed[i]!);
    const linenos = chunk.map((i) => i + 1);
    const adt = entries.every(isColumnar) ? entryColumns(entries, linenos) : entries.map((e, k) => entryAttrs(e, linenos[k]));
    return this.request(cmd, { name, lineno: linenos[0], adt }, flags);
  }

  close(): void {
    this.conn.close();
  }
}

/** Splits entries (indexes into `parsed`) into messages of at most MAX_ADT_BYTES and `maxEntries`. */
function chunkEntries(pending: readonly number[], parsed: readonly Entry[], maxEntries: number): number[][] {
  const chunks: number[][] = [];
  let chunk: number[] = [];
  let bytes = 0;
  for (const i of pending) {
    const size = entrySize(parsed[i]!);
    if (chunk.length > 0 && (chunk.length >= maxEntries || bytes + size > MAX_ADT_BYTES)) {
      chunks.push(chunk);
      chunk = [];
      bytes = 0;
    }
    chunk.push(i);
    bytes += size;
  }
  if (chunk.length > 0) chunks.push(chunk);
  return chunks;
}

/**
 * Records the results one message settled and returns how many leading entries of `chunk`
 * it settled (the rest go to the next round), or -1 when it settled none and the rest must
 * be retried one entry per message.
 */
function settle(o: OpOutcome, chunk: readonly number[], type: string, name: string, texts: readonly string[], results: IpsetEntryResult[]): number {
  if (o.ok) {
    for (const i of chunk) results[i] = OK;
    return chunk.length;
  }
  const error = nameTypeSpecific(o.error, type);
  const lineno = (o.echo?.attrs as IpsetAttrs | undefined)?.lineno;
  const at = lineno === undefined ? -1 : chunk.indexOf(lineno - 1);
  if (at < 0 && chunk.length > 1) return -1;
  const failed = at < 0 ? 0 : at;
  for (let k = 0; k < failed; k++) results[chunk[k]!] = OK;
  results[chunk[failed]!] = { ok: false, error: aboutEntry(error, name, texts[chunk[failed]!]!) };
  return failed + 1;
}
