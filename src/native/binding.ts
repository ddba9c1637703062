// The only file that loads the native addon (build/Release/kube_ipvs_proxy.node).
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Attributes of one message or nest, keyed by the schema's JS names. */
export type NlAttrs = Record<string, unknown>;

/** A decoded netlink data message. */
export interface NlMessage<A = NlAttrs> {
  type: number;
  flags: number;
  seq: number;
  pid: number;
  header: Record<string, number>;
  attrs: A;
}

/** A decoded NLMSG_ERROR or NLMSG_DONE message (from `decode`). */
export interface NlControl {
  type: number;
  flags: number;
  seq: number;
  pid: number;
  errno: number;
  extAck?: string;
  /** The request echoed in full by the error (ipset's ADD/DEL errors carry the failing LINENO). */
  echo?: NlMessage;
}

/** A request: message type, extra flags (REQUEST/ACK/DUMP are added), fixed header fields, attributes. */
export interface NlRequest {
  type: number;
  flags?: number;
  header?: Record<string, number>;
  attrs?: NlAttrs;
}

/** The kernel's answer to one op of a batch: errno 0 = acknowledged. */
export interface NlOpResult {
  errno: number;
  code?: string;
  extAck?: string;
  replies?: NlMessage[];
  /** The request echoed in full by the error (ipset's ADD/DEL errors carry the failing LINENO). */
  echo?: NlMessage;
}

/** Bounds of one sendmsg within a batch. */
export interface BatchLimits {
  maxMessages?: number;
  maxBytes?: number;
  /**
   * Run the call on the JS thread (the promise is settled when batch() returns): for a few ops the
   * kernel answers at once, and the trip to libuv's thread and back costs more than its work.
   */
  inline?: boolean;
  /**
   * Ack only the last message of each sendmsg; the others are answered only when they fail (an op
   * not answered before that ack succeeded). For change batches: one ack skb per chunk, not per op.
   */
  errorsOnly?: boolean;
}

/** Dump options: attribute names (at any depth) the decoder skips, e.g. unneeded counters. */
export interface DumpOptions {
  /** Attribute names the decoder skips (at any depth). */
  omit?: string[];
  /**
   * Keeps only the replies whose fixed-header field (e.g. rtnl.addr's `index`) is `in` the list,
   * or `notIn` it (exactly one of the two); the others are dropped before decoding, off the JS
   * thread. An unknown field is a TypeError.
   */
  where?: { field: string; in: number[] } | { field: string; notIn: number[] };
  /** One columnar result (DumpTable) decoded off the JS thread, instead of message objects. */
  table?: boolean;
}

/** One column of a DumpTable: a value per row; `present[row]` is 0 where the reply lacked it. */
export type TableColumn =
  | { kind: 'number'; present: Uint8Array; numbers: Float64Array }
  | { kind: 'string'; present: Uint8Array; codes: Uint32Array; dict: string[] }
  | { kind: 'bytes'; present: Uint8Array; offsets: Uint32Array; bytes: Uint8Array }
  | { kind: 'flag'; present: Uint8Array };

/**
 * A dump's replies as columns (DumpOptions.table): one row per reply, one column per attribute
 * path (`service.addr`; fixed-header fields as `header.<name>`); integers as numbers (64-bit ones
 * too, rounded as Number() does). A list attribute is a table of its own in `lists` (one row per
 * element, columns relative to the element; `parent`: the row it belongs to). dumpMany: dump k's
 * rows are starts[k] .. starts[k + 1] - 1.
 */
export interface DumpTable {
  rows: number;
  starts?: Uint32Array;
  columns: Record<string, TableColumn>;
  lists?: Record<string, ListTable>;
}

/** The elements of one list attribute of a DumpTable's rows. */
export interface ListTable extends DumpTable {
  parent: Uint32Array;
}

/** A netlink socket owned by the addon; calls run on the libuv thread pool. */
export interface NativeSocket {
  /** `requests`: message objects, or Uint8Arrays of whole messages already laid out (one result per message). */
  batch(schema: string, requests: Array<NlRequest | Uint8Array>, limits?: BatchLimits): Promise<NlOpResult[]>;
  dump(schema: string, request: NlRequest, options: DumpOptions & { table: true }): Promise<DumpTable>;
  dump(schema: string, request: NlRequest, options?: DumpOptions): Promise<NlMessage[]>;
  /** Runs the dumps one after another in a single trip off the JS thread; their replies as one table (`starts`). */
  dumpMany(schema: string, requests: NlRequest[], options?: DumpOptions): Promise<DumpTable>;
  close(): void;
  readonly portId: number;
}

/** Constants read from the kernel UAPI headers at build time, grouped by protocol. */
export type ConstantGroup = Record<string, number> & Record<`${string}_NAME`, string>;

/** The addon's exports. */
export interface NativeAddon {
  Socket: new (protocol: number) => NativeSocket;
  encode(schema: string, requests: Array<NlRequest | Uint8Array>, firstSeq?: number, pid?: number): Buffer;
  decode(schema: string, buffer: Uint8Array): Array<NlMessage | NlControl>;
  /** The data messages of a buffer as a dump table (what DumpOptions.table returns), for tests. */
  decodeTable(schema: string, buffer: Uint8Array, omit?: string[]): DumpTable;
  errnoName(errno: number): string;
  schemaNames(): string[];
  /** Returns unused memory to the kernel: V8 (full: a blocking compacting GC; else an incremental one) and glibc (malloc_trim). */
  releaseMemory(full: boolean): void;
  /**
   * One legacy iptables table as the kernel holds it (getsockopt SO_GET_INFO / SO_GET_ENTRIES),
   * every rule's counters zeroed: equal bytes, same rules. Rejects with code (ENOENT: no such
   * table) and syscall.
   */
  xtablesTable(family: 4 | 6, table: string): Promise<Buffer>;
  constants: Record<string, ConstantGroup>;
}

function findAddon(): string {
  if (process.env.KIP_ADDON_PATH) return process.env.KIP_ADDON_PATH;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    const candidate = join(dir, 'build', 'Release', 'kube_ipvs_proxy.node');
    if (existsSync(candidate)) return candidate;
    dir = dirname(dir);
  }
  throw new Error('native addon not built: run `npm ci` (or `npx node-gyp rebuild`)');
}

/** The loaded addon. */
export const native: NativeAddon = createRequire(import.meta.url)(findAddon()) as NativeAddon;

/** Typed access to one constant group; throws on a name the addon does not export. */
export function constantsOf(group: string): ConstantGroup {
  const g = native.constants[group];
  if (!g) throw new Error(`native addon has no constant group ${group}`);
  return g;
}
