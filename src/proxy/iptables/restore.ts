// The iptables-restore input of a partial sync (kube-proxy's idea): the fixed chains are rewritten
// whole, the chains of changed services are declared (so flushed) and refilled, the chains those
// services no longer use are flushed and deleted, and every other service chain is left as it is
// in the kernel, referenced by name from KUBE-SERVICES. Run with --noflush.
import type { ChainSpec, Section } from '../../kernel/iptables.js';

/** What a partial restore writes for one family. */
export interface PartialRestore {
  /** The fixed chains, complete (see fixedChains). */
  fixed: Record<'nat' | 'filter', readonly ChainSpec[]>;
  /** nat chains of the changed services, complete. */
  changed: readonly ChainSpec[];
  /** nat chains to flush and delete (nothing references them after this restore). */
  deleted: readonly string[];
}

/** The sections of a partial sync's restore: filter, then nat (see Iptables.rewrite). */
export function partialSections(p: PartialRestore): Section[] {
  return [
    { table: 'filter', chains: p.fixed.filter },
    { table: 'nat', chains: [...p.fixed.nat, ...p.changed], deleted: p.deleted },
  ];
}
