// Files of the state directory (src/state-dir.ts): takeStateLines reads a taken file a block at a
// time, whatever the lengths of its lines.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import { takeStateLines, writeStateLines } from '../../src/state-dir.js';

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));
const dir = (): string => {
  const d = mkdtempSync(join(tmpdir(), 'kip-state-'));
  dirs.push(d);
  return d;
};

/** Every line of a taken file. */
function all(d: string, name: string): string[] | null {
  const lines = takeStateLines(d, name);
  if (lines === null) return null;
  const out: string[] = [];
  for (let l = lines.next(); l !== null; l = lines.next()) out.push(l);
  return out;
}

describe('takeStateLines', () => {
  it('removes the file as it is taken and reads it line by line through the open file', () => {
    const d = dir();
    writeStateLines(d, 'f', ['one', '', 'three']);
    const lines = takeStateLines(d, 'f')!;
    expect(existsSync(join(d, 'f'))).toBe(false);
    expect([lines.next(), lines.next(), lines.next(), lines.next(), lines.next()]).toEqual(['one', '', 'three', null, null]);
    expect(takeStateLines(d, 'f')).toBeNull();
  });

  it('reads lines across blocks, longer than a block, multi-byte characters split by a block, and a last line without a newline', () => {
    const d = dir();
    const lines = ['x'.repeat(700_000), ...Array.from({ length: 5_000 }, (_, i) => `{"i":${i},"s":"é€${'y'.repeat(i % 97)}"}`), 'z'.repeat(300_000)];
    writeFileSync(join(d, 'f'), `${lines.join('\n')}\nlast`);
    expect(all(d, 'f')).toEqual([...lines, 'last']);
  });

  it('reads nothing more once closed', () => {
    const d = dir();
    writeStateLines(d, 'f', ['a', 'b']);
    const lines = takeStateLines(d, 'f')!;
    expect(lines.next()).toBe('a');
    lines.close();
    lines.close();
    expect(lines.next()).toBeNull();
  });

  it('an empty file has no lines; a missing one is null', () => {
    const d = dir();
    writeFileSync(join(d, 'f'), '');
    expect(all(d, 'f')).toEqual([]);
    expect(all(d, 'missing')).toBeNull();
  });
});
