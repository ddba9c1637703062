// Switching modes: what the other mode left on the node. The iptables proxier's first full sync
// already deletes every owned chain it does not want (the IPVS mode's KUBE-NODE-PORT,
// KUBE-LOAD-BALANCER, KUBE-IPVS-FILTER…); this removes the rest: jumps from built-in chains that
// the other mode wrote differently, then IPVS virtual servers, the IPVS mode's ipsets (no rule
// references them any more) and its dummy link.
import type { IpsetClient } from '../../kernel/ipset/types.js';
import type { IpvsClient } from '../../kernel/ipvs/client.js';
import { renderCommand, ruleTarget, sameRule, tokenize, type Family, type Iptables, type JumpSpec, type TableSpec } from '../../kernel/iptables.js';
import type { LinkClient } from '../../kernel/link.js';
import { inCidr } from '../../model/ip.js';
import type { Config } from '../../config.js';
import type { Logger } from '../../log.js';
import { OWNED_SETS } from '../ipvs/ipsets.js';
import { ipvsModeRules } from '../ipvs/rules.js';
import { JUMPS } from './rules.js';

/** The built-in chains of the nat and filter tables: the only places jumps into our chains live. */
const BUILTIN = new Set(['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING']);

/**
 * Deletes rules in built-in chains that jump to an owned chain but are not among `specs`' jumps
 * (e.g. the other mode's `INPUT -j KUBE-PROXY-FIREWALL` with its own comment). Conservative: a
 * chain→target pair is left alone when one of our own jumps for it is not found textually in
 * iptables-save's output (the tools may print it differently, and it must not be deleted).
 * One full iptables-save (it creates no table), one iptables-restore when something is stale.
 * Returns the deleted lines as `table: -A …`.
 */
export async function removeStaleJumps(ipt: Iptables, specs: readonly TableSpec[]): Promise<string[]> {
  if (specs.length === 0) return [];
  const owned = await ipt.saveOwned(specs.map((s) => s.table));
  const removed: string[] = [];
  const input: string[] = [];
  for (const spec of specs) {
    const jumps = spec.jumps ?? [];
    const rules = owned[spec.table]
      .map((line) => ({ line, tokens: tokenize(line) }))
      .filter(({ tokens }) => tokens[0] === '-A' && BUILTIN.has(tokens[1] ?? ''))
      .map(({ line, tokens }) => ({ line, chain: tokens[1]!, args: tokens.slice(2) }));
    const deletes: string[] = [];
    for (const rule of rules) {
      const target = ruleTarget(rule.args);
      if (target === undefined || !ipt.isOwned(target, spec.table)) continue;
      const ours = jumps.filter((j) => j.chain === rule.chain && ruleTarget(j.rule) === target);
      if (ours.some((j) => sameRule(j.rule, rule.args))) continue;
      const unseen = ours.some((j) => !rules.some((r) => r.chain === j.chain && sameRule(r.args, j.rule)));
      if (unseen) continue;
      deletes.push(renderCommand('-D', rule.chain, rule.args));
      removed.push(`${spec.table}: ${rule.line}`);
    }
    if (deletes.length > 0) input.push(`*${spec.table}`, ...deletes, 'COMMIT');
  }
  if (input.length > 0) await ipt.restore(specs[0]!.table, `${input.join('\n')}\n`);
  return removed;
}

/**
 * The other direction, for the IPVS mode at start: deletes this mode's jumps ({@link JUMPS}) that
 * the IPVS mode does not also use (`keep`). Its first sync deletes our chains and the jumps into
 * them, but not the jumps into KUBE-PROXY-FIREWALL, a chain both modes have (in IPVS mode an
 * OUTPUT jump into it would drop the node's own traffic to firewalled LB IPs). One full
 * iptables-save (it creates no table), a restore only when one is found. Returns the deleted
 * lines as `table: -A …`.
 */
export async function removeIptablesModeJumps(ipt: Iptables, keep: readonly JumpSpec[], savedText?: string): Promise<string[]> {
  const doomed = (Object.entries(JUMPS) as Array<['nat' | 'filter', readonly JumpSpec[]]>).flatMap(([table, jumps]) =>
    jumps.filter((j) => !keep.some((k) => k.chain === j.chain && sameRule(k.rule, j.rule))).map((j) => ({ table, ...j })),
  );
  const tables = [...new Set(doomed.map((d) => d.table))];
  if (tables.length === 0) return [];
  // A full iptables-save (asking for one table could make the kernel create it), or one just read.
  const owned = await ipt.saveOwned(tables, savedText);
  const removed: string[] = [];
  const input: string[] = [];
  for (const table of tables) {
    const deletes: string[] = [];
    for (const line of owned[table]) {
      const [cmd, chain, ...args] = tokenize(line);
      if (cmd !== '-A' || chain === undefined || !doomed.some((j) => j.table === table && j.chain === chain && sameRule(j.rule, args))) continue;
      deletes.push(renderCommand('-D', chain, args));
      removed.push(`${table}: ${line}`);
    }
    if (deletes.length > 0) input.push(`*${table}`, ...deletes, 'COMMIT');
  }
  if (input.length > 0) await ipt.restore(tables[0]!, `${input.join('\n')}\n`);
  return removed;
}

/**
 * At the IPVS mode's start: {@link removeIptablesModeJumps} for each family (the families at
 * once; from `saved`, backend detection's iptables-save output, where it has it), keeping the
 * IPVS mode's own jumps. Failures are logged, never thrown (the IPVS proxier
 * does not depend on it).
 */
export async function removeIptablesModeLeftovers(
  ipts: ReadonlyArray<Iptables | null>,
  config: Config,
  logger: Logger,
  saved: Partial<Record<Family, string>> = {},
): Promise<void> {
  const one = async (ipt: Iptables): Promise<void> => {
    const keep = ipvsModeRules({ config, nodeName: '', nodePortAddresses: [] }, ipt.family, new Set()).flatMap((t) => t.jumps ?? []);
    try {
      const removed = await removeIptablesModeJumps(ipt, keep, saved[ipt.family]);
      if (removed.length > 0) logger.info({ family: ipt.family, rules: removed }, 'removed jumps left by the iptables mode');
    } catch (e) {
      logger.warn({ family: ipt.family, err: (e as Error).message }, 'cannot check for jumps left by the iptables mode');
    }
  };
  await Promise.all(ipts.flatMap((ipt) => (ipt ? [one(ipt)] : [])));
}

/** What {@link removeIpvsLeftovers} works with; a missing client skips its step. */
export interface IpvsLeftoverClients {
  link: LinkClient;
  ipvs?: IpvsClient | null;
  ipset?: IpsetClient | null;
  /** The drivers whose mangle chains (the IPVS mode's, matching its sets) go before the sets. */
  iptables?: readonly Iptables[];
  dummyName: string;
  /** Virtual servers inside these CIDRs are never deleted (--ipvs-exclude-cidrs). */
  excludeCIDRs: readonly string[];
}

/** One step of the IPVS leftover cleanup and what it came to (`error` when it failed). */
export interface LeftoverStep {
  step: 'ipvs' | 'ipsets' | 'link';
  result?: string;
  error?: string;
}

/**
 * Removes what the IPVS mode leaves behind. Virtual servers are deleted only when the IPVS mode's
 * dummy link exists (evidence that this proxy ran in IPVS mode here, as kube-proxy decided);
 * then the IPVS mode's ipsets (call this after the nat and filter rules that match them are gone;
 * its mangle chains go here, first) and the dummy link. Every step runs even when an earlier one fails; nothing throws.
 */
export async function removeIpvsLeftovers(c: IpvsLeftoverClients): Promise<LeftoverStep[]> {
  const steps: LeftoverStep[] = [];
  const attempt = async (step: LeftoverStep['step'], fn: () => Promise<string | null>): Promise<void> => {
    try {
      const result = await fn();
      if (result !== null) steps.push({ step, result });
    } catch (e) {
      steps.push({ step, error: e instanceof Error ? e.message : String(e) });
    }
  };
  const dummy = await c.link.getLink(c.dummyName).catch(() => null);
  if (dummy !== null && c.ipvs) {
    const ipvs = c.ipvs;
    await attempt('ipvs', async () => {
      const excluded = (a: string | null) => a !== null && c.excludeCIDRs.some((cidr) => inCidr(a, cidr));
      const doomed = (await ipvs.listServices()).filter((s) => !excluded(s.address));
      if (doomed.length === 0) return null;
      const results = await ipvs.apply(doomed.map((service) => ({ kind: 'deleteService' as const, service })));
      const failed = results.flatMap((r) => (r.ok ? [] : [r.error.message]));
      if (failed.length > 0) throw new Error(`${failed.length} of ${doomed.length} virtual servers not deleted: ${failed[0]}`);
      return `deleted ${doomed.length} virtual servers`;
    });
  }
  if (c.ipset) {
    const ipset = c.ipset;
    await attempt('ipsets', async () => {
      const present = new Set(await ipset.listNames());
      const doomed = OWNED_SETS.map((s) => s.spec.name).filter((n) => present.has(n));
      if (doomed.length === 0) return null;
      for (const ipt of c.iptables ?? []) await ipt.cleanup(['mangle']); // the IPVS mode's node-originated source-range checks
      const failed: string[] = [];
      for (const name of doomed) await ipset.destroy(name, { exist: true }).catch((e: Error) => void failed.push(`${name}: ${e.message}`));
      if (failed.length > 0) throw new Error(`${failed.length} of ${doomed.length} ipsets not destroyed: ${failed.join('; ')}`);
      return `destroyed ${doomed.length} ipsets`;
    });
  }
  if (dummy !== null) await attempt('link', async () => ((await c.link.deleteLink(c.dummyName, { kind: 'dummy' })) ? `deleted ${c.dummyName}` : null));
  return steps;
}
