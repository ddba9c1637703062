// The proxiers' SourceHandler marks health and metrics once per burst of events, with one reading
// of the clock for both (each is a syscall that is slow in UML), and asks for a sync on every event;
// it counts the changes (kube-proxy's *_changes_total) and the tracker's pending ones (*_pending).
import { describe, expect, it } from 'vitest';

import { ChangeTracker } from '../../src/proxy/changetracker.js';
import { trackerHandler } from '../../src/proxy/handler.js';
import { createLogger } from '../../src/log-json.js';
import type { ProxyHealth } from '../../src/server/health.js';
import { ProxyMetrics } from '../../src/server/metrics.js';
import { slice, svc } from './lib/objects.js';

describe('trackerHandler', () => {
  it('marks a burst of events as queued once, and the next burst again', async () => {
    const calls = { now: 0, queued: 0, syncQueued: 0, onChange: 0 };
    const at: unknown[] = [];
    const health = { now: () => 1_000 + calls.now++, queued: (_f: unknown, t: number) => (calls.queued++, at.push(t)) } as unknown as ProxyHealth;
    const metrics = { syncQueued: (t: number) => (calls.syncQueued++, at.push(t)), trackObjects: () => {}, countChanges: () => {} } as unknown as ProxyMetrics;
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

  it("counts each Service and EndpointSlice change, and what no sync has taken yet", async () => {
    const metrics = new ProxyMetrics({ defaultMetrics: false });
    const tracker = new ChangeTracker('n1');
    const logger = createLogger({ format: 'json', verbosity: 0 }, { write: () => true } as never);
    const h = trackerHandler(tracker, { logger, metrics }, () => {});
    const value = async (name: string) => Number((await metrics.expose()).split('\n').find((l) => l.startsWith(`${name} `))?.split(' ')[1]);
    h.onService('ns/a', svc('a', '10.96.0.1'));
    h.onService('ns/a', svc('a', '10.96.0.1', { x: 'y' }));
    h.onService('ns/b', svc('b', '10.96.0.2'));
    h.onEndpointSlice('ns/a-1', slice('a', ['10.244.1.1']));
    expect(await value('kubeproxy_sync_proxy_rules_service_changes_total')).toBe(3);
    expect(await value('kubeproxy_sync_proxy_rules_endpoint_changes_total')).toBe(1);
    expect(await value('kubeproxy_sync_proxy_rules_service_changes_pending')).toBe(2);
    expect(await value('kubeproxy_sync_proxy_rules_endpoint_changes_pending')).toBe(1);
    tracker.takeChanged(); // what a sync does
    expect(await value('kubeproxy_sync_proxy_rules_service_changes_pending')).toBe(0);
    expect(await value('kubeproxy_sync_proxy_rules_endpoint_changes_pending')).toBe(0);
    expect(await value('kubeproxy_sync_proxy_rules_service_changes_total')).toBe(3);
  });
});
