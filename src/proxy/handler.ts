// The SourceHandler both proxiers give their source: objects into the change tracker, the
// node's eligibility to the health server, and a sync request to the runner.
import type { Logger } from '../log.js';
import { isNodeEligible, type ProxyHealth } from '../server/health.js';
import type { ProxyMetrics } from '../server/metrics.js';
import type { SourceHandler } from '../source/types.js';
import type { ChangeTracker } from './changetracker.js';

/** Feeds `tracker`; every change marks health and metrics as queued and calls `onChange`. */
export function trackerHandler(
  tracker: ChangeTracker,
  deps: { logger: Logger; health?: ProxyHealth; metrics?: ProxyMetrics },
  onChange: () => void,
): SourceHandler {
  const changed = () => {
    deps.health?.queued();
    deps.metrics?.syncQueued();
    onChange();
  };
  return {
    onService: (k, s) => (tracker.onService(k, s), changed()),
    onEndpointSlice: (k, s) => (tracker.onEndpointSlice(k, s), changed()),
    onNode: (n) => {
      tracker.onNode(n);
      if (n) deps.health?.setNodeEligible(isNodeEligible(n));
      changed();
    },
    onError: (e) => deps.logger.error({ object: e.object, reason: e.reason }, 'rejected object'),
    onSynced: () => deps.logger.info('sources synced'),
  };
}
