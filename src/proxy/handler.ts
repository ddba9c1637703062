// The SourceHandler both proxiers give their source: objects into the change tracker, the
// node's eligibility to the health server, and a sync request to the runner.
import type { Logger } from '../log.js';
import type { ObjectError } from '../model/service.js';
import { isNodeEligible, type ProxyHealth } from '../server/health.js';
import type { ProxyMetrics } from '../server/metrics.js';
import type { EventSink } from '../source/events.js';
import type { SourceHandler } from '../source/types.js';
import type { ChangeTracker } from './changetracker.js';

/** Feeds `tracker`; every change marks health and metrics as queued and calls `onChange`. */
export function trackerHandler(
  tracker: ChangeTracker,
  deps: { logger: Logger; health?: ProxyHealth; metrics?: ProxyMetrics },
  onChange: () => void,
): SourceHandler {
  deps.metrics?.trackObjects(() => tracker.counts());
  // Marked once per burst (a list page, the replay of held objects), health and metrics with one
  // reading of the clock: each is a syscall that costs tens of µs in UML, and later marks of the
  // same burst change nothing.
  let marked = false;
  const changed = () => {
    if (!marked) {
      marked = true;
      queueMicrotask(() => (marked = false));
      const at = deps.health?.now();
      deps.health?.queued(undefined, at);
      deps.metrics?.syncQueued(at);
    }
    onChange();
  };
  return {
    onService: (k, s) => (tracker.onService(k, s), deps.metrics?.countChanges({ services: 1 }), changed()),
    onEndpointSlice: (k, s) => (tracker.onEndpointSlice(k, s), deps.metrics?.countChanges({ endpoints: 1 }), changed()),
    onNode: (n) => {
      tracker.onNode(n);
      if (n) deps.health?.setNodeEligible(isNodeEligible(n));
      changed();
    },
    // The one report of a rejected object or file (the sources leave it to the handler).
    onError: (e) => deps.logger.error({ object: e.object, reason: e.reason }, 'rejected object'),
    onSynced: () => deps.logger.info('sources synced'),
    onChanged: changed,
  };
}

/** Event reasons of the problems recorded on a Service (`event` of an ObjectError; default InvalidService). */
export const EVENT_REASON = {
  invalid: 'InvalidService',
  conflict: 'VirtualServerConflict',
  kernel: 'KernelRefused',
  healthCheck: 'FailedToStartServiceHealthcheck',
  schedulerIgnored: 'SchedulerNotHonoured',
} as const;

/**
 * Logs each object error once, until it goes away (and again if it comes back); an error about a
 * Service is also recorded as an Event on it (the sink deduplicates and rate-limits).
 */
export class ErrorReporter {
  private reported = new Set<string>();

  constructor(
    private readonly logger: Logger,
    private readonly events?: EventSink,
  ) {}

  /** `errors` is every current problem; new ones are logged. */
  report(errors: readonly ObjectError[]): void {
    const now = new Set<string>();
    for (const e of errors) {
      const id = `${e.object}: ${e.reason}`;
      if (!this.reported.has(id) && !now.has(id)) {
        this.logger.error({ object: e.object, reason: e.reason }, 'cannot program object');
        if (this.events && e.object.startsWith('Service ')) {
          this.events.record({ service: e.object.slice('Service '.length), type: 'Warning', reason: e.event ?? EVENT_REASON.invalid, action: 'Programming', note: e.reason });
        }
      }
      now.add(id);
    }
    this.reported = now;
  }
}

/**
 * Kernel refusals as ObjectErrors: about the Service owning the virtual server when `owner` (virtual
 * server id → service port key `ns/name:port/proto`) knows it, else about the kernel object.
 */
export function kernelErrors(errors: ReadonlyArray<{ object: string; error: Error }>, owner: (vs: string) => string | undefined): ObjectError[] {
  return errors.map(({ object, error }) => {
    const key = owner(object.split(' -> ')[0]!);
    if (key === undefined) return { object, reason: error.message };
    const reason = error.message.includes(object) ? error.message : `${object}: ${error.message}`;
    return { object: `Service ${key.slice(0, key.indexOf(':') < 0 ? key.length : key.indexOf(':'))}`, reason, event: EVENT_REASON.kernel };
  });
}

/** Health-check server failures, with kube-proxy's Event reason. */
export function healthCheckErrors(errors: readonly ObjectError[]): ObjectError[] {
  return errors.map((e) => ({ object: e.object, reason: e.reason, event: EVENT_REASON.healthCheck }));
}
