// The iptables-restore input of a partial sync (kube-proxy's idea): the fixed chains are rewritten
// whole, the chains of changed services are declared (so flushed) and refilled, the chains those
// services no longer use are flushed and deleted, and every other service chain is left as it is
// in the kernel, referenced by name from KUBE-SERVICES. Run with --noflush.
import { renderSection, type ChainSpec } from '../../kernel/iptables.js';

/** What a partial restore writes for one family. */
export interface PartialRestore {
  /** The fixed chains, complete (see fixedChains). */
  fixed: Record<'nat' | 'filter', readonly ChainSpec[]>;
  /** nat chains of the changed services, complete. */
  changed: readonly ChainSpec[];
  /** nat chains to flush and delete (nothing references them after this restore). */
  deleted: readonly string[];
}

/** Renders the restore input of a partial sync: filter, then nat (each table committed atomically, or with `batchRules` chain by chain in dependency order). */
export function renderPartialRestore(p: PartialRestore, batchRules?: number): string {
  return [...renderSection({ table: 'filter', chains: p.fixed.filter }), ...renderSection({ table: 'nat', chains: [...p.fixed.nat, ...p.changed], deleted: p.deleted }, batchRules), ''].join('\n');
}
