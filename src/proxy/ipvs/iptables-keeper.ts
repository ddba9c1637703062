// The IPVS mode's iptables rules, per family: restored when the rendered rules change, and
// verified cheaply otherwise: one iptables-save whose owned lines (chains, rules, jumps into
// them; no counters) are compared with what the kernel held right after our last restore. A
// no-change verification therefore runs no iptables-restore; a deleted chain or jump, or a
// flushed chain, changes the owned lines and is restored. Nor does it run iptables-save when the
// kernel's token of the tables (Iptables.generation(): nft's ruleset generation, or the legacy
// tables' rules hashed, read without a process) is still the one it had when its owned lines
// were last found right. With a state directory, all three are kept in a file, so a restarted
// daemon over unchanged rules runs neither.
import { createHash } from 'node:crypto';

import type { Iptables, Table, TableSpec } from '../../kernel/iptables.js';
import { readStateFile, writeStateFile } from '../../state-dir.js';

/** One family's wanted rules. */
export interface FamilyRules {
  family: 'ipv4' | 'ipv6';
  ipt: Iptables;
  spec: TableSpec[];
}

/** What a sync or verification of the rules did (saves: iptables-save runs). */
export interface IptablesOutcome {
  restores: number;
  saves: number;
}

/** One family's owned lines as read (hashed), and the kernel's token from just before and after that read, when the two agreed. */
export interface Observed {
  print: string;
  generation: string | null;
  /** False when the token showed the lines unchanged and no iptables-save ran. */
  saved: boolean;
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
  /** Per family: the kernel's token when its owned lines were last read equal to `print`. */
  private readonly generation = new Map<string, string>();
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
      const saved = readStateFile(this.stateDir, `iptables-${family}.json`) as { text?: unknown; print?: unknown; generation?: unknown } | null;
      if (typeof saved?.text === 'string' && typeof saved.print === 'string') {
        this.text.set(family, saved.text);
        this.print.set(family, saved.print);
        if (typeof saved.generation === 'string') this.generation.set(family, saved.generation);
      }
    }
  }

  /** Best effort: without it a restart restores once. */
  private save(family: string): void {
    if (this.stateDir) writeStateFile(this.stateDir, `iptables-${family}.json`, { text: this.text.get(family), print: this.print.get(family), generation: this.generation.get(family) });
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

  /**
   * The kernel's owned lines of one family, hashed: `known` (no iptables-save) when the kernel's
   * token is the one they were last found right at, else read with one iptables-save between two
   * reads of the token (a token is kept only when the two agree: nothing changed during the save).
   */
  private async observe(r: FamilyRules, known?: string): Promise<Observed> {
    const tables = [...new Set(r.spec.map((t) => t.table))] as Table[];
    const before = await r.ipt.generation(tables);
    if (known !== undefined && before !== null && before === this.generation.get(r.family)) return { print: known, generation: before, saved: false };
    const print = createHash('sha256').update(JSON.stringify(await r.ipt.saveOwned(tables))).digest('base64');
    const after = before === null ? null : await r.ipt.generation(tables);
    return { print, generation: after === before ? before : null, saved: true };
  }

  /** The kernel's owned lines were found equal to the last restore's at this token. */
  private adopt(family: string, generation: string | null): void {
    if (generation === null || this.generation.get(family) === generation) return;
    this.generation.set(family, generation);
    this.save(family);
  }

  /**
   * The kernel's owned lines per family, hashed (at most one iptables-save each, see observe()),
   * for a later sync(…, true, prints). Families that sync() will restore anyway (never restored,
   * or rules changed since) are not read: their save would be compared with nothing.
   */
  async read(families: readonly FamilyRules[]): Promise<Map<string, Observed>> {
    if (!this.loaded) this.load();
    const out = new Map<string, Observed>();
    for (const r of families) {
      if (!this.print.has(r.family) || this.text.get(r.family) !== textHash(r) || this.trusted.has(r.family)) continue;
      out.set(r.family, await this.observe(r, this.print.get(r.family)));
    }
    return out;
  }

  /**
   * Restores the families whose rules changed since the last restore; with `verify`, also
   * those whose owned lines in the kernel are no longer what the last restore left there
   * (read now, or given as `prints` from read()).
   */
  async sync(families: readonly FamilyRules[], verify: boolean, prints?: ReadonlyMap<string, Observed>): Promise<IptablesOutcome> {
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
        const seen = prints?.get(r.family) ?? (await this.observe(r, this.print.get(r.family)));
        if (seen.saved) out.saves++;
        if (seen.print === this.print.get(r.family)) {
          this.adopt(r.family, seen.generation);
          continue;
        }
      }
      this.print.delete(r.family);
      this.text.delete(r.family);
      this.generation.delete(r.family);
      await r.ipt.sync(r.spec);
      if (!verify) this.restored.add(r.family);
      out.restores++;
      this.text.set(r.family, text);
      out.saves++;
      const after = await this.observe(r);
      this.print.set(r.family, after.print);
      if (after.generation !== null) this.generation.set(r.family, after.generation);
      this.save(r.family);
    }
    return out;
  }
}
