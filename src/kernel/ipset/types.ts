// ipset sets and entries as the rest of the program sees them. Entries are ipset's own text
// (`10.0.0.1,tcp:80`, `10.0.0.0/24`, `80`), the format `ipset list` / `ipset save` print.
import type { NetlinkError, ValidationError } from '../errors.js';

/** Set types this client creates, parses and formats. */
export const SET_TYPES = ['hash:ip', 'hash:ip,port', 'hash:ip,port,ip', 'hash:ip,port,net', 'hash:net', 'bitmap:port'] as const;
/** A supported set type. */
export type SetType = (typeof SET_TYPES)[number];

/** Address family of a set, named as ipset names it; bitmap:port has none (null). */
export type IpsetFamily = 'inet' | 'inet6';

/** A set to create. `family` defaults to inet (ignored by bitmap:port); `range` is bitmap:port's. */
export interface IpsetSetSpec {
  name: string;
  type: SetType;
  family?: IpsetFamily;
  hashSize?: number;
  maxElem?: number;
  range?: { from: number; to: number };
  /** Default entry timeout in seconds; makes the set a timeout set (0 = entries without expiry). */
  timeout?: number;
  /** Entries may carry a comment. */
  comment?: boolean;
  /** Entries carry packet and byte counters. */
  counters?: boolean;
}

/** A set's identity as IPSET_CMD_HEADER reports it. */
export interface IpsetHeader {
  name: string;
  type: string;
  family: IpsetFamily | null;
  revision: number;
}

/** A set as listed: header, sizes and every entry as `ipset list` prints its members. */
export interface IpsetSetInfo extends IpsetHeader {
  hashSize: number | null;
  maxElem: number | null;
  range: { from: number; to: number } | null;
  timeout: number | null;
  comment: boolean;
  counters: boolean;
  references: number;
  memSize: number;
  /** Members: element, then ` timeout N`, ` nomatch`, ` packets N bytes N`, ` comment "…"` as ipset prints them. */
  entries: string[];
}

/** What one entry of an add/del came to. */
export type IpsetEntryResult = { ok: true } | { ok: false; error: NetlinkError | ValidationError };

/** Options of add/del: `exist` is ipset's -exist (no error for an entry already added / not there). */
export interface IpsetAdtOptions {
  exist?: boolean;
}

/** Everything the proxy needs from ipset; implemented over netlink (and by a test fake). */
export interface IpsetClient {
  /** The nfnetlink ipset protocol version in use (7, or 6 on old kernels). */
  readonly protocol: number;
  create(set: IpsetSetSpec, options?: IpsetAdtOptions): Promise<void>;
  /** Destroys one set; `exist` makes a missing set no error. */
  destroy(name: string, options?: IpsetAdtOptions): Promise<void>;
  flush(name: string): Promise<void>;
  rename(from: string, to: string): Promise<void>;
  swap(a: string, b: string): Promise<void>;
  /** One set (throws ENOENT when missing) or every set, with their entries. */
  list(name?: string): Promise<IpsetSetInfo[]>;
  /** The names of every set. */
  listNames(): Promise<string[]>;
  /** Every set's header and sizes (maxelem, hashsize, range), without entries (`ipset list -t`). */
  listHeaders(): Promise<IpsetSetInfo[]>;
  header(name: string): Promise<IpsetHeader>;
  /** True when the entry is in the set. */
  test(name: string, entry: string): Promise<boolean>;
  /** Adds entries, batched; one result per entry, in order. Invalid entries fail alone. */
  add(name: string, entries: readonly string[], options?: IpsetAdtOptions): Promise<IpsetEntryResult[]>;
  /** Deletes entries, batched; one result per entry, in order. */
  del(name: string, entries: readonly string[], options?: IpsetAdtOptions): Promise<IpsetEntryResult[]>;
  close(): void;
}
