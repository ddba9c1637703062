import { IptablesError } from './errors.js';
import { assertChainName, renderCommand, ruleTarget, sameRule, validChainName } from './syntax.js';
import type { ChainSpec, JumpSpec, OwnedPredicate, SavedTable, Table, TableSpec } from './types.js';

/**
 * Rules per commit above which the nft backend's restore input is split (see {@link batchChains}).
 * iptables-nft-restore's time grows with the square of the rules in one commit: 3,000 Services x
 * 10 endpoints (96,000 nat rules) took 37 s in one commit and 6.2 s in ten or thirty, on the host
 * (iptables 1.8.9). Legacy rewrites the whole table per commit, so it is not split.
 */
export const NFT_BATCH_RULES = 4000;

/**
 * Groups `chains` into commits of at most `maxRules` rules (a larger chain alone), each chain no
 * earlier than the owned chains it jumps to, so that committing the groups one after another
 * never jumps to a chain not yet created, and each chain is still replaced whole in one commit.
 * One group when the chains fit, or when they jump in a loop (iptables refuses that anyway).
 */
export function batchChains(chains: readonly ChainSpec[], maxRules = Infinity): (readonly ChainSpec[])[] {
  let total = 0;
  for (const c of chains) total += c.rules.length;
  if (total <= maxRules) return [chains];
  const byName = new Map(chains.map((c) => [c.name, c]));
  const state = new Map<string, 'visiting' | 'done'>();
  const order: ChainSpec[] = [];
  const visit = (c: ChainSpec): boolean => {
    const s = state.get(c.name);
    if (s !== undefined) return s === 'done';
    state.set(c.name, 'visiting');
    for (const r of c.rules) {
      const target = byName.get(ruleTarget(r) ?? '');
      if (target !== undefined && target !== c && !visit(target)) return false;
    }
    state.set(c.name, 'done');
    order.push(c);
    return true;
  };
  for (const c of chains) if (!visit(c)) return [chains];
  const groups: ChainSpec[][] = [];
  let group: ChainSpec[] = [];
  let size = 0;
  for (const c of order) {
    if (group.length > 0 && size + c.rules.length > maxRules) {
      groups.push(group);
      group = [];
      size = 0;
    }
    group.push(c);
    size += c.rules.length;
  }
  groups.push(group);
  return groups;
}

/** One table's part of a restore input. */
export interface Section {
  table: Table;
  /** Owned chains declared (so flushed) and filled. */
  chains: readonly ChainSpec[];
  /** Owned chains flushed and deleted, in the last commit. */
  deleted?: readonly string[];
  /** Lines of the last commit between the declarations and the rules (-D, jumps from built-in chains). */
  before?: readonly string[];
}

/**
 * The restore lines of one table: one commit, or with `maxRules` the chains' groups from
 * {@link batchChains}, one commit each; the deletions and `before` lines go in the last.
 */
export function renderSection(s: Section, maxRules?: number): string[] {
  const groups = batchChains(s.chains, maxRules);
  const lines: string[] = [];
  groups.forEach((group, i) => {
    const last = i === groups.length - 1;
    const deleted = last ? (s.deleted ?? []) : [];
    lines.push(`*${s.table}`);
    for (const c of group) lines.push(`:${c.name} - [0:0]`);
    for (const d of deleted) lines.push(`:${d} - [0:0]`);
    if (last) lines.push(...(s.before ?? []));
    for (const c of group) for (const r of c.rules) lines.push(renderCommand('-A', c.name, r));
    for (const d of deleted) lines.push(`-X ${d}`);
    lines.push('COMMIT');
  });
  return lines;
}

/** What one table's restore will do, and its input text. */
export interface RestorePlan {
  table: TableSpec['table'];
  /** The complete iptables-restore input (run with --noflush). */
  text: string;
  /** Owned chains declared (so flushed) and filled; the wanted ones not here were kept. */
  written: ChainSpec[];
  /** Owned chains that exist now and are flushed and deleted (-X). */
  deletedChains: string[];
  /** Jumps that were missing and are added. */
  addedJumps: JumpSpec[];
  /** Rules in chains we don't own that jump to a deleted chain (-D, else -X would fail). */
  removedRules: string[];
}

/** Options of {@link planRestore}. */
export interface PlanOptions {
  isOwned: OwnedPredicate;
  /** Says whether a jump exists already; default: an identical rule in the saved chain. */
  hasJump?: (jump: JumpSpec) => boolean;
  /** Split into commits of this many rules (see {@link batchChains}); default one commit. */
  batchRules?: number;
  /** Says whether a wanted chain already holds its rules and is left alone; default never. */
  keep?: (chain: ChainSpec) => boolean;
}

/** True when restoring `plan` would change nothing. */
export function emptyPlan(plan: RestorePlan): boolean {
  return plan.written.length + plan.deletedChains.length + plan.addedJumps.length + plan.removedRules.length === 0;
}

/** The restore input of several tables' sections, each as {@link renderSection}. */
export function renderSections(sections: readonly Section[], maxRules?: number): string {
  return [...sections.flatMap((s) => renderSection(s, maxRules)), ''].join('\n');
}

/** True when `current` holds a rule with exactly the tokens of `jump` in its chain. */
export function hasJumpText(current: SavedTable | undefined, jump: JumpSpec): boolean {
  const chain = current?.chains.find((c) => c.name === jump.chain);
  return chain !== undefined && chain.rules.some((r) => sameRule(r.args, jump.rule));
}

function invalid(table: string, why: string): IptablesError {
  return new IptablesError('EINVAL', `table ${table}: ${why}`, { op: 'render', table: table as TableSpec['table'] });
}

/**
 * Renders one `iptables-restore --noflush` input for a table: declares (and so flushes) every
 * desired owned chain except those `keep` leaves alone, fills it, adds missing jumps, and
 * flushes and deletes the owned chains that exist now but are no longer wanted. Nothing else in
 * the table is touched, except rules in foreign chains that jump to a chain being deleted.
 * Pure: `current` is iptables-save's view.
 */
export function planRestore(spec: TableSpec, current: SavedTable | undefined, opts: PlanOptions): RestorePlan {
  const { table } = spec;
  const isOwned = (name: string): boolean => opts.isOwned(name, table);
  const hasJump = opts.hasJump ?? ((j: JumpSpec) => hasJumpText(current, j));
  const wanted = new Set<string>();
  for (const c of spec.chains) {
    assertChainName(c.name);
    if (!isOwned(c.name)) throw invalid(table, `chain ${c.name} is not owned by this proxy`);
    if (wanted.has(c.name)) throw invalid(table, `chain ${c.name} given twice`);
    wanted.add(c.name);
  }
  const jumps = spec.jumps ?? [];
  for (const j of jumps) {
    if (wanted.has(j.chain) || isOwned(j.chain)) throw invalid(table, `jump into owned chain ${j.chain}; put it in its rules`);
  }

  const existing = current?.chains ?? [];
  const deleted = existing
    .filter((c) => c.policy === null && isOwned(c.name) && !wanted.has(c.name) && validChainName(c.name))
    .map((c) => c.name)
    .sort();
  const deletedSet = new Set(deleted);

  const before: string[] = [];
  const removedRules: string[] = [];
  for (const c of existing) {
    if (wanted.has(c.name) || deletedSet.has(c.name)) continue;
    for (const r of c.rules) {
      const target = ruleTarget(r.args);
      if (target !== undefined && deletedSet.has(target)) {
        before.push(renderCommand('-D', c.name, r.args));
        removedRules.push(r.line);
      }
    }
  }

  const missing = jumps.filter((j, i) => !hasJump(j) && jumps.findIndex((k) => k.chain === j.chain && sameRule(k.rule, j.rule)) === i);
  // -I puts each rule first, so insert in reverse to keep the caller's order.
  for (const j of [...missing].reverse()) {
    if ((j.position ?? 'first') === 'first') before.push(renderCommand('-I', j.chain, j.rule));
  }
  for (const j of missing) if (j.position === 'last') before.push(renderCommand('-A', j.chain, j.rule));

  const written = opts.keep ? spec.chains.filter((c) => !opts.keep!(c)) : [...spec.chains];
  const text = renderSections([{ table, chains: written, deleted, before }], opts.batchRules);
  return { table, text, written, deletedChains: deleted, addedJumps: missing, removedRules };
}
