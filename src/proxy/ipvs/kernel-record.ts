// What the IPVS proxier holds of the kernel between syncs: the observed state (what the last
// reads and writes left there), the plans made against it and their apply, and what an apply
// left for later: the objects to compare again, the kernel's refusals, a missing dummy link.
import type { Config } from '../../config.js';
import type { Logger } from '../../log.js';
import { applyPlan, type ApplyResult } from './apply.js';
import { DestinationTable } from './destination-table.js';
import { emptyDelta, mergeDelta, type DesiredDelta, type DesiredIndex } from './desired-index.js';
import type { GracefulState } from './graceful.js';
import { OWNED_SETS } from './ipsets.js';
import { plan, type Plan } from './plan.js';
import type { ProxierClients } from './proxier-options.js';
import type { ObservedState } from './types.js';

export class KernelRecord {
  /** null until the kernel was first read (or adopted), and after an adoption failed. */
  observed: ObservedState | null = null;
  /** Objects whose ops failed: looked at again by the next (partial) sync. */
  retryScope: DesiredDelta = emptyDelta();
  /** Objects the kernel refused for good (errors.ts): kept until the next full sync compares them again. */
  refused: ApplyResult['refused'] = [];
  /** An apply found the dummy link missing or down: the next sync re-creates it. */
  linkMissing = false;

  constructor(
    private readonly o: { index: DesiredIndex; graceful: GracefulState; config: Config; clients: ProxierClients; dummyName: string; logger: Logger },
  ) {}

  /** The plan of `scope` against the observed state, with the drain counts last read. */
  planFor(scope: DesiredDelta | 'full'): Plan {
    const { config } = this.o;
    return plan(this.o.index, this.observed!, scope, this.o.graceful, {
      now: Date.now(),
      gracefulTimeoutMs: config.gracefulTerminationTimeoutMs,
      excludeCIDRs: config.ipvs.excludeCIDRs,
      ownedSets: OWNED_SETS,
    });
  }

  /** Applies a plan; keeps what failed for the next sync (retry scope) or the next full sync (refusals). */
  async apply(p: Plan, scope: DesiredDelta | 'full', beforeVirtualServers?: () => Promise<void>): Promise<ApplyResult> {
    const result = await applyPlan(p, { ...this.o.clients, dummyName: this.o.dummyName, binding: this.o.config.ipvs.addressBinding }, this.observed!, beforeVirtualServers);
    this.shareDestinations(scope);
    for (const g of result.grown) this.o.logger.info(g, 'ipset grown ahead of need (a larger copy swapped in)');
    mergeDelta(this.retryScope, result.retryScope);
    if (result.linkMissing) this.linkMissing = true;
    // The objects in a partial scope were compared again: their old refusals are replaced by the new ones.
    const compared = (object: string) => scope !== 'full' && scope.virtualServers.has(object.split(' ')[0]!);
    this.refused = scope === 'full' ? result.refused : [...this.refused.filter((r) => !compared(r.object)), ...result.refused];
    return result;
  }

  /** The observed real servers of the virtual servers in `scope` that are now the desired ones take the desired list itself (one array for both). */
  private shareDestinations(scope: DesiredDelta | 'full'): void {
    const desired = this.o.index.virtualServers();
    const observed = this.observed!.virtualServers;
    for (const id of scope === 'full' ? desired.keys() : scope.virtualServers) {
      const o = observed.get(id)?.destinations;
      const d = desired.get(id);
      if (d !== undefined && o instanceof DestinationTable) o.share(d.destinations);
    }
  }
}
