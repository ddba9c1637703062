import { createServer, type Server } from 'node:http';

import { afterEach, describe, expect, it } from 'vitest';

import { ServiceHealthServers, serviceHealthBody, type ServiceHealthTarget } from '../../src/server/servicehealth.js';

const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

/** A plain server on host:port (port 0 = any free one); closed after the test. */
async function occupy(host = '127.0.0.1', port = 0): Promise<{ port: number; close: () => Promise<void> }> {
  const s: Server = createServer((_q, r) => r.end('blocker'));
  await new Promise<void>((resolve, reject) => s.once('error', reject).listen(port, host, resolve));
  let closed = false;
  const close = () => (closed ? Promise.resolve() : ((closed = true), new Promise<void>((r) => (s.close(() => r()), s.closeAllConnections()))));
  cleanup.push(close);
  return { port: (s.address() as { port: number }).port, close };
}

/** A port that was free a moment ago. */
async function freePort(): Promise<number> {
  const o = await occupy();
  await o.close();
  return o.port;
}

function servers(opts: ConstructorParameters<typeof ServiceHealthServers>[0] = {}) {
  const s = new ServiceHealthServers({ nodeAddresses: ['127.0.0.1'], ...opts });
  cleanup.push(() => s.close());
  return s;
}

const want = (...entries: Array<[number, string, number]>) =>
  new Map<number, ServiceHealthTarget>(entries.map(([port, service, localEndpoints]) => [port, { service, localEndpoints }]));

async function probe(port: number, host = '127.0.0.1') {
  const r = await fetch(`http://${host}:${port}/`);
  return {
    status: r.status,
    type: r.headers.get('content-type'),
    nosniff: r.headers.get('x-content-type-options'),
    weight: r.headers.get('x-load-balancing-endpoint-weight'),
    text: await r.text(),
  };
}

describe('serviceHealthBody', () => {
  it("is kube-proxy's tab-indented JSON without a trailing newline", () => {
    expect(serviceHealthBody('ns/svc', 2, true)).toBe(
      '{\n\t"service": {\n\t\t"namespace": "ns",\n\t\t"name": "svc"\n\t},\n\t"localEndpoints": 2,\n\t"serviceProxyHealthy": true\n}',
    );
    expect(JSON.parse(serviceHealthBody('ns/svc', 0, false))).toEqual({
      service: { namespace: 'ns', name: 'svc' },
      localEndpoints: 0,
      serviceProxyHealthy: false,
    });
  });
});

describe('ServiceHealthServers', () => {
  it('opens a port per service: 503 without local endpoints, 200 with, as kube-proxy', async () => {
    const s = servers();
    const port = await freePort();
    expect(await s.sync(want([port, 'ns/web', 0]))).toEqual([]);
    expect(s.ports()).toEqual([port]);
    expect(await probe(port)).toEqual({
      status: 503,
      type: 'application/json',
      nosniff: 'nosniff',
      weight: '0',
      text: serviceHealthBody('ns/web', 0, true),
    });
    await s.sync(want([port, 'ns/web', 3]));
    expect(await probe(port)).toMatchObject({ status: 200, weight: '3', text: serviceHealthBody('ns/web', 3, true) });
  });

  it('answers 503 with serviceProxyHealthy false while the proxy is unhealthy', async () => {
    const proxy = { healthy: true, isHealthy() { return this.healthy; } };
    const s = servers({ proxyHealth: proxy });
    const port = await freePort();
    await s.sync(want([port, 'ns/web', 2]));
    expect((await probe(port)).status).toBe(200);
    proxy.healthy = false;
    expect(await probe(port)).toMatchObject({ status: 503, text: serviceHealthBody('ns/web', 2, false) });
  });

  it('closes ports no longer wanted and keeps the rest', async () => {
    const s = servers();
    const [a, b] = [await freePort(), await freePort()];
    await s.sync(want([a, 'ns/a', 1], [b, 'ns/b', 1]));
    expect(s.ports()).toEqual([a, b].sort((x, y) => x - y));
    await s.sync(want([b, 'ns/b', 4]));
    expect(s.ports()).toEqual([b]);
    await expect(fetch(`http://127.0.0.1:${a}/`)).rejects.toThrow();
    expect((await probe(b)).weight).toBe('4');
  });

  it('a port that changes service keeps its listener and reports the new service', async () => {
    const s = servers();
    const port = await freePort();
    await s.sync(want([port, 'ns/old', 1]));
    await s.sync(want([port, 'other/new', 5]));
    expect(s.target(port)).toEqual({ service: 'other/new', localEndpoints: 5 });
    expect(JSON.parse((await probe(port)).text)).toMatchObject({ service: { namespace: 'other', name: 'new' }, localEndpoints: 5 });
  });

  it('reports a port in use for its service only, serves the others, and retries on the next sync', async () => {
    const s = servers({ hostname: 'node-1' });
    const blocker = await occupy();
    const free = await freePort();
    const errors = await s.sync(want([blocker.port, 'ns/taken', 1], [free, 'ns/ok', 1]));
    expect(errors).toHaveLength(1);
    const [e] = errors;
    expect(e).toMatchObject({
      object: 'Service ns/taken',
      reason: `failed to start healthcheck on port ${blocker.port}: 127.0.0.1:${blocker.port}: address already in use (EADDRINUSE)`,
      service: 'ns/taken',
      port: blocker.port,
      message: `node node-1 failed to start healthcheck "ns/taken" on port ${blocker.port}: 127.0.0.1:${blocker.port}: address already in use (EADDRINUSE)`,
    });
    expect(e!.error.code).toBe('EADDRINUSE');
    expect(s.ports()).toEqual([free]);
    expect((await probe(free)).status).toBe(200);
    expect((await probe(blocker.port)).text).toBe('blocker');

    await blocker.close();
    expect(await s.sync(want([blocker.port, 'ns/taken', 1], [free, 'ns/ok', 1]))).toEqual([]);
    expect(JSON.parse((await probe(blocker.port)).text)).toMatchObject({ service: { name: 'taken' } });
  });

  it('listens on every node address; a failure on one closes the others for that port', async () => {
    const s = servers({ nodeAddresses: ['127.0.0.1', '127.0.0.2'] });
    const port = await freePort();
    await s.sync(want([port, 'ns/web', 1]));
    expect((await probe(port, '127.0.0.1')).status).toBe(200);
    expect((await probe(port, '127.0.0.2')).status).toBe(200);
    await s.sync(new Map());

    await occupy('127.0.0.2', port);
    const errors = await s.sync(want([port, 'ns/web', 1]));
    expect(errors.map((e) => e.reason)).toEqual([`failed to start healthcheck on port ${port}: 127.0.0.2:${port}: address already in use (EADDRINUSE)`]);
    expect(s.ports()).toEqual([]);
    await expect(fetch(`http://127.0.0.1:${port}/`)).rejects.toThrow();
  });

  it('opens each IP family on its own: a port held on the IPv6 address fails that family only, reported and retried', async () => {
    const s = servers({ nodeAddresses: ['127.0.0.1', '::1'], hostname: 'node-1' });
    const port = await freePort();
    const blocker = await occupy('::1', port);
    const errors = await s.sync(want([port, 'ns/web', 1]));
    expect(errors.map((e) => [e.object, e.reason])).toEqual([['Service ns/web', `failed to start healthcheck on port ${port}: [::1]:${port}: address already in use (EADDRINUSE)`]]);
    expect(s.ports()).toEqual([port]);
    expect((await probe(port)).status).toBe(200); // IPv4 clients are still answered
    expect((await probe(port, '[::1]')).text).toBe('blocker');
    // Reported again by every sync while it fails; opened by the first one after it is free.
    expect(await s.sync(want([port, 'ns/web', 1]))).toHaveLength(1);
    await blocker.close();
    expect(await s.sync(want([port, 'ns/web', 1]))).toEqual([]);
    expect(JSON.parse((await probe(port, '[::1]')).text)).toMatchObject({ service: { name: 'web' } });
  });

  it('applies overlapping sync() calls in order, and close() releases every port', async () => {
    const s = servers();
    const [a, b] = [await freePort(), await freePort()];
    const first = s.sync(want([a, 'ns/a', 1]));
    const second = s.sync(want([b, 'ns/b', 2]));
    await Promise.all([first, second]);
    expect(s.ports()).toEqual([b]);
    await s.close();
    expect(s.ports()).toEqual([]);
    await expect(fetch(`http://127.0.0.1:${b}/`)).rejects.toThrow();
  });
});
