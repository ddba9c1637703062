// Dependencies are imported through their public entry points only: a package's private file
// (`prom-client/lib/…`, `@kubernetes/client-node/dist/…`) moves or becomes unreachable when a
// release adds or changes its `exports` map. A subpath is allowed when the package's exports lists it.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const DIRS = ['src', 'bench', 'test', 'examples'];
/** `from 'x'`, `import('x')`, `require('x')`, `createRequire(...)('x')`. */
const SPECIFIER = /(?:\bfrom\s+|\bimport\s*\(\s*|\brequire\s*\(\s*|\)\(\s*)(['"])([^'"\s]+)\1/g;

function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && /\.(ts|mts|mjs|js)$/.test(e.name) && !join(e.parentPath, e.name).includes('node_modules'))
    .map((e) => join(e.parentPath, e.name));
}

/** The package and its subpath (`./lib/x`), or null for a relative, absolute or built-in specifier. */
function split(spec: string): { pkg: string; sub: string } | null {
  if (/^(\.|\/|node:)/.test(spec) || !/^[@a-z]/.test(spec)) return null;
  const parts = spec.split('/');
  const n = spec.startsWith('@') ? 2 : 1;
  return parts.length > n ? { pkg: parts.slice(0, n).join('/'), sub: `./${parts.slice(n).join('/')}` } : null;
}

/** True when the package's exports map lists the subpath (exactly or by a `*` pattern). */
function exported(pkg: string, sub: string): boolean {
  let manifest: { exports?: unknown };
  try {
    manifest = JSON.parse(readFileSync(join(ROOT, 'node_modules', pkg, 'package.json'), 'utf8'));
  } catch {
    return false;
  }
  const exports = manifest.exports;
  if (typeof exports !== 'object' || exports === null || Array.isArray(exports)) return false;
  return Object.keys(exports).some((k) => {
    if (k === sub) return true;
    const star = k.indexOf('*');
    return star >= 0 && sub.startsWith(k.slice(0, star)) && sub.endsWith(k.slice(star + 1));
  });
}

describe('imports of dependencies', () => {
  it('no file reaches into a package past its exports map', () => {
    const deep: string[] = [];
    for (const file of DIRS.flatMap(sources)) {
      for (const m of readFileSync(file, 'utf8').matchAll(SPECIFIER)) {
        const s = split(m[2]!);
        if (s && !exported(s.pkg, s.sub)) deep.push(`${file.slice(ROOT.length + 1)}: ${m[2]} (not in ${s.pkg}'s exports)`);
      }
    }
    expect(deep).toEqual([]);
  });

  it('the check sees a private file', () => {
    expect(split('prom-client/lib/registry')).toEqual({ pkg: 'prom-client', sub: './lib/registry' });
    expect(exported('prom-client', './lib/registry')).toBe(false);
    expect(split('@kubernetes/client-node/dist/config.js')).toEqual({ pkg: '@kubernetes/client-node', sub: './dist/config.js' });
    expect(exported('vitest', './config')).toBe(true);
    expect(split('prom-client')).toBeNull();
  });
});
