// KubernetesSource against a fake API server over real HTTP: paged lists (limit + continue,
// expired continue tokens), chunked watch streams with bookmarks, resumes from the last
// resourceVersion, 410 Gone (as a watch ERROR event and as an HTTP status), failing lists,
// malformed objects, auth from the kubeconfig (token, token file, exec via client-node), stop().
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import type { EndpointSlice, Node, Service } from '../../src/model/k8s.js';
import type { ObjectError } from '../../src/model/service.js';
import { loadClientConfig } from '../../src/source/kube-config.js';
import { KubeHttp } from '../../src/source/kube-http.js';
import { KubernetesSource } from '../../src/source/kubernetes.js';
import type { SourceCursor } from '../../src/source/resume.js';
import type { SourceHandler } from '../../src/source/types.js';

type Obj = { metadata: { name: string; namespace?: string; resourceVersion?: string } & Record<string, unknown> } & Record<string, unknown>;
type Resource = 'services' | 'endpointslices' | 'nodes';

const PATHS: Record<string, Resource> = {
  '/api/v1/services': 'services',
  '/apis/discovery.k8s.io/v1/endpointslices': 'endpointslices',
  '/api/v1/nodes': 'nodes',
};
const LIST_KIND: Record<Resource, [string, string]> = {
  services: ['v1', 'ServiceList'],
  endpointslices: ['discovery.k8s.io/v1', 'EndpointSliceList'],
  nodes: ['v1', 'NodeList'],
};

/** A tiny API server: one resourceVersion counter, an event log per resource, live watch streams. */
class FakeApiServer {
  /** Requests as `GET <url>`, without the watch's (random) timeoutSeconds. */
  readonly requests: string[] = [];
  /** The Authorization header of every request. */
  readonly auth: Array<string | undefined> = [];
  /** Answer 401 to requests without this Authorization header. */
  requireAuth: string | undefined;
  /** The next this-many list requests with a continue token get 410 (the token expired). */
  expireContinue = 0;
  readonly store: Record<Resource, Map<string, Obj>> = { services: new Map(), endpointslices: new Map(), nodes: new Map() };
  readonly #log: Record<Resource, Array<{ rv: number; type: string; object: Obj }>> = { services: [], endpointslices: [], nodes: [] };
  readonly #watches = new Set<{ resource: Resource; res: ServerResponse; fieldSelector: string | null }>();
  readonly #sockets = new Set<Socket>();
  readonly #held = new Map<Resource, Array<() => void>>();
  /** Status codes the next lists of a resource answer with (one per list), e.g. 500, 403. */
  readonly failLists: Partial<Record<Resource, number[]>> = {};
  /** Watches of these resources never answer (no headers). */
  readonly hangWatches = new Set<Resource>();
  /** Status codes the next watches of a resource answer with (one per watch). */
  readonly failWatches: Partial<Record<Resource, number[]>> = {};
  /** Watches from a resourceVersion below this get 410 Gone. */
  compactedRv = 0;
  /** How 410 is reported: a watch ERROR event (as the API server does) or the HTTP status. */
  goneAs: 'event' | 'http' = 'event';
  rv = 1;
  #server: Server | undefined;
  url = '';

  async listen(): Promise<void> {
    this.#server = createServer((req, res) => this.#handle(req, res));
    this.#server.on('connection', (s) => {
      this.#sockets.add(s);
      s.on('close', () => this.#sockets.delete(s));
    });
    await new Promise<void>((r) => this.#server!.listen(0, '127.0.0.1', r));
    const addr = this.#server.address();
    this.url = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
  }

  get openWatches(): number {
    return this.#watches.size;
  }
  get openSockets(): number {
    return this.#sockets.size;
  }

  async close(): Promise<void> {
    for (const w of this.#watches) w.res.end();
    this.#server?.closeAllConnections();
    await new Promise<void>((r) => this.#server?.close(() => r()) ?? r());
  }

  /** Adds or replaces an object; `silent` skips the watch log (an event the client never sees). */
  put(resource: Resource, obj: Obj, silent = false): void {
    const key = keyOf(obj);
    const type = this.store[resource].has(key) ? 'MODIFIED' : 'ADDED';
    const object = structuredClone(obj);
    object.metadata.resourceVersion = String(++this.rv);
    this.store[resource].set(key, object);
    if (!silent) this.#emit(resource, type, object);
  }

  delete(resource: Resource, key: string, silent = false): void {
    const obj = this.store[resource].get(key);
    if (!obj) throw new Error(`no ${resource} ${key}`);
    this.store[resource].delete(key);
    const object = { ...obj, metadata: { ...obj.metadata, resourceVersion: String(++this.rv) } };
    if (!silent) this.#emit(resource, 'DELETED', object);
  }

  /** Ends every watch stream (as an API server timeout or restart does). */
  closeWatches(): void {
    for (const w of this.#watches) w.res.end();
    this.#watches.clear();
  }

  /** Holds the lists of a resource until the returned function is called. */
  holdLists(resource: Resource): () => void {
    this.#held.set(resource, []);
    return () => {
      const waiting = this.#held.get(resource) ?? [];
      this.#held.delete(resource);
      waiting.forEach((go) => go());
    };
  }

  #emit(resource: Resource, type: string, object: Obj): void {
    this.#log[resource].push({ rv: this.rv, type, object });
    for (const w of this.#watches) if (w.resource === resource && matches(object, w.fieldSelector)) w.res.write(`${JSON.stringify({ type, object })}\n`);
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    this.requests.push(`${req.method} ${req.url?.replace(/&timeoutSeconds=\d+/, '')}`);
    this.auth.push(req.headers.authorization);
    if (this.requireAuth && req.headers.authorization !== this.requireAuth) return void res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify(status(401)));
    const url = new URL(req.url ?? '/', 'http://x');
    const resource = PATHS[url.pathname];
    if (!resource) return void res.writeHead(404).end();
    const fieldSelector = url.searchParams.get('fieldSelector');
    const watch = url.searchParams.get('watch');
    if (watch === 'true' || watch === '1') return this.#watch(resource, Number(url.searchParams.get('resourceVersion') || 0), fieldSelector, res);
    const held = this.#held.get(resource);
    const page = { limit: Number(url.searchParams.get('limit') || 0), token: url.searchParams.get('continue') };
    if (held) return void held.push(() => this.#list(resource, fieldSelector, page, res));
    this.#list(resource, fieldSelector, page, res);
  }

  /** A list, paged when asked: the continue token is `<list rv>:<offset>` (keys sorted). */
  #list(resource: Resource, fieldSelector: string | null, page: { limit: number; token: string | null }, res: ServerResponse): void {
    const fail = this.failLists[resource]?.shift();
    if (fail) return void res.writeHead(fail, { 'content-type': 'application/json' }).end(JSON.stringify(status(fail)));
    if (page.token && this.expireContinue > 0) {
      this.expireContinue--;
      return void res.writeHead(410, { 'content-type': 'application/json' }).end(JSON.stringify(status(410)));
    }
    const [apiVersion, kind] = LIST_KIND[resource];
    const [rv, offset] = page.token ? page.token.split(':').map(Number) as [number, number] : [this.rv, 0];
    const all = [...this.store[resource].values()].filter((o) => matches(o, fieldSelector)).sort((a, b) => keyOf(a).localeCompare(keyOf(b)));
    const end = page.limit ? offset + page.limit : all.length;
    const metadata = { resourceVersion: String(rv), ...(end < all.length ? { continue: `${rv}:${end}` } : {}) };
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ apiVersion, kind, metadata, items: all.slice(offset, end) }));
  }

  /** Ends every watch of the resource with an ERROR event carrying `code`. */
  watchError(resource: Resource, code: number): void {
    for (const w of this.#watches) if (w.resource === resource) w.res.end(`${JSON.stringify({ type: 'ERROR', object: status(code) })}\n`);
  }

  /** Sends a BOOKMARK at the current resourceVersion on every watch of the resource. */
  bookmark(resource: Resource): void {
    const [apiVersion, kind] = LIST_KIND[resource];
    const object = { apiVersion, kind: kind.replace(/List$/, ''), metadata: { resourceVersion: String(this.rv) } };
    for (const w of this.#watches) if (w.resource === resource) w.res.write(`${JSON.stringify({ type: 'BOOKMARK', object })}\n`);
  }

  #watch(resource: Resource, from: number, fieldSelector: string | null, res: ServerResponse): void {
    if (this.hangWatches.has(resource)) return;
    const fail = this.failWatches[resource]?.shift();
    if (fail) return void res.writeHead(fail, { 'content-type': 'application/json' }).end(JSON.stringify(status(fail)));
    if (from < this.compactedRv && this.goneAs === 'http') {
      return void res.writeHead(410, { 'content-type': 'application/json' }).end(JSON.stringify(status(410)));
    }
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    res.flushHeaders(); // as the API server does: the client sees the watch established at once
    if (from < this.compactedRv) return void res.end(`${JSON.stringify({ type: 'ERROR', object: status(410) })}\n`);
    for (const e of this.#log[resource]) if (e.rv > from && matches(e.object, fieldSelector)) res.write(`${JSON.stringify({ type: e.type, object: e.object })}\n`);
    const w = { resource, res, fieldSelector };
    this.#watches.add(w);
    res.on('close', () => this.#watches.delete(w));
  }
}

function status(code: number): Record<string, unknown> {
  return { kind: 'Status', apiVersion: 'v1', status: 'Failure', code, reason: code === 410 ? 'Expired' : 'Fail', message: `fake ${code}` };
}

function matches(o: Obj, fieldSelector: string | null): boolean {
  const m = fieldSelector?.match(/^metadata\.name=(.*)$/);
  return !m || o.metadata.name === m[1];
}

function keyOf(o: Obj): string {
  return o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : o.metadata.name;
}

function svc(name: string, ip: string, port: unknown = 80, extra: Record<string, unknown> = {}): Obj {
  return { metadata: { name, namespace: 'demo', uid: `uid-${name}`, creationTimestamp: '2026-01-01T00:00:00Z' }, spec: { type: 'ClusterIP', clusterIP: ip, ports: [{ name: 'http', protocol: 'TCP', port, targetPort: 8080 }], ...extra } };
}

function slice(name: string, service: string | null, ips: string[]): Obj {
  return {
    metadata: { name, namespace: 'demo', ...(service ? { labels: { 'kubernetes.io/service-name': service } } : {}) },
    addressType: 'IPv4',
    endpoints: ips.map((ip) => ({ addresses: [ip], conditions: { ready: true } })),
    ports: [{ name: 'http', protocol: 'TCP', port: 8080 }],
  };
}

function node(name: string, ip: string): Obj {
  return { metadata: { name }, status: { addresses: [{ type: 'InternalIP', address: ip }] } };
}

/** Records every call as one readable line. */
class Recorder implements SourceHandler {
  events: string[] = [];
  services = new Map<string, Service>();
  slices = new Map<string, EndpointSlice>();
  node: Node | null | undefined;
  onService(key: string, s: Service | null): void {
    this.events.push(s ? `svc ${key}` : `svc- ${key}`);
    if (s) this.services.set(key, s);
    else this.services.delete(key);
  }
  onEndpointSlice(key: string, s: EndpointSlice | null): void {
    this.events.push(s ? `eps ${key}` : `eps- ${key}`);
    if (s) this.slices.set(key, s);
    else this.slices.delete(key);
  }
  onNode(n: Node | null): void {
    this.events.push(n ? `node ${n.metadata.name}` : 'node-');
    this.node = n;
  }
  onError(e: ObjectError): void {
    this.events.push(`error ${e.object}: ${e.reason}`);
  }
  onSynced(): void {
    this.events.push('synced');
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: () => T, ok: (v: T) => boolean, ms = 3000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = what();
    if (ok(v)) return v;
    if (Date.now() > end) throw new Error(`timed out; last: ${JSON.stringify(v)}`);
    await sleep(10);
  }
}

let api: FakeApiServer;
let dir: string;
let kubeconfig: string;
const sources: KubernetesSource[] = [];

beforeEach(async () => {
  api = new FakeApiServer();
  await api.listen();
  dir = await mkdtemp(join(tmpdir(), 'kip-kube-'));
  kubeconfig = join(dir, 'kubeconfig');
  await writeFile(kubeconfig, kubeconfigFor(api.url));
});
afterEach(async () => {
  await Promise.all(sources.splice(0).map((s) => s.stop()));
  await api.close();
  await rm(dir, { recursive: true, force: true });
});

function kubeconfigFor(server: string): string {
  return `apiVersion: v1
kind: Config
clusters: [{ name: fake, cluster: { server: "${server}" } }]
users: [{ name: nobody, user: {} }]
contexts: [{ name: fake, context: { cluster: fake, user: nobody } }]
current-context: fake
`;
}

function source(opts: { master?: string; listTimeoutMs?: number; pageSize?: number; resume?: { cursor: SourceCursor; restore(): Promise<void> } } = {}): { src: KubernetesSource; rec: Recorder; started: Promise<void> } {
  const src = new KubernetesSource({ kubeconfig, nodeName: 'kip-node', backoff: { initialMs: 20, maxMs: 200 }, ...opts });
  sources.push(src);
  const rec = new Recorder();
  const started = src.start(rec);
  started.catch(() => {}); // tests that stop early assert the rejection themselves
  return { src, rec, started };
}

const listsOf = (path: string): string[] => api.requests.filter((r) => r.startsWith(`GET ${path}`) && !r.includes('watch='));
const watchesOf = (path: string): string[] => api.requests.filter((r) => r.startsWith(`GET ${path}?watch=true`));

describe('initial sync', () => {
  it('delivers both lists, the node, then onSynced; never before the EndpointSlice list', async () => {
    api.put('services', svc('web', '10.96.0.10'));
    api.put('services', svc('ext', '', 80, { type: 'ExternalName', externalName: 'example.com', clusterIP: undefined }));
    api.put('endpointslices', slice('web-1', 'web', ['10.244.1.2']));
    api.put('nodes', node('kip-node', '10.250.0.1'));
    api.put('nodes', node('other', '10.250.0.2'));
    const release = api.holdLists('endpointslices');
    const { rec, started } = source();
    await until(() => rec.events, (e) => e.includes('svc demo/web') && e.includes('node kip-node'));
    await sleep(100);
    expect(rec.events).not.toContain('synced');
    release();
    await started;
    expect(rec.events.sort()).toEqual(['eps demo/web-1', 'node kip-node', 'svc demo/ext', 'svc demo/web', 'synced'].sort());
    expect(rec.events.at(-1)).toBe('synced');
    expect(rec.services.get('demo/web')?.spec.ports[0]).toMatchObject({ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 });
    expect(rec.node?.status.addresses).toEqual([{ type: 'InternalIP', address: '10.250.0.1' }]);
    // Paged lists, then watches with bookmarks from the list's resourceVersion.
    await until(() => api.openWatches, (n) => n === 3);
    expect(api.requests.filter((r) => !r.includes('watch=')).sort()).toEqual([
      'GET /api/v1/nodes?limit=500&fieldSelector=metadata.name%3Dkip-node',
      'GET /api/v1/services?limit=500',
      'GET /apis/discovery.k8s.io/v1/endpointslices?limit=500',
    ]);
    expect(api.requests.filter((r) => r.includes('watch=')).sort()).toEqual([
      'GET /api/v1/nodes?watch=true&allowWatchBookmarks=true&resourceVersion=6&fieldSelector=metadata.name%3Dkip-node',
      'GET /api/v1/services?watch=true&allowWatchBookmarks=true&resourceVersion=6',
      'GET /apis/discovery.k8s.io/v1/endpointslices?watch=true&allowWatchBookmarks=true&resourceVersion=6',
    ]);
  });

  it('delivers onNode(null) before onSynced when the node does not exist, and the node when it appears', async () => {
    const { rec, started } = source();
    await started;
    expect(rec.events).toEqual(['node-', 'synced']);
    await until(() => api.openWatches, (n) => n === 3);
    api.put('nodes', node('other', '10.250.0.2'));
    api.put('nodes', node('kip-node', '10.250.0.1'));
    await until(() => rec.events, (e) => e.length === 3);
    expect(rec.events[2]).toBe('node kip-node');
  });
});

describe('watch', () => {
  it('delivers added, modified and deleted objects', async () => {
    api.put('services', svc('web', '10.96.0.10'));
    const { rec, started } = source();
    await started;
    await until(() => api.openWatches, (n) => n === 3);
    rec.events = [];
    api.put('services', svc('dns', '10.96.0.53'));
    api.put('services', svc('web', '10.96.0.20'));
    api.put('endpointslices', slice('web-1', 'web', ['10.244.1.2']));
    api.delete('services', 'demo/dns');
    await until(() => rec.events, (e) => e.length === 4);
    expect(rec.events.filter((e) => e.startsWith('svc'))).toEqual(['svc demo/dns', 'svc demo/web', 'svc- demo/dns']);
    expect(rec.services.get('demo/web')?.spec.clusterIP).toBe('10.96.0.20');
  });

  it('resumes a watch the server closed from the last resourceVersion, without relisting', async () => {
    api.put('services', svc('web', '10.96.0.10'));
    const { rec, started } = source();
    await started;
    await until(() => api.openWatches, (n) => n === 3);
    api.put('services', svc('dns', '10.96.0.53'));
    await until(() => rec.events, (e) => e.includes('svc demo/dns'));
    const rv = api.rv;
    api.closeWatches();
    await until(() => api.openWatches, (n) => n === 3);
    api.put('services', svc('late', '10.96.0.99'));
    await until(() => rec.events, (e) => e.includes('svc demo/late'));
    expect(listsOf('/api/v1/services')).toHaveLength(1);
    expect(watchesOf('/api/v1/services').at(-1)).toBe(`GET /api/v1/services?watch=true&allowWatchBookmarks=true&resourceVersion=${rv}`);
  });

  it.each(['event', 'http'] as const)('relists after 410 Gone (as %s) and delivers what changed meanwhile, deletions included', async (goneAs) => {
    api.put('services', svc('a', '10.96.0.1'));
    api.put('services', svc('b', '10.96.0.2'));
    api.put('endpointslices', slice('b-1', 'b', ['10.244.1.2']));
    const { rec, started } = source();
    await started;
    await until(() => api.openWatches, (n) => n === 3);
    rec.events = [];
    // Changes the client never sees as events, then the history is compacted away.
    api.delete('services', 'demo/b', true);
    api.delete('endpointslices', 'demo/b-1', true);
    api.put('services', svc('a', '10.96.0.11'), true);
    api.put('services', svc('c', '10.96.0.3'), true);
    api.compactedRv = api.rv;
    api.goneAs = goneAs;
    api.closeWatches();
    await until(() => rec.events, (e) => e.length === 4);
    expect(rec.events.sort()).toEqual(['eps- demo/b-1', 'svc demo/a', 'svc demo/c', 'svc- demo/b']);
    expect(rec.services.get('demo/a')?.spec.clusterIP).toBe('10.96.0.11');
    expect(listsOf('/api/v1/services')).toHaveLength(2);
    // Watching goes on after the relist.
    await until(() => api.openWatches, (n) => n === 3);
    api.put('services', svc('d', '10.96.0.4'));
    await until(() => rec.events, (e) => e.includes('svc demo/d'));
    expect(rec.events.filter((e) => e === 'synced')).toEqual([]);
  });
});

describe('resume (a restarted daemon watches from where the stopped one was)', () => {
  /** A source that listed and stopped: its cursor, and the objects it had delivered. */
  async function stopped(): Promise<{ cursor: SourceCursor; rec: Recorder }> {
    const { src, rec, started } = source();
    await started;
    await until(() => api.openWatches, (n) => n === 3);
    api.put('services', svc('late', '10.96.0.30')); // seen by its watch: the cursor is past the list
    await until(() => rec.events, (e) => e.includes('svc demo/late'));
    await src.stop();
    return { cursor: src.cursor()!, rec };
  }

  beforeEach(() => {
    api.put('services', svc('a', '10.96.0.1'));
    api.put('services', svc('b', '10.96.0.2'));
    api.put('services', svc('bad', '10.96.0.3', 'eighty'));
    api.put('endpointslices', slice('b-1', 'b', ['10.244.1.2']));
    api.put('nodes', node('kip-node', '10.250.0.1'));
  });

  it('gives the resourceVersions reached, the keys delivered and the objects rejected, once stopped', async () => {
    const { cursor } = await stopped();
    expect(cursor.server).toBe(api.url);
    expect(cursor.informers).toEqual({ Service: String(api.rv), EndpointSlice: '6', Node: '6' }); // a list's is the server's at the time
    expect(cursor.delivered).toEqual({ Service: ['demo/a', 'demo/b', 'demo/late'], EndpointSlice: ['demo/b-1'], Node: ['kip-node'] });
    expect(cursor.rejected).toEqual([{ kind: 'Service', key: 'demo/bad', error: { object: 'Service demo/bad', reason: 'spec.ports[0].port: expected number, received string' } }]);
  });

  it('restores, lists nothing, delivers what changed since (deletions too), reports the rejected again, then syncs', async () => {
    const { cursor } = await stopped();
    api.delete('services', 'demo/a');
    api.put('endpointslices', slice('b-1', 'b', ['10.244.1.2', '10.244.1.3']));
    api.put('services', svc('c', '10.96.0.4'));
    let restored = 0;
    const { rec, started } = source({ resume: { cursor, restore: async () => void restored++ } });
    await started;
    expect(restored).toBe(1);
    expect(rec.events).toEqual(['error Service demo/bad: spec.ports[0].port: expected number, received string', 'svc- demo/a', 'svc demo/c', 'eps demo/b-1', 'synced']);
    expect(rec.slices.get('demo/b-1')?.endpoints).toHaveLength(2);
    for (const path of ['/api/v1/services', '/apis/discovery.k8s.io/v1/endpointslices', '/api/v1/nodes']) expect(listsOf(path)).toHaveLength(1); // the first source's
    expect(watchesOf('/api/v1/services').at(-1)).toBe(`GET /api/v1/services?watch=true&allowWatchBookmarks=true&resourceVersion=${cursor.informers.Service}`);
    // Watching goes on, and a deletion of a key the stopped source had delivered is delivered.
    rec.events = [];
    api.delete('endpointslices', 'demo/b-1');
    await until(() => rec.events, (e) => e.includes('eps- demo/b-1'));
  });

  it('syncs on a quiet resumed watch too (nothing changed while stopped)', async () => {
    const { cursor } = await stopped();
    const { rec, started } = source({ resume: { cursor, restore: async () => {} } });
    await started;
    expect(rec.events).toEqual(['error Service demo/bad: spec.ports[0].port: expected number, received string', 'synced']);
    expect(listsOf('/api/v1/services')).toHaveLength(1);
  });

  it.each(['event', 'http'] as const)('relists when the resourceVersion is gone (410 as %s): every object again, what was deleted meanwhile deleted', async (goneAs) => {
    const { cursor } = await stopped();
    api.delete('services', 'demo/a', true);
    api.put('services', svc('c', '10.96.0.4'), true);
    api.compactedRv = api.rv;
    api.goneAs = goneAs;
    const { rec, started } = source({ resume: { cursor, restore: async () => {} } });
    await started;
    expect(listsOf('/api/v1/services')).toHaveLength(2);
    expect(rec.events.filter((e) => e.startsWith('svc')).sort()).toEqual(['svc demo/b', 'svc demo/c', 'svc demo/late', 'svc- demo/a']);
    expect(rec.events.at(-1)).toBe('synced');
  });

  it('relists when the resumed watch fails otherwise (e.g. "too large resource version", a 504)', async () => {
    const { cursor } = await stopped();
    api.failWatches.services = [504];
    const { rec, started } = source({ resume: { cursor, restore: async () => {} } });
    await started;
    expect(listsOf('/api/v1/services')).toHaveLength(2);
    expect(listsOf('/apis/discovery.k8s.io/v1/endpointslices')).toHaveLength(1); // the others resumed
    expect(rec.events.at(-1)).toBe('synced');
  });

  it('relists when the resumed watch does not answer within the list timeout', async () => {
    const { cursor } = await stopped();
    api.hangWatches.add('endpointslices');
    const { rec, started } = source({ listTimeoutMs: 300, resume: { cursor, restore: async () => {} } });
    await until(() => listsOf('/apis/discovery.k8s.io/v1/endpointslices'), (l) => l.length === 2, 3000);
    api.hangWatches.clear();
    await started;
    expect(rec.events.at(-1)).toBe('synced');
    expect(listsOf('/api/v1/services')).toHaveLength(1);
  });

  it('sends its watches before it restores, and delivers nothing until the restore is done', async () => {
    const { cursor } = await stopped();
    api.put('services', svc('c', '10.96.0.4'));
    let finish!: () => void;
    const { rec, started } = source({ resume: { cursor, restore: () => new Promise<void>((r) => (finish = r)) } });
    await until(() => api.openWatches, (n) => n === 3); // while the restore has not finished
    await sleep(150);
    expect(rec.events).toEqual(['error Service demo/bad: spec.ports[0].port: expected number, received string']);
    finish();
    await started;
    expect(rec.events.slice(1)).toEqual(['svc demo/c', 'synced']);
  });

  it('relists when the restore fails', async () => {
    const { cursor } = await stopped();
    const { rec, started } = source({ resume: { cursor, restore: async () => Promise.reject(new Error('a broken record')) } });
    await started;
    for (const path of ['/api/v1/services', '/apis/discovery.k8s.io/v1/endpointslices']) expect(listsOf(path)).toHaveLength(2);
    expect(rec.events.at(-1)).toBe('synced');
  });

  it('does not use a record of another API server: nothing restored, everything listed', async () => {
    const { cursor } = await stopped();
    let restored = 0;
    let discarded = 0;
    const { rec, started } = source({ resume: { cursor: { ...cursor, server: 'https://elsewhere:6443' }, restore: async () => void restored++, discard: () => void discarded++ } });
    await started;
    expect(restored).toBe(0);
    expect(discarded).toBe(1); // the record's file is closed
    expect(listsOf('/api/v1/services')).toHaveLength(2);
    expect([...rec.services.keys()].sort()).toEqual(['demo/a', 'demo/b', 'demo/late']);
  });

  it('gives no cursor before the caches synced', async () => {
    const release = api.holdLists('endpointslices');
    const { src } = source();
    await until(() => listsOf('/api/v1/services'), (l) => l.length === 1);
    await src.stop();
    release();
    expect(src.cursor()).toBeNull();
  });
});

describe('paging and bookmarks', () => {
  it('lists in pages of `limit`, following continue tokens, and syncs after the last page', async () => {
    for (let i = 0; i < 7; i++) api.put('services', svc(`s${i}`, `10.96.0.${i + 1}`));
    const { rec, started } = source({ pageSize: 3 });
    await started;
    expect(listsOf('/api/v1/services')).toEqual([
      'GET /api/v1/services?limit=3',
      'GET /api/v1/services?limit=3&continue=8%3A3',
      'GET /api/v1/services?limit=3&continue=8%3A6',
    ]);
    expect(rec.services.size).toBe(7);
    expect(rec.events.at(-1)).toBe('synced');
    await until(() => api.openWatches, (n) => n === 3);
    expect(watchesOf('/api/v1/services')).toEqual(['GET /api/v1/services?watch=true&allowWatchBookmarks=true&resourceVersion=8']);
  });

  it('restarts a list whose continue token expired (410), delivering each object once', async () => {
    for (let i = 0; i < 5; i++) api.put('services', svc(`s${i}`, `10.96.0.${i + 1}`));
    api.expireContinue = 1;
    const { rec, started } = source({ pageSize: 2 });
    await started;
    expect(listsOf('/api/v1/services').filter((r) => !r.includes('continue'))).toHaveLength(2);
    expect(rec.events.filter((e) => e.startsWith('svc')).sort()).toEqual(['svc demo/s0', 'svc demo/s1', 'svc demo/s2', 'svc demo/s3', 'svc demo/s4']);
  });

  it('bookmarks move the resourceVersion: a closed watch resumes from the bookmark, past compacted history', async () => {
    api.put('services', svc('web', '10.96.0.10'));
    const { rec, started } = source();
    await started;
    await until(() => api.openWatches, (n) => n === 3);
    // Changes to other resources move the global resourceVersion; the services watch sees only a bookmark.
    for (let i = 0; i < 5; i++) api.put('endpointslices', slice(`other-${i}`, 'other', ['10.244.9.9']), true);
    api.bookmark('services');
    const bookmarked = api.rv;
    await sleep(50);
    api.compactedRv = bookmarked; // a resume from the list's resourceVersion would now get 410
    api.closeWatches();
    await until(() => watchesOf('/api/v1/services'), (w) => w.length === 2);
    expect(watchesOf('/api/v1/services')[1]).toBe(`GET /api/v1/services?watch=true&allowWatchBookmarks=true&resourceVersion=${bookmarked}`);
    await until(() => api.openWatches, (n) => n >= 1);
    api.put('services', svc('late', '10.96.0.99'));
    await until(() => rec.events, (e) => e.includes('svc demo/late'));
    expect(listsOf('/api/v1/services')).toHaveLength(1);
  });

  it('a watch ERROR other than 410 is retried from the same resourceVersion, without relisting', async () => {
    api.put('services', svc('web', '10.96.0.10'));
    const { rec, started } = source();
    await started;
    await until(() => api.openWatches, (n) => n === 3);
    api.put('services', svc('dns', '10.96.0.53'));
    await until(() => rec.events, (e) => e.includes('svc demo/dns'));
    const rv = api.rv;
    api.watchError('services', 500);
    await until(() => watchesOf('/api/v1/services'), (w) => w.length === 2);
    expect(watchesOf('/api/v1/services')[1]).toBe(`GET /api/v1/services?watch=true&allowWatchBookmarks=true&resourceVersion=${rv}`);
    expect(listsOf('/api/v1/services')).toHaveLength(1);
  });

  it('delivers the compact form: no managedFields, no last-applied annotation, other annotations kept', async () => {
    const o = svc('web', '10.96.0.10');
    Object.assign(o.metadata, {
      managedFields: [{ manager: 'kubectl', fieldsV1: { 'f:spec': {} } }],
      annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{"big":"copy"}', 'kube-ipvs-proxy.io/scheduler': 'wrr' },
    });
    api.put('services', o);
    const { rec, started } = source();
    await started;
    const got = rec.services.get('demo/web')!;
    expect(got.metadata).not.toHaveProperty('managedFields');
    expect(got.metadata).not.toHaveProperty('creationTimestamp');
    expect(got.metadata.annotations).toEqual({ 'kube-ipvs-proxy.io/scheduler': 'wrr' });
  });
});

describe('auth', () => {
  it('sends the kubeconfig token, and a token file\'s content', async () => {
    api.requireAuth = 'Bearer s3cret';
    await writeFile(kubeconfig, kubeconfigFor(api.url).replace('user: {}', 'user: { token: s3cret }'));
    const { rec, started } = source();
    await started;
    expect(rec.events).toContain('synced');
    expect(new Set(api.auth)).toEqual(new Set(['Bearer s3cret']));
    await writeFile(join(dir, 'token'), 'from-file\n');
    await writeFile(kubeconfig, kubeconfigFor(api.url).replace('user: {}', 'user: { tokenFile: token }'));
    const cfg = loadClientConfig({ kubeconfig });
    const opts: { headers?: Record<string, string> } = {};
    await cfg.apply(opts);
    expect(opts.headers?.authorization).toBe('Bearer from-file');
  });

  it('hands an exec plugin to client-node, whose credential is sent', async () => {
    const plugin = join(dir, 'cred.sh');
    await writeFile(plugin, `#!/bin/sh\necho '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"from-exec"}}'\n`);
    await chmod(plugin, 0o755);
    const user = `user: { exec: { apiVersion: client.authentication.k8s.io/v1, command: "${plugin}", interactiveMode: Never } }`;
    await writeFile(kubeconfig, kubeconfigFor(api.url).replace('user: {}', user));
    api.requireAuth = 'Bearer from-exec';
    api.put('services', svc('web', '10.96.0.10'));
    const { rec, started } = source();
    await started;
    expect(rec.events).toContain('svc demo/web');
    expect(loadClientConfig({ kubeconfig }).auth).toBe('client-node');
  });

  it('reaches an https server (node:https is loaded for it alone), checking it against the kubeconfig\'s CA', async () => {
    for (const name of ['a', 'b']) {
      execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', `/CN=${name}`,
        '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', join(dir, `${name}.key`), '-out', join(dir, `${name}.crt`)], { stdio: 'ignore' });
    }
    const server = createHttpsServer({ key: readFileSync(join(dir, 'a.key')), cert: readFileSync(join(dir, 'a.crt')) }, (req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ path: req.url, auth: req.headers.authorization }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as { port: number };
    const get = async (ca: string): Promise<unknown> => {
      await writeFile(kubeconfig, kubeconfigFor(`https://127.0.0.1:${port}`).replace('user: {}', 'user: { token: s3cret }').replace(/server: [^,}\n]+/, (m) => `${m}, certificate-authority: ${ca}`));
      const http = new KubeHttp(loadClientConfig({ kubeconfig }));
      try {
        const res = await http.get('/api/v1/nodes?limit=1', AbortSignal.timeout(10_000));
        let body = '';
        for await (const chunk of res) body += String(chunk);
        return JSON.parse(body);
      } finally {
        http.close();
      }
    };
    try {
      expect(await get('a.crt')).toEqual({ path: '/api/v1/nodes?limit=1', auth: 'Bearer s3cret' });
      await expect(get('b.crt')).rejects.toThrow(/self[- ]signed|unable to verify|certificate/i);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  it('applies TLS from the kubeconfig (CA, client certificate, insecure, server name) and in-cluster addresses', async () => {
    const b64 = (t: string): string => Buffer.from(t).toString('base64');
    await writeFile(join(dir, 'client.key'), 'KEY');
    await writeFile(
      kubeconfig,
      `apiVersion: v1
clusters: [{ name: c, cluster: { server: "https://api.example:6443/", certificate-authority-data: ${b64('CA')}, tls-server-name: kube } }]
users: [{ name: u, user: { client-certificate-data: ${b64('CERT')}, client-key: client.key } }]
contexts: [{ name: x, context: { cluster: c, user: u } }]
current-context: x
`,
    );
    const cfg = loadClientConfig({ kubeconfig });
    expect(cfg).toMatchObject({ server: 'https://api.example:6443', auth: 'client-certificate' });
    const opts: Record<string, unknown> = {};
    await cfg.apply(opts);
    expect({ ca: String(opts.ca), cert: String(opts.cert), key: String(opts.key), servername: opts.servername }).toEqual({ ca: 'CA', cert: 'CERT', key: 'KEY', servername: 'kube' });
    expect(loadClientConfig({}, { KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '6443' })).toMatchObject({ server: 'https://[fd00::1]:6443' });
    await writeFile(kubeconfig, 'apiVersion: v1\ncurrent-context: nope\ncontexts: []\n');
    expect(() => loadClientConfig({ kubeconfig })).toThrow(/contexts: no entry named "nope"/);
  });
});

describe('errors', () => {
  it('reports a malformed object and delivers the rest; an invalid update keeps the last valid version', async () => {
    api.put('services', svc('bad', '10.96.0.1', 'eighty'));
    api.put('services', svc('web', '10.96.0.10'));
    api.put('endpointslices', { ...slice('web-1', 'web', ['10.244.1.2']), addressType: 'IPv5' });
    api.put('endpointslices', slice('web-2', 'web', ['10.244.2.2']));
    const { rec, started } = source();
    await started;
    expect(rec.events.filter((e) => e.startsWith('error')).sort()).toEqual([
      'error EndpointSlice demo/web-1: addressType: Invalid option: expected one of "IPv4"|"IPv6"|"FQDN"',
      'error Service demo/bad: spec.ports[0].port: expected number, received string',
    ]);
    expect([...rec.services.keys()]).toEqual(['demo/web']);
    expect([...rec.slices.keys()]).toEqual(['demo/web-2']);
    await until(() => api.openWatches, (n) => n === 3);
    rec.events = [];
    api.put('services', svc('web', '10.96.0.20', 70000));
    api.put('services', svc('bad', '10.96.0.1', 81));
    await until(() => rec.events, (e) => e.length === 2);
    expect(rec.events).toEqual(['error Service demo/web: spec.ports[0].port: Too big: expected number to be <=65535', 'svc demo/bad']);
    expect(rec.services.get('demo/web')?.spec.clusterIP).toBe('10.96.0.10');
    api.delete('services', 'demo/web');
    await until(() => rec.events, (e) => e.length === 3);
    expect(rec.events[2]).toBe('svc- demo/web');
  });

  it('skips EndpointSlices without the service-name label; a slice losing it is deleted', async () => {
    api.put('endpointslices', slice('orphan', null, ['10.244.1.2']));
    api.put('endpointslices', slice('web-1', 'web', ['10.244.1.2']));
    const { rec, started } = source();
    await started;
    expect([...rec.slices.keys()]).toEqual(['demo/web-1']);
    await until(() => api.openWatches, (n) => n === 3);
    api.put('endpointslices', slice('web-1', null, ['10.244.1.2']));
    api.put('endpointslices', slice('orphan', null, ['10.244.1.3']));
    await until(() => rec.events, (e) => e.includes('eps- demo/web-1'));
    await sleep(50);
    expect(rec.events.filter((e) => e.includes('orphan'))).toEqual([]);
  });

  it('restarts after failing lists with backoff; a forbidden node list does not hold the sync', async () => {
    api.put('services', svc('web', '10.96.0.10'));
    api.put('nodes', node('kip-node', '10.250.0.1'));
    api.failLists.services = [500, 503];
    api.failLists.nodes = [403, 403, 403];
    const { rec, started } = source();
    await started;
    expect(listsOf('/api/v1/services')).toHaveLength(3);
    expect(rec.events).toContain('svc demo/web');
    expect(rec.events.indexOf('synced')).toBeGreaterThan(rec.events.indexOf('svc demo/web'));
    // The node list keeps being retried and the node arrives once it is allowed.
    await until(() => rec.events, (e) => e.includes('node kip-node'));
    expect(listsOf('/api/v1/nodes')).toHaveLength(4);
  });
});

describe('config and stop', () => {
  it('--master overrides the kubeconfig server; an http:// server needs no TLS setting', async () => {
    await writeFile(kubeconfig, kubeconfigFor('http://127.0.0.1:1'));
    api.put('services', svc('web', '10.96.0.10'));
    const { rec, started } = source({ master: api.url });
    await started;
    expect(rec.events).toContain('svc demo/web');
    expect(loadClientConfig({ master: 'https://10.0.0.1:6443' }, {})).toMatchObject({ server: 'https://10.0.0.1:6443' });
  });

  it('rejects start() when there is no config at all (no kubeconfig, no --master, not in a cluster)', async () => {
    const saved = process.env.KUBERNETES_SERVICE_HOST;
    delete process.env.KUBERNETES_SERVICE_HOST;
    try {
      const src = new KubernetesSource({ nodeName: 'kip-node' });
      await expect(src.start(new Recorder())).rejects.toThrow(/not in a cluster/);
    } finally {
      if (saved !== undefined) process.env.KUBERNETES_SERVICE_HOST = saved;
    }
  });

  it('stop() closes every connection and delivers nothing more', async () => {
    const { src, rec, started } = source();
    await started;
    await until(() => api.openWatches, (n) => n === 3);
    await src.stop();
    await until(() => [api.openWatches, api.openSockets], ([w, s]) => w === 0 && s === 0);
    const mark = rec.events.length;
    api.put('services', svc('web', '10.96.0.10'));
    await sleep(100);
    expect(rec.events.slice(mark)).toEqual([]);
    expect(api.openSockets).toBe(0);
  });

  it('aborts and retries a list that hangs', async () => {
    api.put('services', svc('web', '10.96.0.10'));
    const release = api.holdLists('services');
    const { rec, started } = source({ listTimeoutMs: 100 });
    await until(() => listsOf('/api/v1/services'), (l) => l.length >= 2);
    release();
    await started;
    expect(rec.events).toContain('svc demo/web');
  });

  it('stop() aborts a list in flight', async () => {
    const release = api.holdLists('services');
    const { src, started } = source();
    await until(() => listsOf('/api/v1/services'), (l) => l.length === 1);
    await src.stop();
    await expect(started).rejects.toThrow(/stopped/);
    await until(() => api.openSockets, (n) => n === 0);
    release();
  });

  it('stop() before the first sync rejects start() and leaves nothing running', async () => {
    api.failLists.services = [500, 500, 500, 500, 500, 500];
    const { src, started } = source();
    await until(() => listsOf('/api/v1/services'), (l) => l.length >= 2);
    await src.stop();
    await expect(started).rejects.toThrow(/stopped before the initial sync/);
    const lists = listsOf('/api/v1/services').length;
    await sleep(300);
    expect(listsOf('/api/v1/services')).toHaveLength(lists);
    await until(() => api.openSockets, (n) => n === 0);
  });
});
