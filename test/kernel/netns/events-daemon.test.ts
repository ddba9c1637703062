// End to end in a fresh network namespace: the built daemon in API mode (--master, a fake API
// server over HTTP on loopback), iptables mode on the host kernel. Per-Service problems become
// events.k8s.io/v1 Events on the Service with its uid; a failing events endpoint (403) is logged
// once and never stops the daemon from programming the kernel.
import { assertIsolated } from '../lib/guard.js';
assertIsolated();

import { execFileSync } from 'node:child_process';
import { createServer, type Server, type ServerResponse } from 'node:http';

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { CLI, Daemon, waitFor } from '../lib/daemon.js';

type Obj = Record<string, unknown>;
const svc = (name: string, ip: string, annotations: Record<string, string> = {}): Obj => ({
  metadata: { name, namespace: 'demo', uid: `uid-${name}`, resourceVersion: '1', annotations },
  spec: { type: 'ClusterIP', clusterIP: ip, clusterIPs: [ip], ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }] },
});
const LISTS: Record<string, [string, string, Obj[]]> = {
  '/api/v1/services': ['v1', 'ServiceList', [
    svc('hashed', '10.96.0.40', { 'kube-ipvs-proxy.io/scheduler': 'sh' }),
    svc('fancy', '10.96.0.41', { 'kube-ipvs-proxy.io/scheduler': 'fancy' }),
    svc('plain', '10.96.0.42'),
  ]],
  '/apis/discovery.k8s.io/v1/endpointslices': ['discovery.k8s.io/v1', 'EndpointSliceList', []],
  '/api/v1/nodes': ['v1', 'NodeList', [{ metadata: { name: 'kip-node', resourceVersion: '1' }, status: { addresses: [{ type: 'InternalIP', address: '10.250.0.1' }] } }]],
};

/** Lists, empty watches held open, and the events endpoint (status from `eventStatus`). */
class FakeApi {
  readonly events: Array<{ method: string; url: string; body: Obj }> = [];
  eventStatus = 201;
  #server: Server | undefined;
  #open = new Set<ServerResponse>();
  port = 0;

  async listen(): Promise<void> {
    this.#server = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      if (url.pathname.startsWith('/apis/events.k8s.io/v1/')) {
        let text = '';
        req.setEncoding('utf8').on('data', (d: string) => (text += d));
        req.on('end', () => {
          this.events.push({ method: req.method!, url: url.pathname, body: JSON.parse(text) as Obj });
          const status = req.method === 'PATCH' && this.eventStatus === 201 ? 200 : this.eventStatus;
          res.writeHead(status, { 'content-type': 'application/json' }).end(text);
        });
        return;
      }
      const list = LISTS[url.pathname];
      if (!list) return void res.writeHead(404).end();
      if (url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1') {
        res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
        res.flushHeaders();
        this.#open.add(res);
        res.on('close', () => this.#open.delete(res));
        return;
      }
      const [apiVersion, kind, items] = list;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ apiVersion, kind, metadata: { resourceVersion: '1' }, items }));
    });
    await new Promise<void>((r) => this.#server!.listen(0, '127.0.0.1', r));
    const a = this.#server.address();
    this.port = typeof a === 'object' && a ? a.port : 0;
  }

  async close(): Promise<void> {
    for (const r of this.#open) r.end();
    this.#server?.closeAllConnections();
    await new Promise<void>((r) => this.#server?.close(() => r()) ?? r());
  }
}

const api = new FakeApi();
let d: Daemon;
const HEALTH = 10266;

beforeAll(async () => {
  await api.listen();
});
afterAll(async () => {
  await d?.stop();
  await api.close();
  execFileSync(process.execPath, [CLI, 'cleanup'], { stdio: 'ignore' });
});

const reasons = () => api.events.filter((e) => e.method === 'POST').map((e) => {
  const b = e.body as { reason: string; regarding: { name: string; uid?: string } };
  return `${b.regarding.name}/${b.regarding.uid ?? '-'}: ${b.reason}`;
}).sort();

describe('daemon → Events (API mode, iptables mode, netns)', () => {
  afterEach(async (ctx) => {
    if (ctx.task.result?.state === 'fail') console.log(d?.log.slice(-4000));
    await d?.stop();
  });

  it('records the rejected and the unhonoured scheduler on their Services, while the good ones are programmed', async () => {
    api.eventStatus = 403; // no RBAC yet: logged once, the proxy carries on
    d = new Daemon([
      '--master', `http://127.0.0.1:${api.port}`, '--proxy-mode', 'iptables', '--hostname-override', 'kip-node',
      '--healthz-bind-address', `127.0.0.1:${HEALTH}`, '--metrics-bind-address', '', '--iptables-min-sync-period', '100ms',
    ]);
    d.start();
    await d.healthy(HEALTH);
    await waitFor('both events tried', () => reasons().length >= 2);
    expect(reasons()).toEqual(['fancy/uid-fancy: InvalidService', 'hashed/uid-hashed: SchedulerNotHonoured']);
    expect(d.log).toMatch(/WARN events: cannot record an Event .*status=403/);
    // programmed all the same (no endpoints: kube-proxy's REJECT in filter KUBE-SERVICES)
    const rules = ['iptables-nft-save', 'iptables-legacy-save'].map((b) => execFileSync(b, { encoding: 'utf8' })).join('');
    expect(rules).toContain('"demo/plain:http has no endpoints"');
    expect(rules).toContain('"demo/hashed:http has no endpoints"');
    expect(rules).not.toContain('demo/fancy');
    const body = api.events.find((e) => (e.body as { reason: string }).reason === 'InvalidService')!;
    expect(body.url).toBe('/apis/events.k8s.io/v1/namespaces/demo/events');
    expect(body.body).toMatchObject({
      apiVersion: 'events.k8s.io/v1', kind: 'Event', type: 'Warning', action: 'Programming',
      reportingController: 'kube-ipvs-proxy', reportingInstance: 'kube-ipvs-proxy-kip-node',
      regarding: { apiVersion: 'v1', kind: 'Service', namespace: 'demo', name: 'fancy', uid: 'uid-fancy' },
      note: 'unknown scheduler "fancy" (annotation kube-ipvs-proxy.io/scheduler)',
    });
    expect(await d.stop()).toBe(0);
  }, 90_000);

  it('with the events endpoint working, a restarted daemon creates them', async () => {
    api.events.length = 0;
    api.eventStatus = 201;
    d = new Daemon(['--master', `http://127.0.0.1:${api.port}`, '--proxy-mode', 'iptables', '--hostname-override', 'kip-node', '--healthz-bind-address', `127.0.0.1:${HEALTH}`, '--metrics-bind-address', '']);
    d.start();
    await d.healthy(HEALTH);
    await waitFor('both events created', () => reasons().length >= 2);
    expect(reasons()).toEqual(['fancy/uid-fancy: InvalidService', 'hashed/uid-hashed: SchedulerNotHonoured']);
    expect(d.log).not.toMatch(/cannot record an Event/);
    expect(await d.stop()).toBe(0);
  }, 90_000);

  it('--record-events=false records none', async () => {
    api.events.length = 0;
    d = new Daemon(['--master', `http://127.0.0.1:${api.port}`, '--proxy-mode', 'iptables', '--hostname-override', 'kip-node', '--healthz-bind-address', `127.0.0.1:${HEALTH}`, '--metrics-bind-address', '', '--record-events=false']);
    d.start();
    await d.healthy(HEALTH);
    await waitFor('the rejected Service in the log', () => /cannot program object object="Service demo\/fancy"/.test(d.log));
    await new Promise((r) => setTimeout(r, 500));
    expect(api.events).toEqual([]);
    expect(await d.stop()).toBe(0);
  }, 90_000);
});
