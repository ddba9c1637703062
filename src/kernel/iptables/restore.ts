import { IptablesError } from './errors.js';
import { assertChainName, renderCommand, ruleTarget, sameRule, validChainName } from './syntax.js';
import type { JumpSpec, OwnedPredicate, SavedTable, TableSpec } from './types.js';

/** What one table's restore will do, and its input text. */
export interface RestorePlan {
  table: TableSpec['table'];
  /** The complete iptables-restore input (run with --noflush). */
  text: string;
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
 * desired owned chain, fills it, adds missing jumps, and flushes and deletes the owned chains
 * that exist now but are no longer wanted. Nothing else in the table is touched, except rules
 * in foreign chains that jump to a chain being deleted. Pure: `current` is iptables-save's view.
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

  const lines = [`*${table}`];
  for (const name of [...wanted, ...deleted]) lines.push(`:${name} - [0:0]`);

  const removedRules: string[] = [];
  for (const c of existing) {
    if (wanted.has(c.name) || deletedSet.has(c.name)) continue;
    for (const r of c.rules) {
      const target = ruleTarget(r.args);
      if (target !== undefined && deletedSet.has(target)) {
        lines.push(renderCommand('-D', c.name, r.args));
        removedRules.push(r.line);
      }
    }
  }

  const missing = jumps.filter((j, i) => !hasJump(j) && jumps.findIndex((k) => k.chain === j.chain && sameRule(k.rule, j.rule)) === i);
  // -I puts each rule first, so insert in reverse to keep the caller's order.
  for (const j of [...missing].reverse()) {
    if ((j.position ?? 'first') === 'first') lines.push(renderCommand('-I', j.chain, j.rule));
  }
  for (const j of missing) if (j.position === 'last') lines.push(renderCommand('-A', j.chain, j.rule));

  for (const c of spec.chains) for (const r of c.rules) lines.push(renderCommand('-A', c.name, r));
  for (const name of deleted) lines.push(`-X ${name}`);
  lines.push('COMMIT', '');
  return { table, text: lines.join('\n'), deletedChains: deleted, addedJumps: missing, removedRules };
}
