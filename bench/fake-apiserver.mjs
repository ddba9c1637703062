// A small Kubernetes API server (node:http, JSON, bearer token) for the cluster-scale benchmark:
// Services, EndpointSlices, Nodes and ServiceCIDRs; get by name, list with limit/continue
// (consistent snapshots; an expired token is 410) and resourceVersion, watch from a
// resourceVersion (replayed from an event window; older is 410 Expired), bookmarks with
// allowWatchBookmarks, sendInitialEvents, timeoutSeconds, label and field selectors; Events
// (events.k8s.io/v1 POST/PATCH) are accepted and counted.
// Objects are stored as their JSON text and its UTF-8 bytes: a list page is written as those
// buffers (corked, with a Content-Length), so serving builds and encodes no page-sized string.
// The server shares UML's one CPU with the daemon; a real API server is on another machine.
import { createServer } from 'node:http';
import { writeFileSync } from 'node:fs';

/** The resources served: collection name -> kind, apiVersion, path prefix. */
const RESOURCES = {
  services: { kind: 'Service', apiVersion: 'v1', prefix: '/api/v1' },
  endpointslices: { kind: 'EndpointSlice', apiVersion: 'discovery.k8s.io/v1', prefix: '/apis/discovery.k8s.io/v1' },
  nodes: { kind: 'Node', apiVersion: 'v1', prefix: '/api/v1', clusterScoped: true },
  // kube-proxy lists and watches them (its ServiceCIDR informer); this daemon does not.
  servicecidrs: { kind: 'ServiceCIDR', apiVersion: 'networking.k8s.io/v1', prefix: '/apis/networking.k8s.io/v1', clusterScoped: true },
};
const PATH = /^(\/api\/v1|\/apis\/discovery\.k8s\.io\/v1|\/apis\/networking\.k8s\.io\/v1)(?:\/namespaces\/([^/]+))?\/(services|endpointslices|nodes|servicecidrs)(?:\/([^/]+))?$/;

const COMMA = Buffer.from(',');
const LIST_END = Buffer.from(']}');

/** A Status object, as the API server writes errors. */
function status(code, reason, message) {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
}

/** A matcher for a label selector (`k`, `!k`, `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, comma = and). */
export function labelMatcher(selector) {
  if (!selector) return () => true;
  const terms = selector.match(/[^,(]+(\([^)]*\))?/g).map((t) => t.trim()).filter(Boolean).map((t) => {
    let m;
    if ((m = /^(\S+)\s+(in|notin)\s+\((.*)\)$/.exec(t))) {
      const set = new Set(m[3].split(',').map((s) => s.trim()));
      return m[2] === 'in' ? (l) => set.has(l[m[1]]) : (l) => !set.has(l[m[1]]);
    }
    if ((m = /^(\S+?)\s*!=\s*(\S*)$/.exec(t))) return (l) => l[m[1]] !== m[2];
    if ((m = /^(\S+?)\s*==?\s*(\S*)$/.exec(t))) return (l) => l[m[1]] === m[2];
    if ((m = /^!(\S+)$/.exec(t))) return (l) => !(m[1] in l);
    return (l) => t in l;
  });
  return (labels) => terms.every((f) => f(labels ?? {}));
}

/** The fields a field selector can name, read from a stored entry. */
const FIELDS = { 'metadata.name': (e) => e.name, 'metadata.namespace': (e) => e.namespace, 'spec.clusterIP': (e) => e.clusterIP };

/** A matcher for a field selector on metadata.name, metadata.namespace or (Services) spec.clusterIP. */
function fieldMatcher(selector) {
  if (!selector) return () => true;
  const terms = selector.split(',').map((t) => {
    const m = /^(metadata\.name|metadata\.namespace|spec\.clusterIP)\s*(!=|==?)\s*(.*)$/.exec(t.trim());
    if (!m) throw Object.assign(new Error(`field selector ${t}: only metadata.name, metadata.namespace and spec.clusterIP are supported`), { code: 400 });
    const get = FIELDS[m[1]];
    return m[2] === '!=' ? (e) => get(e) !== m[3] : (e) => get(e) === m[3];
  });
  return (e) => terms.every((f) => f(e));
}

/** The fake API server; see the file comment. */
export class FakeApiServer {
  /**
   * `anonymous`: a request without an Authorization header is served too (client-go sends a
   * kubeconfig's token only over TLS, and this server speaks plain http); a wrong token is still 401.
   * @param {{ token: string, anonymous?: boolean, eventWindow?: number, bookmarkMs?: number, snapshotTtlMs?: number }} opts
   */
  constructor({ token, anonymous = false, eventWindow = 100_000, bookmarkMs = 1000, snapshotTtlMs = 60_000 }) {
    this.token = token;
    this.anonymous = anonymous;
    this.eventWindow = eventWindow;
    this.bookmarkMs = bookmarkMs;
    this.snapshotTtlMs = snapshotTtlMs;
    this.rv = 1000;
    /** collection -> Map(key -> {bytes (the object's JSON, UTF-8), rv, labels, name, namespace}) */
    this.store = Object.fromEntries(Object.keys(RESOURCES).map((r) => [r, new Map()]));
    /** {rv, resource, type, entry}; the window starts after `oldestRv`. */
    this.events = [];
    this.oldestRv = this.rv;
    this.watchers = new Set();
    this.snapshots = new Map();
    this.nextSnapshot = 1;
    this.resetStats();
    this.server = createServer((req, res) => this.#handle(req, res));
    this.server.keepAliveTimeout = 60_000;
  }

  /**
   * Zeroes the request counters; `firstListAt` is the time (performance.now) of the next list, and
   * `listed` resolves then (a waiting benchmark does not wake every few ms on UML's one CPU);
   * `firstRequestAt` and `requested` the same for the next list or watch (a resumed daemon lists nothing).
   */
  resetStats() {
    this.stats = { lists: 0, pages: 0, watches: 0, gone: 0, bookmarks: 0, unauthorized: 0, events: 0, firstListAt: null, firstRequestAt: null, listParams: new Set(), watchParams: new Set() };
    this.listed = new Promise((res) => (this.#onList = res));
    this.requested = new Promise((res) => (this.#onRequest = res));
  }

  #onList = () => {};
  #onRequest = () => {};

  #request(now) {
    if (this.stats.firstRequestAt !== null) return;
    this.stats.firstRequestAt = now;
    this.#onRequest();
  }

  /** Listens on 127.0.0.1 (a free port); resolves to the base URL. */
  async start() {
    await new Promise((res) => this.server.listen(0, '127.0.0.1', res));
    this.bookmarkTimer = setInterval(() => this.#bookmarks(), this.bookmarkMs);
    return `http://127.0.0.1:${this.server.address().port}`;
  }

  /** Ends every watch and stops listening. */
  async close() {
    clearInterval(this.bookmarkTimer);
    for (const w of this.watchers) w.res.end();
    this.server.closeAllConnections?.();
    await new Promise((res) => this.server.close(res));
  }

  /** Writes a kubeconfig (http, bearer token unless `token: false`) for this server to `file`. */
  writeKubeconfig(file, url, { token = true } = {}) {
    writeFileSync(file, `${JSON.stringify({
      apiVersion: 'v1', kind: 'Config', 'current-context': 'bench',
      clusters: [{ name: 'bench', cluster: { server: url } }],
      users: [{ name: 'bench', user: token ? { token: this.token } : {} }],
      contexts: [{ name: 'bench', context: { cluster: 'bench', user: 'bench' } }],
    }, null, 2)}\n`);
  }

  /** Creates or replaces an object (its resourceVersion is set); writes the event to every matching watch at once. */
  put(resource, obj) {
    const { namespace = '', name } = obj.metadata;
    const key = namespace ? `${namespace}/${name}` : name;
    const map = this.store[resource];
    const type = map.has(key) ? 'MODIFIED' : 'ADDED';
    const rv = ++this.rv;
    obj.metadata.resourceVersion = String(rv);
    const entry = { key, bytes: Buffer.from(JSON.stringify(obj)), rv, labels: obj.metadata.labels ?? {}, name, namespace, clusterIP: obj.spec?.clusterIP ?? '' };
    map.set(key, entry);
    this.#record({ rv, resource, type, entry });
  }

  /** Deletes an object, if present. */
  remove(resource, key) {
    const entry = this.store[resource].get(key);
    if (!entry) return;
    this.store[resource].delete(key);
    const rv = ++this.rv;
    const obj = JSON.parse(entry.bytes.toString());
    obj.metadata.resourceVersion = String(rv);
    this.#record({ rv, resource, type: 'DELETED', entry: { ...entry, bytes: Buffer.from(JSON.stringify(obj)), rv } });
  }

  /** Forgets every event so far: a watch from an older resourceVersion now gets 410 Gone. */
  compact() {
    this.events = [];
    this.oldestRv = this.rv;
  }

  #record(ev) {
    this.events.push(ev);
    if (this.events.length > this.eventWindow) this.oldestRv = this.events.splice(0, this.events.length - this.eventWindow).at(-1).rv;
    for (const w of this.watchers) if (w.resource === ev.resource && w.match(ev.entry)) this.#send(w, ev.type, ev.entry.bytes);
  }

  /** One watch event line; `object` is the object's JSON (a Buffer or a string). */
  #send(w, type, object) {
    w.res.cork();
    w.res.write(`{"type":"${type}","object":`);
    w.res.write(object);
    w.res.write('}\n');
    w.res.uncork();
  }

  #bookmarks() {
    for (const w of this.watchers) {
      if (!w.bookmarks) continue;
      const { kind, apiVersion } = RESOURCES[w.resource];
      this.#send(w, 'BOOKMARK', JSON.stringify({ kind, apiVersion, metadata: { resourceVersion: String(this.rv) } }));
      this.stats.bookmarks++;
    }
  }

  #handle(req, res) {
    const url = new URL(req.url, 'http://x');
    const reply = (code, body) => {
      res.writeHead(code, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.headers.authorization !== `Bearer ${this.token}` && !(this.anonymous && req.headers.authorization === undefined)) {
      this.stats.unauthorized++;
      return reply(401, status(401, 'Unauthorized', 'Unauthorized'));
    }
    if (url.pathname === '/version') return reply(200, { major: '1', minor: '31', gitVersion: 'v1.31.0-bench' });
    if (/^\/apis\/events\.k8s\.io\/v1\/namespaces\/[^/]+\/events(\/[^/]+)?$/.test(url.pathname) && (req.method === 'POST' || req.method === 'PATCH')) {
      this.stats.events++; // accepted and dropped: the benchmark's objects are all valid
      const body = [];
      req.on('data', (c) => body.push(c));
      req.on('end', () => reply(req.method === 'POST' ? 201 : 200, JSON.parse(Buffer.concat(body).toString() || '{}')));
      return;
    }
    const m = PATH.exec(url.pathname);
    const spec = m && RESOURCES[m[3]];
    if (!spec || spec.prefix !== m[1] || (spec.clusterScoped && m[2]) || req.method !== 'GET') {
      return reply(404, status(404, 'NotFound', `the server could not find the requested resource (${req.method} ${url.pathname})`));
    }
    if (m[4]) {
      const entry = this.store[m[3]].get(m[2] ? `${m[2]}/${m[4]}` : m[4]);
      if (!entry) return reply(404, status(404, 'NotFound', `${m[3]} "${m[4]}" not found`));
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': entry.bytes.length });
      return res.end(entry.bytes);
    }
    const q = url.searchParams;
    let match;
    try {
      const labels = labelMatcher(q.get('labelSelector'));
      const fields = fieldMatcher(q.get('fieldSelector'));
      const ns = m[2];
      match = (e) => (!ns || e.namespace === ns) && labels(e.labels) && fields(e);
    } catch (e) {
      return reply(400, status(400, 'BadRequest', e.message));
    }
    const params = [...q.keys()].filter((k) => k !== 'watch').sort().join(',');
    if (q.get('watch') === 'true' || q.get('watch') === '1') {
      this.stats.watchParams.add(params);
      return this.#watch(m[3], q, match, req, res);
    }
    this.stats.listParams.add(params);
    return this.#list(m[3], q, match, res, reply);
  }

  #list(resource, q, match, res, reply) {
    const now = performance.now();
    if (this.stats.firstListAt === null) {
      this.stats.firstListAt = now;
      this.#onList();
    }
    this.#request(now);
    this.stats.pages++;
    for (const [id, s] of this.snapshots) if (now - s.at > this.snapshotTtlMs) this.snapshots.delete(id);
    const limit = Number(q.get('limit') ?? 0);
    let snap;
    let offset = 0;
    const token = q.get('continue');
    if (token) {
      let id;
      try {
        ({ id, offset } = JSON.parse(Buffer.from(token, 'base64url').toString()));
      } catch {
        return reply(400, status(400, 'BadRequest', `continue ${token}: not a continue token`));
      }
      snap = this.snapshots.get(id);
      if (!snap || snap.resource !== resource) return reply(410, status(410, 'Expired', 'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.'));
    } else {
      this.stats.lists++;
      const entries = [...this.store[resource].values()].filter(match).sort((a, b) => (a.key < b.key ? -1 : 1));
      snap = { id: this.nextSnapshot++, resource, rv: this.rv, entries, at: now };
    }
    const end = limit > 0 ? Math.min(snap.entries.length, offset + limit) : snap.entries.length;
    const more = end < snap.entries.length;
    if (more) this.snapshots.set(snap.id, snap);
    else this.snapshots.delete(snap.id);
    const { kind, apiVersion } = RESOURCES[resource];
    const meta = { resourceVersion: String(snap.rv), ...(more ? { continue: Buffer.from(JSON.stringify({ id: snap.id, offset: end })).toString('base64url'), remainingItemCount: snap.entries.length - end } : {}) };
    const parts = [Buffer.from(`{"kind":"${kind}List","apiVersion":"${apiVersion}","metadata":${JSON.stringify(meta)},"items":[`)];
    for (let i = offset; i < end; i++) {
      if (i > offset) parts.push(COMMA);
      parts.push(snap.entries[i].bytes);
    }
    parts.push(LIST_END);
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': parts.reduce((n, b) => n + b.length, 0) });
    res.cork();
    for (const b of parts) res.write(b);
    res.uncork();
    res.end();
  }

  #watch(resource, q, match, req, res) {
    this.stats.watches++;
    this.#request(performance.now());
    const from = Number(q.get('resourceVersion') || 0);
    const initial = q.get('sendInitialEvents') === 'true' || from === 0;
    if (!initial && from < this.oldestRv) {
      this.stats.gone++;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(`{"type":"ERROR","object":${JSON.stringify(status(410, 'Expired', `too old resource version: ${from} (${this.oldestRv})`))}}\n`);
      return;
    }
    const w = { resource, match, res, bookmarks: q.get('allowWatchBookmarks') === 'true' };
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    res.flushHeaders(); // as an API server does: the client sees the watch open before any event
    if (initial) {
      for (const e of this.store[resource].values()) if (match(e)) this.#send(w, 'ADDED', e.bytes);
      if (q.get('sendInitialEvents') === 'true') {
        const { kind, apiVersion } = RESOURCES[resource];
        this.#send(w, 'BOOKMARK', JSON.stringify({ kind, apiVersion, metadata: { resourceVersion: String(this.rv), annotations: { 'k8s.io/initial-events-end': 'true' } } }));
      }
    } else {
      for (const ev of this.events) if (ev.rv > from && ev.resource === resource && match(ev.entry)) this.#send(w, ev.type, ev.entry.bytes);
    }
    this.watchers.add(w);
    const timeout = setTimeout(() => res.end(), Number(q.get('timeoutSeconds') || 1800) * 1000);
    const drop = () => { clearTimeout(timeout); this.watchers.delete(w); };
    req.on('close', drop);
    res.on('close', drop);
  }
}
