// The iptables-restore input of a partial sync (kube-proxy's idea): the fixed chains are rewritten
// whole, the chains of changed services are declared (so flushed) and refilled, the chains those
// services no longer use are flushed and deleted, and every other service chain is left as it is
// in the kernel, referenced by name from KUBE-SERVICES. Run with --noflush.
import { renderCommand, type ChainSpec } from '../../kernel/iptables.js';

/** What a partial restore writes for one family. */
export interface PartialRestore {
  /** The fixed chains, complete (see fixedChains). */
  fixed: Record<'nat' | 'filter', readonly ChainSpec[]>;
  /** nat chains of the changed services, complete. */
  changed: readonly ChainSpec[];
  /** nat chains to flush and delete (nothing references them after this restore). */
  deleted: readonly string[];
}

function section(table: string, chains: readonly ChainSpec[], deleted: readonly string[] = []): string[] {
  const lines = [`*${table}`];
  for (const c of chains) lines.push(`:${c.name} - [0:0]`);
  for (const d of deleted) lines.push(`:${d} - [0:0]`);
  for (const c of chains) for (const r of c.rules) lines.push(renderCommand('-A', c.name, r));
  for (const d of deleted) lines.push(`-X ${d}`);
  lines.push('COMMIT');
  return lines;
}

/** Renders the restore input of a partial sync: filter, then nat (each table committed atomically). */
export function renderPartialRestore(p: PartialRestore): string {
  return [...section('filter', p.fixed.filter), ...section('nat', [...p.fixed.nat, ...p.changed], p.deleted), ''].join('\n');
}
