// The resume record's file (source/resume.ts): written whole, taken once, used only when it fits.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import { nodeSchema, serviceSchema } from '../../src/model/k8s-schemas.js';
import { ChangeTracker } from '../../src/proxy/changetracker.js';
import { RESUME_FILE, RESUME_MAX_AGE_MS, takeResume, writeResume } from '../../src/source/resume.js';
import { restoreTracker } from '../../src/source/start.js';

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));
const dir = (): string => {
  const d = mkdtempSync(join(tmpdir(), 'kip-resume-'));
  dirs.push(d);
  return d;
};

const cursor = { server: 'https://10.96.0.1:443', informers: { Service: '10', EndpointSlice: '11' }, delivered: { Service: ['a/b'], EndpointSlice: [], Node: [] }, rejected: [] };
const want = { build: 'kubernetes-ABC.js', nodeName: 'n1' };

describe('the resume record', () => {
  it('is taken once: read and removed', () => {
    const d = dir();
    const t = new ChangeTracker('n1');
    t.onNode(nodeSchema.parse({ metadata: { name: 'n1' }, status: { addresses: [{ type: 'InternalIP', address: '10.0.0.1' }] } }));
    t.onService('ns/a', serviceSchema.parse({ metadata: { name: 'a', namespace: 'ns', uid: 'u1' }, spec: { clusterIP: '10.96.0.1', ports: [{ port: 80 }] } }));
    const { head, entries } = t.snapshot();
    writeResume(d, { ...want, ...cursor, tracker: head }, entries, 1_000);
    expect(readFileSync(join(d, RESUME_FILE), 'utf8').split('\n').map((l) => l.slice(0, 12))).toEqual(['{"format":2,', '["service","', '["uid","ns/a', '']);
    const taken = takeResume(d, want, 2_000);
    if (taken === null || !('record' in taken)) throw new Error(`not taken: ${JSON.stringify(taken)}`);
    expect(taken.record.head.informers).toEqual(cursor.informers);
    expect(taken.record.head.tracker.node?.name).toBe('n1');
    expect([...taken.record.entries()].map((e) => e[0])).toEqual(['service', 'uid']);
    expect(existsSync(join(d, RESUME_FILE))).toBe(false);
    expect(takeResume(d, want, 2_000)).toBeNull();
  });

  it('is restored into a tracker only by the tracker build that wrote it', async () => {
    const d = dir();
    const t = new ChangeTracker('n1');
    t.onService('ns/a', serviceSchema.parse({ metadata: { name: 'a', namespace: 'ns', uid: 'u1' }, spec: { clusterIP: '10.96.0.1', ports: [{ port: 80 }] } }));
    const { head, entries } = t.snapshot();
    writeResume(d, { ...want, ...cursor, tracker: head }, entries, 1_000);
    const same = takeResume(d, want, 2_000);
    if (same === null || !('record' in same)) throw new Error('not taken');
    const into = new ChangeTracker('n1');
    await restoreTracker(into, same.record);
    expect(into.snapshot().head).toEqual(head);
    writeResume(d, { ...want, ...cursor, tracker: { ...head, build: 'chunk-OLD.js' } }, t.snapshot().entries, 1_000);
    const other = takeResume(d, want, 2_000);
    if (other === null || !('record' in other)) throw new Error('not taken');
    await expect(restoreTracker(new ChangeTracker('n1'), other.record)).rejects.toThrow(/another build \(chunk-OLD.js\)/);
  });

  it.each([
    ['another build', { build: 'kubernetes-XYZ.js' }, 0, /another build/],
    ['another node', { nodeName: 'n2' }, 0, /node n2/],
    ['too old', {}, RESUME_MAX_AGE_MS + 1, /written 600 s ago/],
    ['from the future', {}, -5_000, /written -5 s ago/],
  ])('is not used when written by %s', (_n, patch, age, reason) => {
    const d = dir();
    const { head, entries } = new ChangeTracker('n1').snapshot();
    writeResume(d, { ...want, ...cursor, ...patch, tracker: head }, entries, 1_000_000);
    const taken = takeResume(d, want, 1_000_000 + age);
    expect(taken !== null && 'rejected' in taken && taken.rejected).toMatch(reason);
    expect(existsSync(join(d, RESUME_FILE))).toBe(false);
  });

  it('a file that is not a record (cut short, foreign) is not used', () => {
    const d = dir();
    writeFileSync(join(d, RESUME_FILE), '{"format":2,"build":"kubernetes-ABC');
    expect(takeResume(d, want)).toEqual({ rejected: 'not a resume record of this format' });
    writeFileSync(join(d, RESUME_FILE), '{"format":7}');
    expect(takeResume(d, want)).toEqual({ rejected: 'not a resume record of this format' });
  });

  it('is written whole or not at all (a temporary file renamed into place)', () => {
    const d = dir();
    const { head } = new ChangeTracker('n1').snapshot();
    function* failing(): Generator<never> {
      throw new Error('cut short');
    }
    writeResume(d, { ...want, ...cursor, tracker: head }, failing());
    expect(readdirSync(d)).toEqual([]);
  });
});
