// What the driver last wrote to each owned chain, so that a full sync rewrites only the chains
// that differ. A chain is left alone when its wanted rules are the ones last written and
// iptables-save prints it as it did when it was first read back after that write (the tools
// print rules in their own canonical form, so our text cannot be compared with theirs; their
// own print can). On that first read back, the chain must at least have as many rules as written,
// each with the same jump target, or it is rewritten. Anything else (a chain flushed, deleted or
// edited by hand, a restore that failed half way) rewrites it.
import { ruleTarget } from './syntax.js';
import type { ChainSpec, Rule, SavedChain, Table } from './types.js';

interface Entry {
  want: number;
  /** Hash of iptables-save's rule lines, once read back after the write. */
  print?: number;
}

/** A 53-bit FNV-1a hash (two 32-bit lanes) of strings fed in order, each ended by a separator. */
class Hash {
  private a = 0x811c9dc5;
  private b = 0x01000193;
  add(s: string): this {
    let { a, b } = this;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      a = Math.imul(a ^ c, 0x01000193);
      b = Math.imul(b ^ c, 0x5bd1e995);
    }
    this.a = Math.imul(a ^ 10, 0x01000193);
    this.b = Math.imul(b ^ 10, 0x5bd1e995);
    return this;
  }
  value(): number {
    return (this.a >>> 0) * 0x200000 + ((this.b >>> 0) & 0x1fffff);
  }
}

function rulesHash(rules: readonly Rule[]): number {
  const h = new Hash();
  for (const r of rules) {
    for (const t of r) h.add(t);
    h.add('\u0000');
  }
  return h.value();
}

function printHash(chain: SavedChain): number {
  const h = new Hash();
  for (const r of chain.rules) h.add(r.line);
  return h.value();
}

/** The chains one driver wrote, per table; see the file comment. */
export class WrittenChains {
  private readonly tables = new Map<Table, Map<string, Entry>>();

  private table(t: Table): Map<string, Entry> {
    let m = this.tables.get(t);
    if (!m) this.tables.set(t, (m = new Map()));
    return m;
  }

  /** True when `chain` may be left as `saved` shows it (and learns the print on the first read back). */
  unchanged(table: Table, chain: ChainSpec, saved: SavedChain | undefined): boolean {
    const e = this.tables.get(table)?.get(chain.name);
    if (e === undefined || saved === undefined || e.want !== rulesHash(chain.rules)) return false;
    const print = printHash(saved);
    if (e.print !== undefined) return e.print === print;
    if (saved.rules.length !== chain.rules.length) return false;
    for (let i = 0; i < chain.rules.length; i++) if (ruleTarget(saved.rules[i]!.args) !== ruleTarget(chain.rules[i]!)) return false;
    e.print = print;
    return true;
  }

  /** After a successful restore: these chains now hold these rules; those are gone. */
  wrote(table: Table, chains: readonly ChainSpec[], deleted: readonly string[] = []): void {
    const m = this.table(table);
    for (const c of chains) m.set(c.name, { want: rulesHash(c.rules) });
    for (const d of deleted) m.delete(d);
  }

  /** After a failed restore: nothing is known of these chains any more. */
  forget(table: Table, names: Iterable<string>): void {
    const m = this.tables.get(table);
    if (m) for (const n of names) m.delete(n);
  }
}
