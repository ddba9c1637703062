// What a failed kernel op means for the next sync: try again soon (transient), repair the
// observed state and compare again (stale), or stop asking until the next full sync (refused).
import { NetlinkError } from '../../kernel/errors.js';

/** How a sync treats a failed op. */
export type ErrorClass = 'transient' | 'stale' | 'refused';

/** Errnos that another attempt may fix (memory, buffers, locks, interrupted or timed-out requests, I/O). */
const TRANSIENT = new Set(['ENOBUFS', 'ENOMEM', 'EAGAIN', 'EBUSY', 'EINTR', 'ETIMEDOUT', 'EIO', 'ECONNREFUSED', 'EPIPE']);

/** Codes that say the kernel no longer holds what we believed it held: compare again after repairing the observed state. */
const STALE = new Set(['ENODEV', 'ESRCH']);

/**
 * Classifies one failed op (`op` like `ipvs.addService`, `ipset.add`, `link.addAddress`).
 * A refusal is permanent for that object with the kernel as it is (an unknown scheduler,
 * EINVAL, EOPNOTSUPP, a full hash, input the client rejects): retrying every second cannot
 * succeed, so it is reported once and tried again on full syncs only.
 */
export function classify(op: string, e: unknown): ErrorClass {
  if (!(e instanceof NetlinkError)) return e instanceof Error && e.name === 'ValidationError' ? 'refused' : 'transient';
  if (TRANSIENT.has(e.code)) return 'transient';
  if (STALE.has(e.code)) return 'stale';
  // ENOENT: a missing scheduler or persistence engine on add/update service is a refusal; on
  // everything else it is a missing object (a destination, a set), i.e. stale.
  if (e.code === 'ENOENT') return op === 'ipvs.addService' || op === 'ipvs.updateService' ? 'refused' : 'stale';
  return 'refused';
}
