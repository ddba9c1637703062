// One family's part of an iptables-mode sync: its rules and what was last restored, the full
// sync through the driver, the partial sync as one restore, and the cleanup of an idle family.
import { createHash } from 'node:crypto';

import type { Iptables, Table, TableSpec } from '../../kernel/iptables.js';
import type { Logger } from '../../log.js';
import type { Family } from '../../model/ip.js';
import { removeStaleJumps } from './leftovers.js';
import { partialSections } from './restore.js';
import { fixedChains, type RulesContext, type ServiceRules } from './rules.js';

/** What one family's part of a sync did. */
export interface FamilySyncReport {
  /** Rules and chains written (a full sync leaves the chains that read back unchanged). */
  rules: number;
  chains: number;
  /** Service chains deleted (partial syncs only; a full sync deletes through the driver). */
  deleted: number;
  /** A full sync that found the kernel's token of the tables where the last one left it, with the same rules: no iptables-save. */
  unchanged?: true;
}

/** One family's rules and what the kernel holds of them. */
export interface FamilyState {
  family: Family;
  ipt: Iptables;
  rules: Map<string, ServiceRules>;
  /** Service chains per port key as last restored; a partial sync deletes the ones gone. */
  written: Map<string, string[]>;
  /** Port keys whose rules changed since they were last restored. */
  dirty: Set<string>;
  /** A full sync of this family succeeded (after that, only partial syncs until the period ends). */
  synced: boolean;
  largeCluster: boolean;
  /** After a full sync that wrote nothing: the tables' token (Iptables.generation()) and a hash of the rules it compared; null otherwise. */
  clean?: { token: string; rules: string } | null;
}

/**
 * Full sync of one family through the driver: owned chains made exactly the desired ones; no
 * iptables-save at all while the tables' token and the rules are those of the last full sync that
 * wrote nothing (the token read before and after it agreed). `switching`: another mode's leftovers
 * are not removed yet (its jumps into shared chains go too).
 */
export async function syncFamilyFull(fs: FamilyState, specs: TableSpec[], switching: boolean, logger: Logger): Promise<FamilySyncReport> {
  const tables = [...new Set(specs.map((t) => t.table))] as Table[];
  const rules = (): string => createHash('sha256').update(JSON.stringify(specs)).digest('base64'); // hashed only where a token allows a skip
  const before = await fs.ipt.generation(tables);
  const clean = fs.clean;
  fs.clean = null;
  if (!switching && before !== null && clean?.token === before && clean.rules === rules()) {
    fs.clean = clean;
    fs.dirty.clear();
    return { rules: 0, chains: 0, deleted: 0, unchanged: true };
  }
  const plans = await fs.ipt.sync(specs);
  const wrote = plans.some((p) => p.written.length + p.deletedChains.length + p.addedJumps.length + p.removedRules.length > 0);
  const after = before === null || wrote ? null : await fs.ipt.generation(tables);
  if (after !== null && after === before) fs.clean = { token: before!, rules: rules() };
  fs.written = new Map([...fs.rules].map(([k, r]) => [k, r.chains.map((c) => c.name)]));
  fs.dirty.clear();
  fs.synced = true;
  // Switching from another mode (its chains were just deleted): its jumps into shared chains.
  if (switching && plans.some((p) => p.deletedChains.length > 0)) {
    const stale = await removeStaleJumps(fs.ipt, specs).catch((e: Error) => {
      logger.warn({ family: fs.family, err: e.message }, 'cannot remove stale jumps');
      return [];
    });
    if (stale.length > 0) logger.info({ family: fs.family, rules: stale }, 'removed jumps left by another proxy mode');
  }
  const written = plans.flatMap((p) => p.written);
  return {
    rules: written.reduce((n, c) => n + c.rules.length, 0),
    chains: written.length,
    deleted: plans.reduce((n, p) => n + p.deletedChains.length, 0),
  };
}

/** Partial sync of one family: fixed chains plus the dirty services' chains, one restore. */
export async function syncFamilyPartial(fs: FamilyState, ctx: RulesContext, ordered: ServiceRules[]): Promise<FamilySyncReport> {
  fs.clean = null;
  const fixed = fixedChains(ctx, ordered);
  const changed = [];
  const deleted: string[] = [];
  for (const key of fs.dirty) {
    const chains = fs.rules.get(key)?.chains ?? [];
    const names = new Set(chains.map((c) => c.name));
    changed.push(...chains);
    for (const old of fs.written.get(key) ?? []) if (!names.has(old)) deleted.push(old);
  }
  await fs.ipt.rewrite(partialSections({ fixed, changed, deleted }));
  for (const key of fs.dirty) {
    const r = fs.rules.get(key);
    if (r) fs.written.set(key, r.chains.map((c) => c.name));
    else fs.written.delete(key);
  }
  fs.dirty.clear();
  const all = [...fixed.filter, ...fixed.nat, ...changed];
  return { rules: all.reduce((n, c) => n + c.rules.length, 0), chains: all.length, deleted: deleted.length };
}

/** A family without services (IPv6 on a single-stack node): removes what another mode left there. */
export async function cleanIdleFamily(fs: FamilyState, logger: Logger): Promise<void> {
  try {
    const owned = await fs.ipt.saveOwned();
    if (owned.nat.length + owned.filter.length === 0) return;
    const plans = await fs.ipt.cleanup();
    logger.info({ family: fs.family, chains: plans.reduce((n, p) => n + p.deletedChains.length, 0) }, 'removed chains left by another proxy mode');
  } catch (e) {
    logger.warn({ family: fs.family, err: (e as Error).message }, 'cannot read or clean the idle family\'s tables');
  }
}

