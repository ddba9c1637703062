// The proxiers' SourceHandler marks health and metrics once per burst of events, with one reading
// of the clock for both (each is a syscall that is slow in UML), and asks for a sync on every event.
import { describe, expect, it } from 'vitest';

import { ChangeTracker } from '../../src/proxy/changetracker.js';
import { trackerHandler } from '../../src/proxy/handler.js';
import { createLogger } from '../../src/log-json.js';
import type { ProxyHealth } from '../../src/server/health.js';
import type { ProxyMetrics } from '../../src/server/metrics.js';
import { slice, svc } from './lib/objects.js';

describe('trackerHandler', () => {
  it('marks a burst of events as queued once, and the next burst again', async () => {
    const calls = { now: 0, queued: 0, syncQueued: 0, onChange: 0 };
    const at: unknown[] = [];
    const health = { now: () => 1_000 + calls.now++, queued: (_f: unknown, t: number) => (calls.queued++, at.push(t)) } as unknown as ProxyHealth;
    const metrics = { syncQueued: (t: number) => (calls.syncQueued++, at.push(t)), trackObjects: () => {} } as unknown as ProxyMetrics;
    const logger = createLogger({ format: 'json', verbosity: 0 }, { write: () => true } as never);
    const h = trackerHandler(new ChangeTracker('n1'), { logger, health, metrics }, () => calls.onChange++);
    for (let i = 0; i < 50; i++) {
      h.onService(`ns/s${i}`, svc(`s${i}`, `10.96.0.${i + 1}`));
      h.onEndpointSlice(`ns/s${i}-1`, slice(`s${i}`, [`10.244.1.${i + 1}`]));
    }
    expect(calls).toEqual({ now: 1, queued: 1, syncQueued: 1, onChange: 100 });
    await Promise.resolve();
    h.onService('ns/x', svc('x', '10.96.1.1'));
    expect(calls).toEqual({ now: 2, queued: 2, syncQueued: 2, onChange: 101 });
    expect(at).toEqual([1_000, 1_000, 1_001, 1_001]); // one reading of the clock per mark, for both
  });
});
