// DeferredHandler: what a source delivers before the proxier exists is held latest-per-key and
// replayed in order on attach; afterwards every call goes straight through.
import { describe, expect, it } from 'vitest';

import type { EndpointSlice, Node, Service } from '../../src/model/k8s.js';
import { DeferredHandler } from '../../src/source/deferred.js';
import type { SourceHandler } from '../../src/source/types.js';

const svc = (ip: string) => ({ spec: { clusterIP: ip } }) as unknown as Service;
const eps = (name: string) => ({ metadata: { name } }) as unknown as EndpointSlice;
const node = { metadata: { name: 'n1' } } as unknown as Node;

function recorder(): SourceHandler & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    onChanged: () => calls.push('changed'),
    onService: (k, s) => calls.push(s ? `svc ${k} ${s.spec.clusterIP}` : `svc- ${k}`),
    onEndpointSlice: (k, s) => calls.push(s ? `eps ${k}` : `eps- ${k}`),
    onNode: (n) => calls.push(n ? `node ${n.metadata.name}` : 'node-'),
    onError: (e) => calls.push(`error ${e.object}`),
    onSynced: () => calls.push('synced'),
  };
}

describe('DeferredHandler', () => {
  it('holds the latest version per key, drops what was added and deleted, replays in order, then forwards', () => {
    const d = new DeferredHandler();
    d.onEndpointSlice('a/e1', eps('e1'));
    d.onService('a/s1', svc('10.0.0.1'));
    d.onService('a/s1', svc('10.0.0.2'));
    d.onService('a/gone', svc('10.0.0.3'));
    d.onService('a/gone', null);
    d.onError({ object: 'Service a/bad', reason: 'x' });
    d.onNode(node);
    d.onSynced();
    const r = recorder();
    d.attach(r);
    expect(r.calls).toEqual(['svc a/s1 10.0.0.2', 'eps a/e1', 'node n1', 'error Service a/bad', 'synced']);
    d.onService('a/s1', null);
    expect(r.calls.at(-1)).toBe('svc- a/s1');
    expect(() => d.attach(recorder())).toThrow(/already attached/);
  });

  it('does not call onSynced on attach before the source synced', () => {
    const d = new DeferredHandler();
    d.onNode(null);
    const r = recorder();
    d.attach(r);
    expect(r.calls).toEqual(['node-']);
    d.onSynced();
    expect(r.calls).toEqual(['node-', 'synced']);
  });

  it('fed a tracker: what it held goes in at once, later objects as they arrive; attach reports them once, replays the rest', () => {
    const d = new DeferredHandler();
    d.onService('a/s1', svc('10.0.0.1'));
    d.onNode(node);
    const sink = recorder();
    d.feed(sink);
    expect(sink.calls).toEqual(['svc a/s1 10.0.0.1']);
    d.onEndpointSlice('a/e1', eps('e1'));
    d.onService('a/s1', null);
    d.onError({ object: 'Service a/bad', reason: 'x' });
    d.onSynced();
    expect(sink.calls).toEqual(['svc a/s1 10.0.0.1', 'eps a/e1', 'svc- a/s1']);
    const r = recorder();
    d.attach(r);
    expect(r.calls).toEqual(['changed', 'node n1', 'error Service a/bad', 'synced']);
    d.onService('a/s2', svc('10.0.0.2'));
    expect(r.calls.at(-1)).toBe('svc a/s2 10.0.0.2');
    expect(sink.calls).toHaveLength(3); // the attached handler feeds the tracker itself
  });

  it('fed nothing before attach: no onChanged; a feed after attach is ignored', () => {
    const d = new DeferredHandler();
    d.feed(recorder());
    const r = recorder();
    d.attach(r);
    expect(r.calls).toEqual([]);
    const late = recorder();
    d.feed(late);
    d.onService('a/s1', svc('10.0.0.1'));
    expect(late.calls).toEqual([]);
    expect(r.calls).toEqual(['svc a/s1 10.0.0.1']);
  });
});
