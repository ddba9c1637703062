// ManifestSource: one bad file fails alone. Real files in a temp directory: an alias bomb, a
// directory, a FIFO and a symlink loop under manifest names, a file over the size limit, binary
// and non-UTF-8 content. Each is reported once with its file name; the others are delivered at
// start-up and keep being applied on re-reads; a good file that turns bad keeps its last good state.
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import type { Service } from '../../src/model/k8s.js';
import type { ObjectError } from '../../src/model/service.js';
import { MAX_MANIFEST_BYTES, ManifestSource, type ManifestSourceOptions } from '../../src/source/manifests.js';
import type { SourceHandler } from '../../src/source/types.js';

class Recorder implements SourceHandler {
  events: string[] = [];
  services = new Map<string, Service>();
  onService(key: string, s: Service | null): void {
    this.events.push(s ? `svc ${key}` : `svc- ${key}`);
    if (s) this.services.set(key, s);
    else this.services.delete(key);
  }
  onEndpointSlice(key: string, s: unknown): void {
    this.events.push(s ? `eps ${key}` : `eps- ${key}`);
  }
  onNode(n: { metadata: { name: string } } | null): void {
    this.events.push(n ? `node ${n.metadata.name}` : 'node-');
  }
  onError(e: ObjectError): void {
    this.events.push(`error ${e.object}: ${e.reason}`);
  }
  onSynced(): void {
    this.events.push('synced');
  }
  async until(done: (events: string[]) => boolean, ms = 4000): Promise<void> {
    const end = Date.now() + ms;
    while (!done(this.events)) {
      if (Date.now() > end) throw new Error(`timed out; events: ${JSON.stringify(this.events)}`);
      await sleep(10);
    }
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function svc(name: string, ip: string): string {
  return `apiVersion: v1\nkind: Service\nmetadata: { name: ${name}, namespace: demo }\nspec:\n  clusterIP: ${ip}\n  ports: [{ name: http, port: 80 }]\n`;
}

/** The billion laughs: 9^9 strings through nine levels of aliases, in 800 bytes. */
function aliasBomb(): string {
  let text = 'kind: Service\nmetadata: {name: bomb}\na: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n';
  const names = 'abcdefghi';
  for (let i = 1; i < names.length; i++) text += `${names[i]}: &${names[i]} [${Array(9).fill(`*${names[i - 1]}`).join(',')}]\n`;
  return text;
}

let dir: string;
const sources: ManifestSource[] = [];
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kip-isolation-'));
});
afterEach(async () => {
  await Promise.all(sources.splice(0).map((s) => s.stop()));
  await rm(dir, { recursive: true, force: true });
});

async function start(opts: Partial<ManifestSourceOptions> = {}): Promise<Recorder> {
  const src = new ManifestSource({ path: dir, nodeName: 'kip-node', watch: false, debounceMs: 20, ...opts });
  sources.push(src);
  const rec = new Recorder();
  await src.start(rec);
  return rec;
}

const write = (name: string, text: string | Buffer): Promise<void> => writeFile(join(dir, name), text);

describe('one bad file fails alone', () => {
  it('start-up delivers every good file and names each bad one once', async () => {
    await write('a-good.yaml', svc('a', '10.96.0.1'));
    await write('b-bomb.yaml', aliasBomb());
    await mkdir(join(dir, 'c-dir.yaml'));
    execFileSync('mkfifo', [join(dir, 'd-fifo.yaml')]);
    await symlink('e-loop.yaml', join(dir, 'e-loop.yaml'));
    await write('f-huge.yaml', '');
    await truncate(join(dir, 'f-huge.yaml'), MAX_MANIFEST_BYTES + 1); // sparse: no disk used, never read
    await write('g-latin1.yaml', Buffer.from('kind: Service\nmetadata: {name: caf\xe9}\n', 'latin1'));
    await write('h-binary.yaml', Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0x02, 0x01, 0x01, 0x00, 0x00, 0x0a]));
    await write('i-deep.json', '['.repeat(200_000));
    await write('j-deep.yaml', `kind: Service\nmetadata: ${'{a: '.repeat(10_000)}`);
    await write('k-names.yaml', `${svc('Evil', '10.96.0.9')}---\n${svc('k', '10.96.0.11')}`);
    await write('z-good.yaml', svc('z', '10.96.0.2'));
    const rec = await start();
    const f = (n: string): string => join(dir, n);
    const errors = rec.events.filter((e) => e.startsWith('error'));
    expect(rec.events.filter((e) => !e.startsWith('error'))).toEqual(['svc demo/a', 'svc demo/k', 'svc demo/z', 'node-', 'synced']);
    expect(errors).toEqual([
      expect.stringMatching(new RegExp(`^error ${f('b-bomb.yaml')}#0: invalid YAML: aliases expand to more than \\d+ nodes \\(an alias bomb or a self-reference\\)$`)),
      `error ${f('c-dir.yaml')}: is a directory, not a manifest file; keeping its last good state`,
      `error ${f('d-fifo.yaml')}: not a regular file; keeping its last good state`,
      `error ${f('e-loop.yaml')}: cannot read: a symlink loop (ELOOP); keeping its last good state`,
      `error ${f('f-huge.yaml')}: too large: ${MAX_MANIFEST_BYTES + 1} bytes, the limit is ${MAX_MANIFEST_BYTES}; keeping its last good state`,
      `error ${f('g-latin1.yaml')}: not valid UTF-8 text; keeping its last good state`,
      `error ${f('h-binary.yaml')}#0: invalid YAML: null byte is not allowed in input at line 1, column 8`,
      `error ${f('i-deep.json')}#0: invalid YAML: nesting exceeded maxDepth (128) at line 1, column 128`,
      `error ${f('j-deep.yaml')}#0: invalid YAML: nesting exceeded maxDepth (128) at line 2, column 516`,
      expect.stringMatching(new RegExp(`^error ${f('k-names.yaml')}#0 Service demo/Evil: metadata\\.name: invalid value "Evil": a DNS-1035 label`)),
    ]);
  });

  it('keeps applying the good files on re-reads, never reports an unchanged bad file again', async () => {
    await write('a.yaml', svc('a', '10.96.0.1'));
    await write('bomb.yaml', aliasBomb());
    await mkdir(join(dir, 'dir.yaml'));
    await symlink('loop.yaml', join(dir, 'loop.yaml'));
    const rec = await start({ watch: true });
    expect(rec.events.filter((e) => e.startsWith('error'))).toHaveLength(3);
    for (const ip of ['10.96.0.21', '10.96.0.22', '10.96.0.23']) {
      await write('a.yaml', svc('a', ip));
      await rec.until(() => rec.services.get('demo/a')?.spec.clusterIP === ip);
    }
    await sleep(100);
    expect(rec.events.filter((e) => e.startsWith('error'))).toHaveLength(3);
  });

  it('a good file that turns into a bomb, a directory or too large keeps its last good objects', async () => {
    await write('a.yaml', svc('a', '10.96.0.1'));
    await write('b.yaml', svc('b', '10.96.0.2'));
    const rec = await start({ watch: true, maxFileBytes: 4096 });
    const errorsFor = (name: string): string[] => rec.events.filter((e) => e.startsWith(`error ${join(dir, name)}`));

    await write('b.yaml', aliasBomb());
    await write('a.yaml', svc('a', '10.96.0.11'));
    await rec.until(() => rec.services.get('demo/a')?.spec.clusterIP === '10.96.0.11' && errorsFor('b.yaml').length === 1);
    expect(errorsFor('b.yaml')[0]).toMatch(/#0: invalid YAML: aliases expand/);
    expect(rec.services.get('demo/b')?.spec.clusterIP).toBe('10.96.0.2');

    await write('b.yaml', `${svc('b', '10.96.0.12')}# ${'x'.repeat(5000)}\n`);
    await write('a.yaml', svc('a', '10.96.0.21'));
    await rec.until(() => rec.services.get('demo/a')?.spec.clusterIP === '10.96.0.21' && errorsFor('b.yaml').length === 2);
    expect(errorsFor('b.yaml')[1]).toMatch(/: too large: \d+ bytes, the limit is 4096; keeping its last good state$/);
    expect(rec.services.get('demo/b')?.spec.clusterIP).toBe('10.96.0.2');

    await write('b.yaml', svc('b', '10.96.0.32'));
    await rec.until(() => rec.services.get('demo/b')?.spec.clusterIP === '10.96.0.32');
    expect(rec.events.filter((e) => e.startsWith('svc-'))).toEqual([]);
  });

  it('a single file given as the path that is bad: start-up succeeds with nothing, reports it', async () => {
    await write('one.yaml', aliasBomb());
    const rec = await start({ path: join(dir, 'one.yaml') });
    expect(rec.events).toEqual([expect.stringMatching(/one\.yaml#0: invalid YAML: aliases expand to more than \d+ nodes/), 'node-', 'synced']);
  });

  it('a single file path that disappears: reported once however many events follow; applied again when back', async () => {
    await write('one.yaml', svc('a', '10.96.0.1'));
    const rec = await start({ path: join(dir, 'one.yaml'), watch: true });
    const errors = (): string[] => rec.events.filter((e) => e.startsWith('error'));
    await rm(join(dir, 'one.yaml'));
    await rec.until(() => errors().length === 1);
    expect(errors()[0]).toMatch(/: cannot list: ENOENT.*; keeping the last good state$/);
    for (const n of [1, 2, 3]) {
      await write(`other-${n}.yaml`, 'x: 1\n');
      await sleep(60);
    }
    await sleep(100);
    expect(errors()).toHaveLength(1);
    expect(rec.services.has('demo/a')).toBe(true);
    await write('one.yaml', svc('a', '10.96.0.5'));
    await rec.until(() => rec.services.get('demo/a')?.spec.clusterIP === '10.96.0.5');
  });
});
