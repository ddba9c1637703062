// ManifestSource against real files in a temp directory: parsing, every error path, last good
// state, node selection, ordering, and fs.watch deliveries (only differences).
import { mkdtemp, rm, writeFile, unlink, mkdir, rename } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import type { EndpointSlice, Node, Service } from '../../src/model/k8s.js';
import type { ObjectError } from '../../src/model/service.js';
import { ManifestSource, type ManifestSourceOptions } from '../../src/source/manifests.js';
import type { SourceHandler } from '../../src/source/types.js';

/** Records every call as one readable line; keeps the last delivered objects. */
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
  /** Events after index `from`, once `done` holds for them (polls; real fs.watch is asynchronous). */
  async until(from: number, done: (events: string[]) => boolean, ms = 4000): Promise<string[]> {
    const end = Date.now() + ms;
    while (!done(this.events.slice(from))) {
      if (Date.now() > end) throw new Error(`timed out; events: ${JSON.stringify(this.events.slice(from))}`);
      await sleep(10);
    }
    return this.events.slice(from);
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function svc(name: string, ip: string, port: number | string = 80, ns = 'demo'): string {
  return `apiVersion: v1
kind: Service
metadata: { name: ${name}, namespace: ${ns} }
spec:
  clusterIP: ${ip}
  ports: [{ name: http, port: ${port}, targetPort: 8080 }]
`;
}

function slice(name: string, service: string, ips: string[], ns = 'demo'): string {
  return `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: ${name}, namespace: ${ns}, labels: { kubernetes.io/service-name: ${service} } }
addressType: IPv4
endpoints: [${ips.map((ip) => `{ addresses: [${ip}], conditions: { ready: true } }`).join(', ')}]
ports: [{ name: http, port: 8080 }]
`;
}

function node(name: string, ip: string): string {
  return `apiVersion: v1
kind: Node
metadata: { name: ${name} }
status: { addresses: [{ type: InternalIP, address: ${ip} }] }
`;
}

const docs = (...d: string[]): string => d.join('---\n');

let dir: string;
const sources: ManifestSource[] = [];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kip-manifests-'));
});
afterEach(async () => {
  await Promise.all(sources.splice(0).map((s) => s.stop()));
  await rm(dir, { recursive: true, force: true });
});

async function start(opts: Partial<ManifestSourceOptions> = {}): Promise<{ src: ManifestSource; rec: Recorder }> {
  const src = new ManifestSource({ path: dir, nodeName: 'kip-node', watch: false, debounceMs: 20, ...opts });
  sources.push(src);
  const rec = new Recorder();
  await src.start(rec);
  return { src, rec };
}

const write = (name: string, text: string): Promise<void> => writeFile(join(dir, name), text);

describe('initial read', () => {
  it('delivers multi-document YAML and JSON Lists, sorted by file then document, then onSynced once', async () => {
    await write('b-services.yaml', docs(svc('web', '10.96.0.10'), '', svc('dns', '10.96.0.53', 53)));
    await write('a-slices.json', JSON.stringify({
      apiVersion: 'v1',
      kind: 'List',
      items: [
        { apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', metadata: { name: 'web-1', namespace: 'demo' }, addressType: 'IPv4' },
        { apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', metadata: { name: 'dns-1', namespace: 'demo' }, addressType: 'IPv4' },
      ],
    }));
    await write('c-nodes.yml', docs(node('other', '10.250.0.9'), node('kip-node', '10.250.0.1')));
    await write('notes.txt', 'not a manifest');
    await write('.hidden.yaml', 'not: [valid');
    const { rec } = await start();
    expect(rec.events).toEqual(['eps demo/web-1', 'eps demo/dns-1', 'svc demo/web', 'svc demo/dns', 'node kip-node', 'synced']);
    expect(rec.services.get('demo/web')?.spec.ports[0]).toMatchObject({ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 });
    expect(rec.node?.status.addresses).toEqual([{ type: 'InternalIP', address: '10.250.0.1' }]);
  });

  it('delivers onNode(null) when no Node is named like this node', async () => {
    await write('x.yaml', docs(node('other', '10.250.0.9'), svc('web', '10.96.0.10')));
    const { rec } = await start();
    expect(rec.events).toEqual(['svc demo/web', 'node-', 'synced']);
  });

  it('reads a single file given as the path, whatever its extension', async () => {
    await write('manifest.conf', svc('web', '10.96.0.10'));
    await write('other.yaml', svc('dns', '10.96.0.53'));
    const { rec } = await start({ path: join(dir, 'manifest.conf') });
    expect(rec.events).toEqual(['svc demo/web', 'node-', 'synced']);
  });

  it('rejects start() when the path does not exist', async () => {
    const src = new ManifestSource({ path: join(dir, 'missing'), nodeName: 'n' });
    await expect(src.start(new Recorder())).rejects.toThrow(/ENOENT/);
  });

  it('accepts an empty directory', async () => {
    const { rec } = await start();
    expect(rec.events).toEqual(['node-', 'synced']);
  });
});

describe('errors', () => {
  it('reports broken YAML with the file, document and line; other documents and files are delivered', async () => {
    await write('a.yaml', docs(svc('ok', '10.96.0.1'), 'kind: Service\nmetadata: {name: x\nspec: [1,\n'));
    await write('b.yaml', svc('web', '10.96.0.10'));
    const { rec } = await start();
    expect(rec.events).toHaveLength(5);
    expect(rec.events[0]).toMatch(new RegExp(`^error ${join(dir, 'a.yaml')}#1: invalid YAML: .* at line (9|10), column \\d+$`));
    expect(rec.events.slice(1)).toEqual(['svc demo/ok', 'svc demo/web', 'node-', 'synced']);
  });

  it('names file, document, kind, object and field path of an invalid object; the rest of the file is delivered', async () => {
    await write('s.yaml', docs(svc('ok', '10.96.0.1'), svc('web', '10.96.0.10', '"80"'), svc('ok2', '10.96.0.2')));
    const { rec } = await start();
    expect(rec.events).toEqual([
      `error ${join(dir, 's.yaml')}#1 Service demo/web: spec.ports[0].port: expected number, received string`,
      'svc demo/ok', 'svc demo/ok2', 'node-', 'synced',
    ]);
  });

  it('names the item of a List, lists every issue, and names objects without a namespace in "default"', async () => {
    const list = { apiVersion: 'v1', kind: 'List', items: [
      { apiVersion: 'v1', kind: 'Service', metadata: { name: 'a' }, spec: {} },
      { apiVersion: 'v1', kind: 'Service', metadata: { name: 'b' }, spec: { type: 'Weird', externalIPs: ['nope'] } },
    ] };
    await write('l.json', JSON.stringify(list));
    const { rec } = await start();
    expect(rec.events[0]).toBe(
      `error ${join(dir, 'l.json')}#0 Service default/b: items[1].spec.type: Invalid option: expected one of ` +
        '"ClusterIP"|"NodePort"|"LoadBalancer"|"ExternalName"; items[1].spec.externalIPs[0]: invalid IP address "nope"',
    );
    expect(rec.events.slice(1)).toEqual(['svc default/a', 'node-', 'synced']);
  });

  it('skips unknown kinds, missing kinds and non-objects with an error each', async () => {
    const deployment = 'apiVersion: apps/v1\nkind: Deployment\nmetadata: { name: app, namespace: demo }\n';
    await write('m.yaml', docs(deployment, 'metadata: { name: nokind }\n', '- 1\n- 2\n', svc('web', '10.96.0.10')));
    const { rec } = await start();
    const f = join(dir, 'm.yaml');
    expect(rec.events).toEqual([
      `error ${f}#0 Deployment demo/app: kind: unsupported kind apps/v1/Deployment; skipped`,
      `error ${f}#1 default/nokind: kind: missing`,
      `error ${f}#2: (document): expected an object, got a list`,
      'svc demo/web', 'node-', 'synced',
    ]);
  });

  it('reports duplicates; the first in file order wins', async () => {
    await write('a.yaml', svc('web', '10.96.0.10'));
    await write('b.yaml', docs(svc('dns', '10.96.0.53'), svc('web', '10.96.0.99')));
    const { rec } = await start();
    // At start-up each file's objects are handed on once it is read; the duplicate is reported after the last file.
    expect(rec.events).toEqual([
      'svc demo/web', 'svc demo/dns',
      `error ${join(dir, 'b.yaml')}#1 Service demo/web: duplicate of ${join(dir, 'a.yaml')}#0; ignored`,
      'node-', 'synced',
    ]);
    expect(rec.services.get('demo/web')?.spec.clusterIP).toBe('10.96.0.10');
  });
});

describe('watch', () => {
  it('delivers only the differences when files are added, modified and deleted', async () => {
    await write('services.yaml', docs(svc('web', '10.96.0.10'), svc('dns', '10.96.0.53')));
    const { rec } = await start({ watch: true });
    expect(rec.events).toEqual(['svc demo/web', 'svc demo/dns', 'node-', 'synced']);

    let mark = rec.events.length;
    await write('slices.yaml', docs(slice('web-1', 'web', ['10.244.1.2']), slice('dns-1', 'dns', ['10.244.1.3'])));
    expect(await rec.until(mark, (e) => e.length >= 2)).toEqual(['eps demo/web-1', 'eps demo/dns-1']);

    mark = rec.events.length;
    await write('slices.yaml', docs(slice('web-1', 'web', ['10.244.1.2', '10.244.2.2']), slice('dns-1', 'dns', ['10.244.1.3'])));
    expect(await rec.until(mark, (e) => e.length >= 1)).toEqual(['eps demo/web-1']);
    expect(rec.slices.get('demo/web-1')?.endpoints).toHaveLength(2);

    mark = rec.events.length;
    await unlink(join(dir, 'slices.yaml'));
    expect(await rec.until(mark, (e) => e.length >= 2)).toEqual(['eps- demo/web-1', 'eps- demo/dns-1']);

    mark = rec.events.length;
    await write('services.yaml', docs(svc('web', '10.96.0.10'), svc('dns', '10.96.0.53'))); // same content
    await write('zz.yaml', node('kip-node', '10.250.0.1'));
    expect(await rec.until(mark, (e) => e.length >= 1)).toEqual(['node kip-node']);
    await sleep(100);
    expect(rec.events.slice(mark)).toEqual(['node kip-node']);
    expect(rec.events.filter((e) => e === 'synced')).toHaveLength(1);
  });

  it('a duplicate read in an earlier round takes over, whole, when the winning definition goes', async () => {
    await write('a.yaml', svc('web', '10.96.0.10'));
    await write('b.yaml', docs(slice('web-1', 'web', ['10.244.1.2', '10.244.1.3']), svc('web', '10.96.0.99', 8080)));
    const { rec } = await start({ watch: true });
    expect(rec.services.get('demo/web')?.spec.clusterIP).toBe('10.96.0.10');
    const mark = rec.events.length;
    await unlink(join(dir, 'a.yaml')); // b.yaml is unchanged: its Service was kept as text only
    expect(await rec.until(mark, (e) => e.length >= 1)).toEqual(['svc demo/web']);
    expect(rec.services.get('demo/web')).toMatchObject({ spec: { clusterIP: '10.96.0.99', ports: [{ port: 8080, protocol: 'TCP', name: 'http', targetPort: 8080 }] } });
    await sleep(100);
    expect(rec.events.slice(mark)).toEqual(['svc demo/web']);
  });

  it('a duplicate whose file broke since it was read cannot take over: the delivered version stays, reported once, until the file is fixed', async () => {
    await write('a.yaml', svc('web', '10.96.0.10'));
    await write('b.yaml', docs(svc('web', '10.96.0.99'), svc('dns', '10.96.0.53')));
    const { rec } = await start({ watch: true });
    const b = join(dir, 'b.yaml');
    // b.yaml breaks: its last good state (a duplicate of web, and dns) stays.
    let mark = rec.events.length;
    await write('b.yaml', 'kind: Service\n  metadata: [\n');
    await rec.until(mark, (e) => e.some((x) => x.startsWith(`error ${b}#0: invalid YAML`)));
    // a.yaml's web goes: b.yaml's cannot be read back from the broken file.
    mark = rec.events.length;
    await unlink(join(dir, 'a.yaml'));
    const lost = `error ${b}#0 Service demo/web: now the first definition, but its file no longer reads as it did; ${join(dir, 'a.yaml')}#0's version stays until the file changes`;
    expect(await rec.until(mark, (e) => e.length >= 1)).toEqual([lost]);
    expect(rec.services.get('demo/web')?.spec.clusterIP).toBe('10.96.0.10');
    // Another file's change: the same state, not reported again.
    mark = rec.events.length;
    await write('c.yaml', svc('x', '10.96.0.9'));
    expect(await rec.until(mark, (e) => e.length >= 1)).toEqual(['svc demo/x']);
    await sleep(100);
    expect(rec.events.slice(mark)).toEqual(['svc demo/x']);
    // Fixed: its web (now the only one) is applied; dns unchanged is not delivered again.
    mark = rec.events.length;
    await write('b.yaml', docs(svc('web', '10.96.0.98'), svc('dns', '10.96.0.53')));
    expect(await rec.until(mark, (e) => e.length >= 1)).toEqual(['svc demo/web']);
    expect(rec.services.get('demo/web')?.spec.clusterIP).toBe('10.96.0.98');
    await sleep(100);
    expect(rec.events.slice(mark)).toEqual(['svc demo/web']);
  });

  it('an edited item of a List is delivered alone; an edited document is delivered again even when its object is equal', async () => {
    const item = (name: string, clusterIP: string): object => ({ apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: 'demo' }, spec: { clusterIP, ports: [{ name: 'http', port: 80 }] } });
    const list = (ip: string): string => JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [item('a', '10.96.0.1'), item('b', ip)] });
    await write('l.json', list('10.96.0.2'));
    await write('m.yaml', docs(svc('c', '10.96.0.3'), svc('d', '10.96.0.4')));
    const { rec } = await start({ watch: true });
    let mark = rec.events.length;
    await write('l.json', list('10.96.0.22'));
    expect(await rec.until(mark, (e) => e.length >= 1)).toEqual(['svc demo/b']);
    await sleep(100);
    expect(rec.events.slice(mark)).toEqual(['svc demo/b']);
    // A comment in d's document: its text changed, so d is handed on again (the change tracker finds it equal).
    mark = rec.events.length;
    await write('m.yaml', docs(svc('c', '10.96.0.3'), `# moved\n${svc('d', '10.96.0.4')}`));
    expect(await rec.until(mark, (e) => e.length >= 1)).toEqual(['svc demo/d']);
    await sleep(100);
    expect(rec.events.slice(mark)).toEqual(['svc demo/d']);
  });

  it('keeps the last good state of a file while it is broken, applies it when fixed', async () => {
    const f = join(dir, 's.yaml');
    await write('s.yaml', docs(svc('a', '10.96.0.1'), svc('b', '10.96.0.2'), svc('c', '10.96.0.3')));
    await write('other.yaml', svc('x', '10.96.0.9'));
    const { rec } = await start({ watch: true });
    expect(rec.events).toEqual(['svc demo/x', 'svc demo/a', 'svc demo/b', 'svc demo/c', 'node-', 'synced']);

    // Broken YAML: an error, nothing deleted; other files still apply.
    let mark = rec.events.length;
    await write('s.yaml', 'kind: Service\n  metadata: [\n');
    await write('other.yaml', svc('x', '10.96.0.19'));
    let e = await rec.until(mark, (ev) => ev.some((x) => x.startsWith(`error ${f}#0: invalid YAML`)) && ev.includes('svc demo/x'));
    expect(e.filter((x) => !x.startsWith('error'))).toEqual(['svc demo/x']);
    expect([...rec.services.keys()].sort()).toEqual(['demo/a', 'demo/b', 'demo/c', 'demo/x']);

    // a modified (valid), b invalid, c removed: a is updated, b stays as it was, c is not deleted.
    mark = rec.events.length;
    await write('s.yaml', docs(svc('a', '10.96.0.11'), svc('b', '10.96.0.12', 'http')));
    e = await rec.until(mark, (ev) => ev.includes('svc demo/a'));
    expect(e).toEqual([`error ${f}#1 Service demo/b: spec.ports[0].port: expected number, received string`, 'svc demo/a']);
    expect(rec.services.get('demo/a')?.spec.clusterIP).toBe('10.96.0.11');
    expect(rec.services.get('demo/b')?.spec.clusterIP).toBe('10.96.0.2');
    expect(rec.services.has('demo/c')).toBe(true);

    // Fixed: b updated, c deleted, a unchanged (not re-delivered).
    mark = rec.events.length;
    await write('s.yaml', docs(svc('a', '10.96.0.11'), svc('b', '10.96.0.12')));
    e = await rec.until(mark, (ev) => ev.length >= 2);
    await sleep(100);
    expect(rec.events.slice(mark)).toEqual(['svc demo/b', 'svc- demo/c']);
    expect(rec.services.get('demo/b')?.spec.clusterIP).toBe('10.96.0.12');
  });

  it('follows the node: appears, changes, disappears', async () => {
    await write('n.yaml', node('other', '10.250.0.9'));
    const { rec } = await start({ watch: true });
    expect(rec.events).toEqual(['node-', 'synced']);
    let mark = rec.events.length;
    await write('n.yaml', docs(node('other', '10.250.0.9'), node('kip-node', '10.250.0.1')));
    expect(await rec.until(mark, (e) => e.length >= 1)).toEqual(['node kip-node']);
    mark = rec.events.length;
    await write('n.yaml', docs(node('other', '10.250.0.8'), node('kip-node', '10.250.0.2')));
    expect(await rec.until(mark, (e) => e.length >= 1)).toEqual(['node kip-node']);
    expect(rec.node?.status.addresses[0]?.address).toBe('10.250.0.2');
    mark = rec.events.length;
    await write('n.yaml', node('other', '10.250.0.8'));
    expect(await rec.until(mark, (e) => e.length >= 1)).toEqual(['node-']);
  });

  it('watches a single file replaced by rename, as editors and ConfigMap mounts do', async () => {
    await write('m.yaml', svc('web', '10.96.0.10'));
    const { rec } = await start({ watch: true, path: join(dir, 'm.yaml') });
    const mark = rec.events.length;
    await mkdir(join(dir, 'tmp'));
    await writeFile(join(dir, 'tmp', 'm.yaml'), svc('dns', '10.96.0.53'));
    await rename(join(dir, 'tmp', 'm.yaml'), join(dir, 'm.yaml'));
    const e = await rec.until(mark, (ev) => ev.length >= 2);
    expect(e.sort()).toEqual(['svc demo/dns', 'svc- demo/web']);
  });

  it('delivers nothing after stop()', async () => {
    await write('m.yaml', svc('web', '10.96.0.10'));
    const { src, rec } = await start({ watch: true });
    await src.stop();
    const mark = rec.events.length;
    await write('m.yaml', svc('dns', '10.96.0.53'));
    await sleep(150);
    expect(rec.events.slice(mark)).toEqual([]);
  });
});

describe('examples/', () => {
  it('validates without errors: 6 Services, their 6 EndpointSlices, the node kip-node', async () => {
    const { rec } = await start({ path: join(import.meta.dirname, '../../examples') });
    expect(rec.events.filter((e) => e.startsWith('error'))).toEqual([]);
    expect([...rec.services.keys()]).toEqual(['demo/web', 'demo/web-lb', 'demo/dns', 'demo/sticky', 'demo/hashed', 'demo/draining']);
    for (const [key, s] of rec.slices) expect(rec.services.has(`demo/${s.metadata.labels['kubernetes.io/service-name']}`), key).toBe(true);
    expect(rec.slices.size).toBe(6);
    expect(rec.node?.status.addresses[0]).toEqual({ type: 'InternalIP', address: '10.250.0.1' });
    expect(rec.events.at(-1)).toBe('synced');
  });
});
