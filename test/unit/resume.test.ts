// The resume record's file (source/resume.ts): written whole, taken once, used only when it fits.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import { ChangeTracker } from '../../src/proxy/changetracker.js';
import { RESUME_FILE, RESUME_MAX_AGE_MS, takeResume, writeResume } from '../../src/source/resume.js';

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
    writeResume(d, { ...want, ...cursor, tracker: new ChangeTracker('n1').snapshot() }, 1_000);
    const taken = takeResume(d, want, 2_000);
    expect(taken !== null && 'record' in taken && taken.record.informers).toEqual(cursor.informers);
    expect(existsSync(join(d, RESUME_FILE))).toBe(false);
    expect(takeResume(d, want, 2_000)).toBeNull();
  });

  it.each([
    ['another build', { build: 'kubernetes-XYZ.js' }, 0, /another build/],
    ['another node', { nodeName: 'n2' }, 0, /node n2/],
    ['too old', {}, RESUME_MAX_AGE_MS + 1, /written 600 s ago/],
    ['from the future', {}, -5_000, /written -5 s ago/],
  ])('is not used when written by %s', (_n, patch, age, reason) => {
    const d = dir();
    writeResume(d, { ...want, ...cursor, ...patch, tracker: new ChangeTracker('n1').snapshot() }, 1_000_000);
    const taken = takeResume(d, want, 1_000_000 + age);
    expect(taken !== null && 'rejected' in taken && taken.rejected).toMatch(reason);
    expect(existsSync(join(d, RESUME_FILE))).toBe(false);
  });

  it('a file that is not a record (truncated, foreign) is not used', () => {
    const d = dir();
    writeFileSync(join(d, RESUME_FILE), '{"format":1,"build":"kubernetes-ABC');
    expect(takeResume(d, want)).toBeNull();
    writeFileSync(join(d, RESUME_FILE), '{"format":7}');
    expect(takeResume(d, want)).toEqual({ rejected: 'not a resume record of this format' });
  });
});
