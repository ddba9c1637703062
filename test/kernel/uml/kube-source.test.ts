// The daemon with --kubeconfig against a fake API server in the same UML boot: paged lists with
// the kubeconfig's token, watches with bookmarks resumed from the bookmark's resourceVersion,
// objects as an API server sends them (managedFields, last-applied annotation) programmed into
// IPVS. Start-up is measured as a ratio in the same boot: spawn → first list request must take
// less than a process that only imports the config parser and @kubernetes/client-node (the
// least the daemon loaded before its first list request when it used client-node's API client).
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { CLI, Daemon, waitFor } from '../lib/daemon.js';
import { assertIsolated } from '../lib/guard.js';

assertIsolated();

const REPO = new URL('../../../', import.meta.url).pathname;
const TOKEN = 'uml-token';
const N = 60;
const PATHS: Record<string, 'services' | 'endpointslices' | 'nodes'> = {
  '/api/v1/services': 'services',
  '/apis/discovery.k8s.io/v1/endpointslices': 'endpointslices',
  '/api/v1/nodes': 'nodes',
};

type Obj = { metadata: { name: string; namespace?: string; resourceVersion?: string } } & Record<string, unknown>;

function service(i: number): Obj {
  const name = `svc-${i}`;
  const spec = { type: 'ClusterIP', clusterIP: `10.96.1.${i}`, clusterIPs: [`10.96.1.${i}`], selector: { app: name }, ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }] };
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name,
      namespace: 'bench',
      uid: `uid-${i}`,
      labels: { app: name },
      annotations: { 'kubectl.kubernetes.io/last-applied-configuration': JSON.stringify({ metadata: { name }, spec }) },
      managedFields: [{ manager: 'kubectl', operation: 'Update', fieldsType: 'FieldsV1', fieldsV1: { 'f:spec': { 'f:ports': {}, 'f:selector': {} } } }],
    },
    spec,
  };
}

function slice(i: number): Obj {
  const endpoints = [1, 2, 3].map((j) => ({ addresses: [`10.244.${j}.${i}`], conditions: { ready: true }, nodeName: `n${j}`, targetRef: { kind: 'Pod', name: `p-${i}-${j}` } }));
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: `svc-${i}-x`, namespace: 'bench', labels: { 'kubernetes.io/service-name': `svc-${i}` }, managedFields: [{ manager: 'kcm' }] },
    addressType: 'IPv4',
    endpoints,
    ports: [{ name: 'http', protocol: 'TCP', port: 8080 }],
  };
}

/** Lists (limit/continue), watches with bookmarks, a token check; every request logged with its time. */
class FakeApi {
  rv = 1;
  readonly requests: Array<{ at: number; url: string; auth: string | undefined }> = [];
  readonly store = { services: new Map<string, Obj>(), endpointslices: new Map<string, Obj>(), nodes: new Map<string, Obj>() };
  readonly watches = new Set<{ resource: string; res: ServerResponse }>();
  server: Server | undefined;
  port = 0;

  /** Every change with its resourceVersion: a watch from a resourceVersion gets what came after it first. */
  readonly events: Array<{ rv: number; resource: string; line: string }> = [];

  put(resource: 'services' | 'endpointslices', o: Obj, silent = false): void {
    o.metadata.resourceVersion = String(++this.rv);
    this.store[resource].set(`${o.metadata.namespace}/${o.metadata.name}`, o);
    this.#emit(resource, 'ADDED', o, silent);
  }

  remove(resource: 'services' | 'endpointslices', key: string): void {
    const o = this.store[resource].get(key)!;
    this.store[resource].delete(key);
    this.#emit(resource, 'DELETED', { ...o, metadata: { ...o.metadata, resourceVersion: String(++this.rv) } });
  }

  #emit(resource: string, type: string, object: Obj, silent = false): void {
    const line = `${JSON.stringify({ type, object })}\n`;
    this.events.push({ rv: this.rv, resource, line });
    if (!silent) for (const w of this.watches) if (w.resource === resource) w.res.write(line);
  }

  bookmark(): void {
    for (const w of this.watches) w.res.write(`${JSON.stringify({ type: 'BOOKMARK', object: { metadata: { resourceVersion: String(this.rv) } } })}\n`);
  }

  closeWatches(): void {
    for (const w of this.watches) w.res.end();
    this.watches.clear();
  }

  async listen(): Promise<void> {
    this.server = createServer((req, res) => {
      this.requests.push({ at: performance.now(), url: req.url ?? '', auth: req.headers.authorization });
      if (req.headers.authorization !== `Bearer ${TOKEN}`) return void res.writeHead(401).end('{"kind":"Status","code":401,"message":"no"}');
      const url = new URL(req.url ?? '/', 'http://x');
      const resource = PATHS[url.pathname];
      if (!resource) return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'application/json' });
      if (url.searchParams.get('watch')) {
        res.flushHeaders();
        const from = Number(url.searchParams.get('resourceVersion'));
        for (const e of this.events) if (e.resource === resource && e.rv > from) res.write(e.line);
        const w = { resource, res };
        this.watches.add(w);
        res.on('close', () => this.watches.delete(w));
        return;
      }
      const all = [...this.store[resource].values()];
      const limit = Number(url.searchParams.get('limit') || all.length);
      const from = Number(url.searchParams.get('continue') || 0);
      const cont = from + limit < all.length ? { continue: String(from + limit) } : {};
      res.end(JSON.stringify({ kind: 'List', metadata: { resourceVersion: String(this.rv), ...cont }, items: all.slice(from, from + limit) }));
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    const a = this.server.address();
    this.port = typeof a === 'object' && a ? a.port : 0;
  }

  async close(): Promise<void> {
    this.closeWatches();
    this.server?.closeAllConnections();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}

const ipvsadm = (): string => execFileSync('ipvsadm', ['-Sn'], { encoding: 'utf8' });
const watchesOf = (api: FakeApi, path: string): string[] => api.requests.map((r) => r.url).filter((u) => u.startsWith(`${path}?watch=`));
const listsOf = (api: FakeApi, path: string): string[] => api.requests.map((r) => r.url).filter((u) => u.startsWith(`${path}?`) && !u.includes('watch='));

describe('the daemon against an API server', () => {
  const api = new FakeApi();
  const dir = mkdtempSync('/run/kip-kube-');
  let d: Daemon;
  let spawnedAt = 0;

  beforeAll(async () => {
    execFileSync('sh', ['-c', 'iptables-legacy -t mangle -N KUBE-IPTABLES-HINT || true']); // as kubelet does
    for (let i = 1; i <= N; i++) {
      api.put('services', service(i), true);
      api.put('endpointslices', slice(i), true);
    }
    await api.listen();
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      `apiVersion: v1
clusters: [{ name: c, cluster: { server: "http://127.0.0.1:${api.port}" } }]
users: [{ name: u, user: { token: ${TOKEN} } }]
contexts: [{ name: x, context: { cluster: c, user: u } }]
current-context: x
`,
    );
    d = new Daemon(['--kubeconfig', kubeconfig, '--hostname-override', 'kip-node', '--ipvs-min-sync-period', '100ms', '--log-format', 'text']);
    spawnedAt = performance.now();
    d.start();
    await d.healthy();
  }, 90_000);
  afterAll(async () => {
    await d?.stop();
    await api.close();
    rmSync(dir, { recursive: true, force: true });
    execFileSync('sh', ['-c', `${process.execPath} ${CLI} cleanup >/dev/null 2>&1; true`]);
  });

  it('lists in pages with the kubeconfig token and programs every Service', () => {
    expect(new Set(api.requests.map((r) => r.auth))).toEqual(new Set([`Bearer ${TOKEN}`]));
    expect(listsOf(api, '/api/v1/services')[0]).toBe('/api/v1/services?limit=500');
    const saved = ipvsadm();
    for (const i of [1, N]) {
      expect(saved).toContain(`-A -t 10.96.1.${i}:80 -s rr`);
      for (const j of [1, 2, 3]) expect(saved).toContain(`-a -t 10.96.1.${i}:80 -r 10.244.${j}.${i}:8080 -m -w 1`);
    }
  });

  it('reaches its first list request sooner than a process importing the config parser and client-node', () => {
    const firstList = api.requests.find((r) => !r.url.includes('watch='))!.at - spawnedAt;
    const imports = [`${REPO}dist/src/config.js`, `${REPO}node_modules/@kubernetes/client-node/dist/index.js`];
    const t0 = performance.now();
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', imports.map((m) => `await import(${JSON.stringify(m)});`).join('')]);
    const importOnly = performance.now() - t0;
    expect(r.status).toBe(0);
    console.log(`spawn → first list request: ${Math.round(firstList)} ms; spawn → config + client-node imported: ${Math.round(importOnly)} ms`);
    expect(firstList).toBeLessThan(importOnly);
  });

  it('applies watch events, and resumes a closed watch from the last bookmark without relisting', async () => {
    await waitFor('watches', () => api.watches.size === 3);
    api.put('services', service(200));
    api.put('endpointslices', slice(200));
    await waitFor('svc-200 in IPVS', () => ipvsadm().includes('-a -t 10.96.1.200:80 -r 10.244.3.200:8080'));
    api.put('endpointslices', slice(201), true); // moves the resourceVersion; only a bookmark tells the watch
    api.bookmark();
    const bookmarked = api.rv;
    await new Promise((r) => setTimeout(r, 300));
    api.closeWatches();
    await waitFor('watches resumed', () => api.watches.size === 3);
    expect(watchesOf(api, '/api/v1/services').at(-1)).toMatch(new RegExp(`[?&]resourceVersion=${bookmarked}(&|$)`));
    expect(watchesOf(api, '/api/v1/services').at(-1)).toContain('allowWatchBookmarks=true');
    api.put('services', service(202));
    api.put('endpointslices', slice(202));
    await waitFor('svc-202 in IPVS', () => ipvsadm().includes('-a -t 10.96.1.202:80 -r 10.244.1.202:8080'));
    expect(listsOf(api, '/api/v1/services')).toHaveLength(1);
  });

  it('a restarted daemon resumes from the record the stopped one left: no list, what changed meanwhile programmed', async () => {
    expect(await d.stop()).toBe(0);
    expect(execFileSync('ls', [d.stateDir], { encoding: 'utf8' })).toContain('source-resume.jsonl');
    const moved = slice(5);
    (moved.endpoints as Array<{ addresses: string[] }>)[2]!.addresses = ['10.244.4.5'];
    api.put('endpointslices', moved);
    api.remove('services', 'bench/svc-7');
    api.remove('endpointslices', 'bench/svc-7-x');
    api.put('services', service(61));
    api.put('endpointslices', slice(61));
    const from = api.requests.length;
    const logFrom = d.log.length;
    d.start();
    await d.healthy();
    const after = api.requests.slice(from).map((r) => r.url);
    console.log(`restart: ${after.join(' ')}`);
    expect(after.filter((u) => !u.includes('watch='))).toEqual([]); // not even the node's (an empty list has a resourceVersion too)
    expect(after.find((u) => u.startsWith('/api/v1/services?watch='))).toMatch(/[?&]resourceVersion=\d+/);
    expect(d.log.slice(logFrom)).toMatch(/caches synced.*resumed=true/);
    const saved = ipvsadm();
    expect(saved).toContain('-a -t 10.96.1.5:80 -r 10.244.4.5:8080 -m -w 1');
    expect(saved).not.toMatch(/-a -t 10\.96\.1\.5:80 -r 10\.244\.3\.5:8080 -m -w [1-9]/);
    expect(saved).not.toContain('-A -t 10.96.1.7:80');
    expect(saved).toContain('-a -t 10.96.1.61:80 -r 10.244.1.61:8080 -m -w 1');
    expect(saved).toContain(`-a -t 10.96.1.${N}:80 -r 10.244.3.${N}:8080 -m -w 1`);
    // A later event goes on from there.
    api.remove('endpointslices', 'bench/svc-61-x');
    await waitFor('svc-61 without real servers', () => !/-a -t 10\.96\.1\.61:80 -r .* -w [1-9]/.test(ipvsadm()));
  });
});
