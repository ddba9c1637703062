/** An xtables table. */
export type Table = 'filter' | 'nat' | 'mangle' | 'raw' | 'security';

/** Address family: iptables (ipv4) or ip6tables (ipv6). */
export type Family = 'ipv4' | 'ipv6';

/** Which kernel API the iptables binaries drive. */
export type Backend = 'nft' | 'legacy';

/** One rule: the argv tokens after `-A CHAIN`, unquoted (the renderer quotes). */
export type Rule = readonly string[];

/** An owned chain and its complete, ordered rule list. */
export interface ChainSpec {
  name: string;
  rules: readonly Rule[];
}

/** A rule to ensure (idempotently) in a chain we do not own, typically a jump from a built-in chain. */
export interface JumpSpec {
  chain: string;
  rule: Rule;
  /** `first` inserts with -I (default), `last` appends with -A; only when missing. */
  position?: 'first' | 'last';
}

/** Desired state of one table: every owned chain we want, plus the jumps into chains we don't own. */
export interface TableSpec {
  table: Table;
  chains: readonly ChainSpec[];
  jumps?: readonly JumpSpec[];
}

/** Decides which chains this proxy owns (may flush, rewrite and delete). */
export type OwnedPredicate = (chain: string, table: Table) => boolean;

/** A rule as read back from iptables-save. */
export interface SavedRule {
  /** Tokens after `-A CHAIN`, unquoted. */
  args: string[];
  /** The line as printed (`-A CHAIN ...`), without the `[p:b]` counters prefix. */
  line: string;
  counters?: Counters;
}

/** Packet and byte counters as printed by iptables-save (`[packets:bytes]`). */
export interface Counters {
  packets: number;
  bytes: number;
}

/** A chain as read back from iptables-save. */
export interface SavedChain {
  name: string;
  /** The policy of a built-in chain (`ACCEPT`, `DROP`), null for user-defined chains. */
  policy: string | null;
  counters?: Counters;
  rules: SavedRule[];
}

/** A table as read back from iptables-save, chains in printed order. */
export interface SavedTable {
  table: string;
  chains: SavedChain[];
}
