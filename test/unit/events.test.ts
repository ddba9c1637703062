// Events on Services through a fake API server over real HTTP: the events.k8s.io/v1 body, series
// updates instead of duplicates, the per-Service rate limit, and API failures that never reach
// the proxy. Also the hook: ErrorReporter turns per-Service problems into Events.
import { createServer, type Server } from 'node:http';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { parseArgs } from '../../src/config.js';
import { FakeIpsetClient } from '../../src/kernel/ipset/fake.js';
import { FakeIpvsClient } from '../../src/kernel/ipvs/fake.js';
import type { Iptables } from '../../src/kernel/iptables.js';
import { FakeLinkClient } from '../../src/kernel/link.js';
import { createLogger } from '../../src/log-json.js';
import { serviceSchema } from '../../src/model/k8s-schemas.js';
import { ErrorReporter, healthCheckErrors, kernelErrors } from '../../src/proxy/handler.js';
import { IpvsProxier } from '../../src/proxy/ipvs/proxier.js';
import { EventRecorder, kubeTransport, type EventSink, type ServiceEvent } from '../../src/source/events.js';
import { loadKubeConfig } from '../../src/source/kubernetes.js';

type Req = { method: string; url: string; contentType: string; body: Record<string, unknown> };

/** Answers events requests with `answer(req)` (default 201 / 200) and records them. */
class FakeEventsApi {
  readonly requests: Req[] = [];
  answer: (r: Req) => number | 'hang' = (r) => (r.method === 'POST' ? 201 : 200);
  #server: Server | undefined;
  url = '';

  async listen(): Promise<void> {
    this.#server = createServer((req, res) => {
      let text = '';
      req.setEncoding('utf8').on('data', (d: string) => (text += d));
      req.on('end', () => {
        const r: Req = { method: req.method!, url: req.url!, contentType: req.headers['content-type'] ?? '', body: JSON.parse(text || '{}') };
        this.requests.push(r);
        const status = this.answer(r);
        if (status === 'hang') return;
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(status < 300 ? r.body : { kind: 'Status', code: status }));
      });
    });
    await new Promise<void>((r) => this.#server!.listen(0, '127.0.0.1', r));
    const addr = this.#server.address();
    this.url = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
  }

  async close(): Promise<void> {
    this.#server?.closeAllConnections();
    await new Promise<void>((r) => this.#server?.close(() => r()) ?? r());
  }
}

const T0 = Date.parse('2026-11-23T11:35:16.123Z');
let api: FakeEventsApi;
let clock: number;
let logs: Array<Record<string, unknown>>;

function recorder(opts: Partial<ConstructorParameters<typeof EventRecorder>[0]> = {}, url = api.url, timeoutMs = 10_000): EventRecorder {
  const logger = createLogger({ format: 'json', verbosity: 2 }, { write: (l: string) => (logs.push(JSON.parse(l)), true) } as never);
  return new EventRecorder({ transport: kubeTransport(loadKubeConfig({ master: url }), timeoutMs), reportingInstance: 'kube-ipvs-proxy-node-1', logger, now: () => clock, minIntervalMs: 0, ...opts });
}

const conflict: ServiceEvent = { service: 'demo/web', type: 'Warning', reason: 'VirtualServerConflict', action: 'Programming', note: 'tcp/10.96.0.10:80 is already programmed for demo/api:http/tcp' };

beforeEach(async () => {
  api = new FakeEventsApi();
  await api.listen();
  clock = T0;
  logs = [];
});
afterEach(async () => {
  await api.close();
});

describe('EventRecorder', () => {
  it('creates an events.k8s.io/v1 Event regarding the Service, with its uid', async () => {
    const rec = recorder();
    rec.uidsFrom((service) => (service === 'demo/web' ? 'uid-web' : undefined));
    rec.record(conflict);
    await rec.flush();
    expect(api.requests).toHaveLength(1);
    const [r] = api.requests;
    expect([r!.method, r!.url, r!.contentType]).toEqual(['POST', '/apis/events.k8s.io/v1/namespaces/demo/events', 'application/json']);
    expect(r!.body).toEqual({
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      metadata: { namespace: 'demo', name: expect.stringMatching(/^web\.[0-9a-f]+$/) },
      eventTime: '2026-11-23T11:35:16.123000Z',
      reportingController: 'kube-ipvs-proxy',
      reportingInstance: 'kube-ipvs-proxy-node-1',
      action: 'Programming',
      reason: 'VirtualServerConflict',
      regarding: { apiVersion: 'v1', kind: 'Service', namespace: 'demo', name: 'web', uid: 'uid-web' },
      note: conflict.note,
      type: 'Warning',
    });
    expect(rec.stats).toMatchObject({ created: 1, failed: 0 });
  });

  it('updates the series of the same Event for the same reason and note; a new note is a new Event', async () => {
    const rec = recorder();
    rec.record(conflict);
    await rec.flush();
    const name = (api.requests[0]!.body.metadata as { name: string }).name;
    clock += 5_000;
    rec.record(conflict);
    await rec.flush();
    clock += 5_000;
    rec.record(conflict);
    await rec.flush();
    expect(api.requests.map((r) => [r.method, r.url, r.contentType])).toEqual([
      ['POST', '/apis/events.k8s.io/v1/namespaces/demo/events', 'application/json'],
      ['PATCH', `/apis/events.k8s.io/v1/namespaces/demo/events/${name}`, 'application/merge-patch+json'],
      ['PATCH', `/apis/events.k8s.io/v1/namespaces/demo/events/${name}`, 'application/merge-patch+json'],
    ]);
    expect(api.requests[1]!.body).toEqual({ series: { count: 2, lastObservedTime: '2026-11-23T11:35:21.123000Z' } });
    expect(api.requests[2]!.body).toEqual({ series: { count: 3, lastObservedTime: '2026-11-23T11:35:26.123000Z' } });

    rec.record({ ...conflict, note: 'another problem' });
    await rec.flush();
    expect(api.requests[3]).toMatchObject({ method: 'POST', body: { note: 'another problem' } });
  });

  it('coalesces repeats made while a write is in flight into one series update', async () => {
    const rec = recorder();
    for (let i = 0; i < 5; i++) rec.record(conflict);
    await rec.flush();
    expect(api.requests.map((r) => r.method)).toEqual(['POST', 'PATCH']);
    expect(api.requests[0]!.body.series).toBeUndefined();
    expect(api.requests[1]!.body).toMatchObject({ series: { count: 5 } });
  });

  it('creates a new Event when the one to patch is gone (404)', async () => {
    const rec = recorder();
    rec.record(conflict);
    await rec.flush();
    api.answer = (r) => (r.method === 'PATCH' ? 404 : 201);
    rec.record(conflict);
    await rec.flush();
    expect(api.requests.map((r) => r.method)).toEqual(['POST', 'PATCH', 'POST']);
    expect(api.requests[2]!.body).toMatchObject({ reason: 'VirtualServerConflict', series: { count: 2 } });
  });

  it('rate-limits per Service: a burst, then one per refill interval; other Services are not affected', async () => {
    const rec = recorder({ burst: 3, refillMs: 60_000 });
    for (let i = 0; i < 5; i++) rec.record({ ...conflict, note: `problem ${i}` });
    rec.record({ ...conflict, service: 'demo/api' });
    await rec.flush();
    expect(api.requests.map((r) => `${(r.body.regarding as { name: string }).name}: ${r.body.note as string}`)).toEqual([
      'web: problem 0', 'web: problem 1', 'web: problem 2', `api: ${conflict.note}`,
    ]);
    expect(rec.stats.dropped).toBe(2);
    clock += 59_000;
    rec.record({ ...conflict, note: 'problem 5' });
    clock += 1_000;
    rec.record({ ...conflict, note: 'problem 6' });
    rec.record({ ...conflict, note: 'problem 7' });
    await rec.flush();
    expect(api.requests.slice(4).map((r) => r.body.note)).toEqual(['problem 6']);
    expect(rec.stats.dropped).toBe(4);
  });

  it('survives API errors: 403, a refused connection and a server that never answers; one warning', async () => {
    api.answer = () => 403;
    const rec = recorder();
    rec.record(conflict);
    rec.record({ ...conflict, note: 'second' });
    await rec.flush();
    expect(rec.stats).toMatchObject({ failed: 2, created: 0 });
    const warnings = logs.filter((l) => l.level === 40);
    expect(warnings).toEqual([expect.objectContaining({ service: 'demo/web', reason: 'VirtualServerConflict', status: 403, msg: expect.stringContaining('cannot record an Event') })]);

    api.answer = () => 'hang';
    const impatient = recorder({}, api.url, 500);
    impatient.record({ ...conflict, note: 'third' });
    await impatient.flush();
    expect(impatient.stats.failed).toBe(1);

    const down = recorder({}, 'http://127.0.0.1:1');
    expect(() => down.record(conflict)).not.toThrow();
    await down.flush();
    expect(down.stats.failed).toBe(1);

    api.answer = () => 201;
    rec.record({ ...conflict, note: 'fourth' });
    await rec.flush();
    expect(rec.stats.created).toBe(1);
    expect(logs.some((l) => l.msg === 'events: recording works again')).toBe(true);
  }, 15_000);

  it('truncates a note to the API limit of 1 kB', async () => {
    const rec = recorder();
    rec.record({ ...conflict, note: 'x'.repeat(5000) });
    rec.record({ ...conflict, note: 'é'.repeat(5000) });
    await rec.flush();
    expect((api.requests[0]!.body.note as string).length).toBe(1024);
    const accented = api.requests[1]!.body.note as string;
    expect(Buffer.byteLength(accented)).toBeLessThanOrEqual(1024);
    expect(accented.endsWith('é...')).toBe(true);
  });
});

describe('ErrorReporter → Events', () => {
  function sink(): { events: ServiceEvent[]; sink: EventSink } {
    const events: ServiceEvent[] = [];
    return { events, sink: { record: (e) => events.push(e) } };
  }
  const logger = createLogger({ format: 'json', verbosity: 0 }, { write: () => true } as never);

  it('records new per-Service problems once, with their reasons; not EndpointSlice or file problems', () => {
    const { events, sink: s } = sink();
    const reporter = new ErrorReporter(logger, s);
    const invalid = { object: 'Service demo/fancy', reason: 'unknown scheduler "fancy" (annotation kube-ipvs-proxy.io/scheduler)' };
    const current = [
      invalid,
      { object: 'Service demo/web', reason: 'tcp/10.96.0.10:80 is already programmed', event: 'VirtualServerConflict' },
      { object: 'EndpointSlice demo/web-abc', reason: 'bad address' },
      ...healthCheckErrors([{ object: 'Service demo/lb', reason: 'failed to start healthcheck on port 30000: EADDRINUSE' }]),
      ...kernelErrors(
        [
          { object: 'tcp/10.96.0.11:80 -> 10.244.0.5:8080', error: new Error('ipvs.addDestination tcp/10.96.0.11:80 -> 10.244.0.5:8080: EINVAL') },
          { object: 'KUBE-CLUSTER-IP 10.96.0.12,tcp:80', error: new Error('ipset.add: IPSET_ERR_TYPE_MISMATCH') },
        ],
        (vs) => (vs === 'tcp/10.96.0.11:80' ? 'demo/api:http/tcp' : undefined),
      ),
    ];
    reporter.report(current);
    reporter.report(current);
    expect(events).toEqual([
      { service: 'demo/fancy', type: 'Warning', reason: 'InvalidService', action: 'Programming', note: invalid.reason },
      { service: 'demo/web', type: 'Warning', reason: 'VirtualServerConflict', action: 'Programming', note: 'tcp/10.96.0.10:80 is already programmed' },
      { service: 'demo/lb', type: 'Warning', reason: 'FailedToStartServiceHealthcheck', action: 'Programming', note: 'failed to start healthcheck on port 30000: EADDRINUSE' },
      { service: 'demo/api', type: 'Warning', reason: 'KernelRefused', action: 'Programming', note: 'ipvs.addDestination tcp/10.96.0.11:80 -> 10.244.0.5:8080: EINVAL' },
    ]);
    reporter.report([]);
    reporter.report([invalid]);
    expect(events).toHaveLength(5);
  });

  it('keeps reporting when the recorder cannot reach the API server', async () => {
    const rec = recorder({}, 'http://127.0.0.1:1');
    const reporter = new ErrorReporter(logger, rec);
    expect(() => reporter.report([{ object: 'Service demo/web', reason: 'broken' }])).not.toThrow();
    await rec.flush();
    expect(rec.stats.failed).toBe(1);
  });
});

describe('IpvsProxier → Events over HTTP', () => {
  const svc = (name: string, ip: string, annotations: Record<string, string> = {}) =>
    serviceSchema.parse({ metadata: { name, namespace: 'ns', uid: `uid-${name}`, annotations }, spec: { clusterIP: ip, externalIPs: name === 'thief' ? ['10.96.0.10'] : [], ports: [{ name: 'http', port: 80, targetPort: 8080 }] } });

  it('records an unknown scheduler, a claimed VIP and a kernel refusal on their Services, once each', async () => {
    const ipvs = new FakeIpvsClient();
    ipvs.schedulers.delete('mh'); // the kernel lacks the module: ENOENT on add
    const link = new FakeLinkClient();
    link.addLink('eth0', null, true, ['192.0.2.10']);
    const iptables = { sync: async () => [], saveOwned: async () => new Map(), generation: async () => null } as unknown as Iptables;
    const rec = recorder();
    const text: string[] = [];
    const proxier = new IpvsProxier({
      config: parseArgs(['--hostname-override', 'n1']).config,
      nodeName: 'n1',
      logger: createLogger({ format: 'text', verbosity: 0 }, { write: (l: string) => (text.push(l), true) } as never),
      dummyName: 'kube-ipvs0',
      clients: { ipvs, ipset: new FakeIpsetClient(), link, iptables: { ipv4: iptables, ipv6: null } },
      events: rec,
      sysctl: () => [],
    });
    rec.uidsFrom((service) => proxier.tracker.uidOf(service));
    const handler = proxier.handler(() => {});
    handler.onService('ns/web', svc('web', '10.96.0.10'));
    handler.onService('ns/thief', svc('thief', '10.96.0.11'));
    handler.onService('ns/fancy', svc('fancy', '10.96.0.12', { 'kube-ipvs-proxy.io/scheduler': 'fancy' }));
    handler.onService('ns/hashed', svc('hashed', '10.96.0.13', { 'kube-ipvs-proxy.io/scheduler': 'mh' }));
    await proxier.sync({ full: true }).catch(() => undefined);
    await proxier.sync({ full: true }).catch(() => undefined);
    await rec.flush();
    const got = api.requests.map((r) => {
      const b = r.body as { reason: string; regarding: { name: string; uid: string }; note: string };
      return [r.method, b.regarding.name, b.regarding.uid, b.reason];
    });
    expect(got.sort()).toEqual([
      ['POST', 'fancy', 'uid-fancy', 'InvalidService'],
      ['POST', 'hashed', 'uid-hashed', 'KernelRefused'],
      ['POST', 'thief', 'uid-thief', 'VirtualServerConflict'],
    ]);
    expect(api.requests.find((r) => r.body.reason === 'KernelRefused')!.body.note).toMatch(/scheduler "mh" is not available in the kernel/);
    // the log names the same objects, one line each
    expect(text.filter((l) => l.includes('ERROR cannot program object')).map((l) => /object="([^"]+)"/.exec(l)![1]).sort()).toEqual([
      'Service ns/fancy', 'Service ns/hashed', 'Service ns/thief',
    ]);
    expect(text.find((l) => l.includes(' INFO synced '))).toMatch(/^\S+ INFO synced full=true durationMs=\d+ changedServices=\d+ ops\.virtualServers=\d+ ops\.addService=\d+ .*errors=1( |\n)/);
  });
});
