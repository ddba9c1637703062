// What the daemon loads before its first API request (issue 9: spawn → first list request): the
// static import graphs of the entry point, the API source and the text logger, as the compiler
// emits them (imports used only as types are dropped), must not reach zod, pino or js-yaml. No
// module imports zod at all: zod.ts requires it the first time a schema is used (an object or a
// kernel value the hand-written checks do not pass); pino loads only for JSON logs
// (log-json.ts), js-yaml only for a text the block-YAML reader declines (yaml.ts).
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import ts from 'typescript';
import { describe, expect, it } from 'vitest';

import { makeNode, makeService, makeSlice } from '../../bench/objects.mjs';
import { validate } from '../../src/source/validate.js';
import { zodLoaded } from '../../src/zod.js';

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../../src');

/** The specifiers of a source file's static imports and re-exports, after TypeScript's elision. */
function staticImports(file: string): string[] {
  const js = ts.transpileModule(readFileSync(file, 'utf8'), { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText;
  return [...js.matchAll(/^(?:import|export)\b[^;]*?\bfrom\s+['"]([^'"]+)['"]|^import\s+['"]([^'"]+)['"]/gm)].map((m) => (m[1] ?? m[2])!);
}

/** The packages (bare specifiers, `node:` ones left out) reachable from `entries` by static imports. */
function packagesReached(...entries: string[]): Set<string> {
  const seen = new Set<string>();
  const packages = new Set<string>();
  const visit = (file: string): void => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const spec of staticImports(file)) {
      if (spec.startsWith('.')) visit(join(dirname(file), spec.replace(/\.js$/, '.ts')));
      else if (!spec.startsWith('node:')) packages.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!);
    }
  };
  for (const e of entries) visit(join(SRC, e));
  return packages;
}

describe('modules loaded before the first API request', () => {
  it('the entry point, the API source and the text logger import neither zod nor pino nor js-yaml', () => {
    const before = packagesReached('cli.ts', 'log.ts', 'source/start.ts', 'source/kubernetes.ts');
    expect(before.has('zod')).toBe(false);
    expect(before.has('pino')).toBe(false);
    // Kubeconfig and --config files are YAML: read by the block reader, js-yaml only when it declines (yaml.ts).
    expect(before.has('js-yaml')).toBe(false);
    expect(packagesReached('source/manifest-parse.ts').has('js-yaml')).toBe(false);
  });

  it('the API source comes with start.ts in one round of the module loader, not one import() after another', () => {
    // start.ts's import() of kubernetes.js was a second loader round before the first list request.
    const imports = staticImports(join(SRC, 'source/start.ts'));
    expect(imports).toContain('./kubernetes.js');
    expect(imports).toContain('./resume.js');
    expect(readFileSync(join(SRC, 'source/start.ts'), 'utf8')).not.toMatch(/import\(['"]\.\/(kubernetes|resume)\.js['"]\)/);
  });

  it('no module imports zod (zod.ts loads it on first use), pino comes with JSON logs', () => {
    const sources = (dir: string): string[] =>
      readdirSync(join(SRC, dir), { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
    const importers = sources('.').filter((f) => staticImports(join(SRC, f)).includes('zod'));
    expect(importers).toEqual([]);
    expect(packagesReached('log-json.ts').has('pino')).toBe(true);
  });

  it('validating plain Services, EndpointSlices and Nodes loads no zod; the first object it must judge does', () => {
    for (const [kind, raw] of [['Service', makeService(1)], ['EndpointSlice', makeSlice(1, 3)], ['Node', makeNode()]] as const) {
      expect(validate(kind, JSON.parse(JSON.stringify(raw))).ok).toBe(true);
    }
    expect(zodLoaded()).toBe(false);
    expect(validate('Node', { metadata: { name: 'n1' }, status: { addresses: [{ type: 'InternalIP', address: 7 }] } })).toEqual({ ok: false, reason: 'status.addresses[0].address: expected string, received number' });
    expect(zodLoaded()).toBe(true);
  });
});
