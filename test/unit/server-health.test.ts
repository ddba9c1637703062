import { createServer, type Server } from 'node:http';

import { afterEach, describe, expect, it } from 'vitest';

import { HealthServer, ListenError, ProxyHealth, formatGoTime, isNodeEligible, type Probe } from '../../src/server/health.js';

const T0 = Date.UTC(2024, 0, 2, 3, 4, 5, 678);
const TIMEOUT = 60_000; // 2 × the default 30 s sync period

/** A ProxyHealth on a clock the test moves by hand. */
function fakeHealth(opts: ConstructorParameters<typeof ProxyHealth>[0] = {}) {
  const clock = { t: T0 };
  const health = new ProxyHealth({ now: () => clock.t, ...opts });
  return { health, clock, advance: (ms: number) => void (clock.t += ms) };
}

describe('ProxyHealth', () => {
  it('is healthy at start-up, with no per-family status', () => {
    const { health } = fakeHealth();
    expect(health.healthTimeoutMs).toBe(TIMEOUT);
    expect(health.nodeEligible).toBe(true);
    expect(health.snapshot()).toEqual({ lastUpdated: 0, currentTime: T0, healthy: true, status: new Map() });
  });

  it('stays healthy while the first sync has not happened, however old the queued change (as kube-proxy)', () => {
    const { health, advance } = fakeHealth();
    health.queued();
    advance(10 * TIMEOUT);
    expect(health.isHealthy()).toBe(true);
  });

  it('turns unhealthy when a queued change reaches the timeout, healthy again after a sync', () => {
    const { health, clock, advance } = fakeHealth();
    health.updated();
    const synced = clock.t;
    advance(5 * TIMEOUT); // no change queued: healthy however long
    expect(health.isHealthy()).toBe(true);
    health.queued();
    advance(TIMEOUT - 1);
    expect(health.isHealthy()).toBe(true);
    advance(1); // exactly healthTimeout old: unhealthy (kube-proxy: healthy iff age < timeout)
    expect(health.snapshot()).toEqual({
      lastUpdated: synced,
      currentTime: clock.t,
      healthy: false,
      status: new Map([['IPv4', { lastUpdated: synced, healthy: false }]]),
    });
    health.updated();
    expect(health.isHealthy()).toBe(true);
  });

  it('keeps the oldest pending change: later queued() calls do not reset it', () => {
    const { health, advance } = fakeHealth();
    health.updated();
    health.queued();
    advance(TIMEOUT / 2);
    health.queued();
    advance(TIMEOUT / 2);
    expect(health.isHealthy()).toBe(false);
  });

  it('tracks families separately when named; unnamed calls apply to every configured family', () => {
    const { health, clock, advance } = fakeHealth({ families: ['IPv4', 'IPv6'] });
    health.updated();
    expect([...health.snapshot().status.keys()]).toEqual(['IPv4', 'IPv6']);
    health.queued('IPv6');
    advance(TIMEOUT);
    health.updated('IPv4');
    const s = health.snapshot();
    expect(s.healthy).toBe(false);
    expect(s.lastUpdated).toBe(clock.t);
    expect(s.status.get('IPv4')).toEqual({ lastUpdated: clock.t, healthy: true });
    expect(s.status.get('IPv6')).toEqual({ lastUpdated: T0, healthy: false });
    health.updated('IPv6');
    expect(health.isHealthy()).toBe(true);
  });

  it('derives the timeout from the sync period, or takes it directly; refuses a non-positive one', () => {
    expect(new ProxyHealth({ syncPeriodMs: 5_000 }).healthTimeoutMs).toBe(10_000);
    expect(new ProxyHealth({ syncPeriodMs: 5_000, healthTimeoutMs: 7 }).healthTimeoutMs).toBe(7);
    expect(() => new ProxyHealth({ healthTimeoutMs: 0 })).toThrow(RangeError);
  });
});

describe('isNodeEligible', () => {
  it('refuses a node being deleted or tainted ToBeDeletedByClusterAutoscaler, accepts others', () => {
    expect(isNodeEligible({})).toBe(true);
    expect(isNodeEligible({ spec: { taints: [{ key: 'other' }] } })).toBe(true);
    expect(isNodeEligible({ spec: { taints: [{ key: 'other' }, { key: 'ToBeDeletedByClusterAutoscaler' }] } })).toBe(false);
    expect(isNodeEligible({ metadata: { deletionTimestamp: '2024-01-01T00:00:00Z' } })).toBe(false);
    expect(isNodeEligible({ metadata: { deletionTimestamp: null }, spec: { taints: null } })).toBe(true);
  });
});

describe('formatGoTime', () => {
  it("prints Go's RFC3339Nano in UTC: trailing zeros trimmed, zero time for 0", () => {
    expect(formatGoTime(T0)).toBe('2024-01-02T03:04:05.678Z');
    expect(formatGoTime(Date.UTC(2024, 0, 2, 3, 4, 5, 500))).toBe('2024-01-02T03:04:05.5Z');
    expect(formatGoTime(Date.UTC(2024, 0, 2, 3, 4, 5))).toBe('2024-01-02T03:04:05Z');
    expect(formatGoTime(0)).toBe('0001-01-01T00:00:00Z');
  });
});

describe('HealthServer', () => {
  const cleanup: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f();
  });

  async function serve() {
    const h = fakeHealth();
    const probes: Array<[Probe, number]> = [];
    const server = new HealthServer(h.health, { host: '127.0.0.1', port: 0 }, { onProbe: (p, c) => probes.push([p, c]) });
    await server.start();
    cleanup.push(() => server.stop());
    const base = `http://127.0.0.1:${server.address()!.port}`;
    const get = async (path: string) => {
      const r = await fetch(base + path);
      return { status: r.status, type: r.headers.get('content-type'), nosniff: r.headers.get('x-content-type-options'), text: await r.text() };
    };
    return { ...h, server, probes, get };
  }

  it('answers kube-proxy JSON: 200 at start, lastUpdated = currentTime while healthy', async () => {
    const { get } = await serve();
    const now = formatGoTime(T0);
    expect(await get('/healthz')).toEqual({
      status: 200,
      type: 'application/json',
      nosniff: 'nosniff',
      text: `{"lastUpdated":"${now}","currentTime":"${now}","nodeEligible":true,"healthy":true}`,
    });
    expect((await get('/livez')).text).toBe(`{"lastUpdated":"${now}","currentTime":"${now}","healthy":true}`);
  });

  it('reports per-family status after a sync, and 503 with the real lastUpdated when a queued change is stale', async () => {
    const { get, health, advance, clock, probes } = await serve();
    health.updated();
    const synced = formatGoTime(clock.t);
    advance(1_000);
    const now1 = formatGoTime(clock.t);
    expect(JSON.parse((await get('/healthz')).text)).toEqual({
      lastUpdated: now1,
      currentTime: now1,
      nodeEligible: true,
      healthy: true,
      status: { IPv4: { lastUpdated: synced, healthy: true } },
    });

    health.queued();
    advance(TIMEOUT);
    const now2 = formatGoTime(clock.t);
    const stale = await get('/healthz');
    expect(stale.status).toBe(503);
    expect(stale.text).toBe(
      `{"lastUpdated":"${synced}","currentTime":"${now2}","nodeEligible":true,"healthy":false,"status":{"IPv4":{"lastUpdated":"${synced}","healthy":false}}}`,
    );
    expect((await get('/livez')).status).toBe(503);

    health.updated();
    expect((await get('/healthz')).status).toBe(200);
    expect((await get('/livez')).status).toBe(200);
    expect(probes).toEqual([
      ['healthz', 200],
      ['healthz', 503],
      ['livez', 503],
      ['healthz', 200],
      ['livez', 200],
    ]);
  });

  it('/healthz is 503 when the node is not eligible, /livez stays 200', async () => {
    const { get, health } = await serve();
    health.updated();
    health.setNodeEligible(false);
    const hz = await get('/healthz');
    expect(hz.status).toBe(503);
    expect(JSON.parse(hz.text)).toMatchObject({ nodeEligible: false, healthy: true });
    const lz = await get('/livez');
    expect(lz.status).toBe(200);
    expect(JSON.parse(lz.text)).not.toHaveProperty('nodeEligible');
    health.setNodeEligible(true);
    expect((await get('/healthz')).status).toBe(200);
  });

  it('ignores the query string, answers 404 elsewhere as Go does', async () => {
    const { get } = await serve();
    expect((await get('/healthz?verbose')).status).toBe(200);
    expect(await get('/healthz/')).toMatchObject({ status: 404, text: '404 page not found\n' });
    expect((await get('/')).status).toBe(404);
  });

  it('rejects start() with an error naming the address when the port is taken', async () => {
    const blocker: Server = createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
    cleanup.push(() => new Promise<void>((r) => blocker.close(() => r())));
    const port = (blocker.address() as { port: number }).port;
    const server = new HealthServer(new ProxyHealth(), { host: '127.0.0.1', port });
    const err = await server.start().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ListenError);
    expect(err).toMatchObject({ code: 'EADDRINUSE', bindAddress: `127.0.0.1:${port}` });
    expect((err as Error).message).toBe(`failed to start proxy healthz on 127.0.0.1:${port}: address already in use (EADDRINUSE)`);
    expect(server.address()).toBeNull();
  });

  it('can start again after a failed start, a stop, or concurrently', async () => {
    const blocker: Server = createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
    const port = (blocker.address() as { port: number }).port;
    const server = new HealthServer(new ProxyHealth(), { host: '127.0.0.1', port });
    cleanup.push(() => server.stop());
    await expect(server.start()).rejects.toThrow(ListenError);
    await new Promise<void>((r) => blocker.close(() => r()));
    await Promise.all([server.start(), server.start()]);
    expect(server.address()).toEqual({ host: '127.0.0.1', port });
    await server.stop();
    await server.start();
    expect((await fetch(`http://127.0.0.1:${port}/livez`)).status).toBe(200);
  });

  it('names IPv6 addresses in brackets and explains an address that is not local', async () => {
    const server = new HealthServer(new ProxyHealth(), { host: '192.0.2.1', port: 0 });
    await expect(server.start()).rejects.toThrow('failed to start proxy healthz on 192.0.2.1:0: cannot assign requested address');
    const v6 = new HealthServer(new ProxyHealth(), { host: '2001:db8::1', port: 10256 });
    await expect(v6.start()).rejects.toThrow(/^failed to start proxy healthz on \[2001:db8::1\]:10256: /);
  });

  it('stops cleanly: the port is released and stop() twice is harmless', async () => {
    const { server, get } = await serve();
    const port = server.address()!.port;
    await get('/livez'); // leaves a keep-alive connection open
    await server.stop();
    await server.stop();
    expect(server.address()).toBeNull();
    await expect(fetch(`http://127.0.0.1:${port}/livez`)).rejects.toThrow();
  });
});
