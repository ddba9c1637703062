// The code cache's loader (src/code-cache.ts), in child processes: it replaces node's compile for
// the files of one directory, which this process must keep.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

const LOADER = new URL('../../dist/src/code-cache.js', import.meta.url).href;

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'kip-code-cache-'));
  writeFileSync(join(dir, 'a.js'), "'use strict';\nexports.twice = (x) => x * 2;\n");
  writeFileSync(join(dir, 'b.js'), "'use strict';\nconst a = require('./a.js');\nconst c = require('./c.js');\nexports.run = async () => [a.twice(21), await c.imported(), typeof require.resolve, __dirname];\n");
  // node's: a script compiled by vm with a cache has no import() in node 20.
  writeFileSync(join(dir, 'c.js'), "'use strict';\nexports.imported = () => import('node:path').then((m) => typeof m.join);\n");
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** Requires b.js (and so a.js) with the loader installed on `dir`; what it installed, counted and computed. */
function load({ train = false, node = [] as string[] } = {}): { installed: boolean; stats: unknown; result: unknown[] } {
  const script = `
    import { createRequire } from 'node:module';
    import { codeCacheStats, useCodeCache } from ${JSON.stringify(LOADER)};
    const installed = useCodeCache(${JSON.stringify(dir)}, ${train});
    const result = await createRequire(${JSON.stringify(join(dir, 'x.js'))})('./b.js').run();
    process.stdout.write(JSON.stringify({ installed, stats: codeCacheStats(), result }));`;
  const r = spawnSync(process.execPath, [...node, '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as { installed: boolean; stats: unknown; result: unknown[] };
}

describe('code cache loader', () => {
  it('training writes a cache per file at exit; the next process compiles the files with them, and they behave the same; a file with import() is left to node', () => {
    const trained = load({ train: true });
    expect(trained).toEqual({ installed: true, stats: { used: 0, refused: 0 }, result: [42, 'function', 'function', dir] });
    expect([existsSync(join(dir, 'a.js.cache')), existsSync(join(dir, 'b.js.cache')), existsSync(join(dir, 'c.js.cache'))]).toEqual([true, true, false]);
    expect(load()).toEqual({ installed: true, stats: { used: 2, refused: 0 }, result: [42, 'function', 'function', dir] });
  });

  it('a file edited after its cache was made (same length: V8 alone would take the cache) is compiled from its text', () => {
    load({ train: true });
    const a = join(dir, 'a.js');
    writeFileSync(a, readFileSync(a, 'utf8').replace('x * 2', 'x * 3'));
    const later = new Date(Date.now() + 5_000);
    utimesSync(a, later, later);
    expect(load()).toEqual({ installed: true, stats: { used: 1, refused: 1 }, result: [63, 'function', 'function', dir] });
  });

  it('a cache V8 refuses (made under other V8 flags) leaves the file compiled as usual', () => {
    load({ train: true });
    expect(load({ node: ['--max-lazy'] })).toEqual({ installed: true, stats: { used: 0, refused: 2 }, result: [42, 'function', 'function', dir] });
  });

  it('without caches node compiles as usual; with source maps on the loader stays out', () => {
    expect(load()).toEqual({ installed: true, stats: { used: 0, refused: 0 }, result: [42, 'function', 'function', dir] });
    expect(load({ node: ['--enable-source-maps'] })).toEqual({ installed: false, stats: null, result: [42, 'function', 'function', dir] });
  });
});
