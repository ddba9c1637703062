// The SourceHandler both proxiers give their source: objects into the change tracker, the
// node's eligibility to the health server, and a sync request to the runner.
import type { Logger } from '../log.js';
import type { ObjectError } from '../model/service.js';
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

/** Logs each object error once, until it goes away (and again if it comes back). */
export class ErrorReporter {
  private reported = new Set<string>();

  constructor(private readonly logger: Logger) {}

  /** `errors` is every current problem; new ones are logged. */
  report(errors: readonly ObjectError[]): void {
    const now = new Set<string>();
    for (const e of errors) {
      const id = `${e.object}: ${e.reason}`;
      if (!this.reported.has(id) && !now.has(id)) this.logger.error({ object: e.object, reason: e.reason }, 'cannot program object');
      now.add(id);
    }
    this.reported = now;
  }
}
