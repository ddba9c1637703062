// The IPVS mode's iptables rules, per family: restored when the rendered rules change, and
// verified cheaply otherwise: one iptables-save whose owned lines (chains, rules, jumps into
// them; no counters) are compared with what the kernel held right after our last restore. A
// no-change verification therefore runs no iptables-restore; a deleted chain or jump, or a
// flushed chain, changes the owned lines and is restored. With a state directory, both are kept
// in a file, so a restarted daemon over unchanged rules runs no iptables-restore either.
import { createHash } from 'node:crypto';

import type { Iptables, Table, TableSpec } from '../../kernel/iptables.js';
import { readStateFile, writeStateFile } from '../../state-dir.js';

/** One family's wanted rules. */
export interface FamilyRules {
  family: 'ipv4' | 'ipv6';
  ipt: Iptables;
  spec: TableSpec[];
}

/** What a sync or verification of the rules did. */
export interface IptablesOutcome {
  restores: number;
  saves: number;
}

/** Hashes of specs already seen: a spec handed in again (the proxier keeps it while its inputs stay) is not rendered again. */
const hashes = new WeakMap<TableSpec[], string>();

/** A hash of one family's rendered rules. */
function textHash(r: FamilyRules): string {
  let h = hashes.get(r.spec);
  if (h === undefined) hashes.set(r.spec, (h = createHash('sha256').update(JSON.stringify(r.spec)).digest('base64')));
  return h;
}

/** Keeps the IPVS mode's rules in iptables; see the file comment. */
export class IptablesKeeper {
  /** Per family: a hash of the rendered rules last restored, and the kernel's owned lines right after. */
  private readonly text = new Map<string, string>();
  private readonly print = new Map<string, string>();
  private loaded = false;
  /** Families restored since the last verification, and those the next one need not read back (trustRestored()). */
  private readonly restored = new Set<string>();
  private readonly trusted = new Set<string>();

  /** `stateDir` (e.g. /run/kube-ipvs-proxy): where the last restore's hashes survive a restart. */
  constructor(private readonly stateDir?: string) {}

  private load(): void {
    this.loaded = true;
    if (!this.stateDir) return;
    for (const family of ['ipv4', 'ipv6']) {
      // None yet, or unreadable: the first sync restores.
      const saved = readStateFile(this.stateDir, `iptables-${family}.json`) as { text?: unknown; print?: unknown } | null;
      if (typeof saved?.text === 'string' && typeof saved.print === 'string') {
        this.text.set(family, saved.text);
        this.print.set(family, saved.print);
      }
    }
  }

  /** Best effort: without it a restart restores once. */
  private save(family: string): void {
    if (this.stateDir) writeStateFile(this.stateDir, `iptables-${family}.json`, { text: this.text.get(family), print: this.print.get(family) });
  }

  /**
   * The next verification takes the families restored since the last one as they were left,
   * without an iptables-save: for a verification that follows the restore at once (the adopting
   * one, after the rules written ahead of the virtual servers). Rules only loaded from the state
   * directory are still read back.
   */
  trustRestored(): void {
    for (const f of this.restored) this.trusted.add(f);
  }

  /** Families written at least once (IPv6 rules are kept in sync once written). */
  has(family: string): boolean {
    return this.text.has(family);
  }

  private async fingerprint(r: FamilyRules): Promise<string> {
    const tables = [...new Set(r.spec.map((t) => t.table))] as Table[];
    return createHash('sha256').update(JSON.stringify(await r.ipt.saveOwned(tables))).digest('base64');
  }

  /**
   * The kernel's owned lines per family, hashed (one iptables-save each), for a later
   * sync(…, true, prints). Families that sync() will restore anyway (never restored, or rules
   * changed since) are not read: their save would be compared with nothing.
   */
  async read(families: readonly FamilyRules[]): Promise<Map<string, string>> {
    if (!this.loaded) this.load();
    const out = new Map<string, string>();
    for (const r of families) {
      if (!this.print.has(r.family) || this.text.get(r.family) !== textHash(r) || this.trusted.has(r.family)) continue;
      out.set(r.family, await this.fingerprint(r));
    }
    return out;
  }

  /**
   * Restores the families whose rules changed since the last restore; with `verify`, also
   * those whose owned lines in the kernel are no longer what the last restore left there
   * (read now, or given as `prints` from read()).
   */
  async sync(families: readonly FamilyRules[], verify: boolean, prints?: ReadonlyMap<string, string>): Promise<IptablesOutcome> {
    if (!this.loaded) this.load();
    const out: IptablesOutcome = { restores: 0, saves: 0 };
    if (verify) this.restored.clear();
    for (const r of families) {
      const text = textHash(r);
      const same = this.text.get(r.family) === text;
      if (same && !verify) continue;
      const trusted = verify && this.trusted.delete(r.family);
      if (same && trusted) continue;
      if (same && this.print.has(r.family)) {
        const given = prints?.get(r.family);
        if (given === undefined) out.saves++;
        if ((given ?? (await this.fingerprint(r))) === this.print.get(r.family)) continue;
      }
      this.print.delete(r.family);
      this.text.delete(r.family);
      await r.ipt.sync(r.spec);
      if (!verify) this.restored.add(r.family);
      out.restores++;
      this.text.set(r.family, text);
      out.saves++;
      this.print.set(r.family, await this.fingerprint(r));
      this.save(r.family);
    }
    return out;
  }
}
