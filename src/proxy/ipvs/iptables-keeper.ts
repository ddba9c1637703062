// The IPVS mode's iptables rules, per family: restored when the rendered rules change, and
// verified cheaply otherwise: one iptables-save whose owned lines (chains, rules, jumps into
// them; no counters) are compared with what the kernel held right after our last restore. A
// no-change verification therefore runs no iptables-restore; a deleted chain or jump, or a
// flushed chain, changes the owned lines and is restored.
import type { Iptables, Table, TableSpec } from '../../kernel/iptables.js';

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

/** Keeps the IPVS mode's rules in iptables; see the file comment. */
export class IptablesKeeper {
  private readonly text = new Map<string, string>();
  private readonly print = new Map<string, string>();

  /** Families written at least once (IPv6 rules are kept in sync once written). */
  has(family: string): boolean {
    return this.text.has(family);
  }

  private async fingerprint(r: FamilyRules): Promise<string> {
    const tables = [...new Set(r.spec.map((t) => t.table))] as Table[];
    return JSON.stringify(await r.ipt.saveOwned(tables));
  }

  /**
   * Restores the families whose rules changed since the last restore; with `verify`, also
   * those whose owned lines in the kernel are no longer what the last restore left there.
   */
  async sync(families: readonly FamilyRules[], verify: boolean): Promise<IptablesOutcome> {
    const out: IptablesOutcome = { restores: 0, saves: 0 };
    for (const r of families) {
      const text = JSON.stringify(r.spec);
      const same = this.text.get(r.family) === text;
      if (same && !verify) continue;
      if (same && this.print.has(r.family)) {
        out.saves++;
        if ((await this.fingerprint(r)) === this.print.get(r.family)) continue;
      }
      this.print.delete(r.family);
      this.text.delete(r.family);
      await r.ipt.sync(r.spec);
      out.restores++;
      this.text.set(r.family, text);
      out.saves++;
      this.print.set(r.family, await this.fingerprint(r));
    }
    return out;
  }
}
