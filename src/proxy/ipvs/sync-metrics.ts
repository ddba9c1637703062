// What an apply did, as metrics: the kernel-op counters and the owned sets' sizes.
import type { ProxyMetrics } from '../../server/metrics.js';
import type { ApplyResult } from './apply.js';
import { OWNED_SETS } from './ipsets.js';
import type { ObservedState } from './types.js';

/** Adds what an apply (a sync's or a verification's repair) did to the kernel-op counters, and the sets' sizes. */
export function countKernelOps(m: ProxyMetrics, observed: ObservedState, result: ApplyResult): void {
  const sizes = OWNED_SETS.flatMap(({ spec: { name } }) => {
    const have = observed.ipsets.get(name);
    const maxElem = observed.ipsetCapacity.get(name);
    return have && maxElem !== undefined ? [{ set: name, entries: have.size, maxElem }] : [];
  });
  m.setIpsetSizes(sizes);
  m.countKernelOps('ipvs', 'ok', result.counts.ipvsOps);
  m.countKernelOps('ipset', 'ok', result.counts.ipsetEntries);
  m.countKernelOps('address', 'ok', result.counts.addresses);
  if (result.errors.length) m.countKernelOps('any', 'error', result.errors.length);
  if (result.drift.length) m.countKernelOps('any', 'drift', result.drift.length);
}
