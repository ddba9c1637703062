// What the daemon loads before its first API request (issue 9: spawn → first list request): the
// static import graphs of the entry point, the API source and the text logger, as the compiler
// emits them (imports used only as types are dropped), must not reach zod, pino or js-yaml. zod
// loads once the first list answers (kubernetes.ts), pino only for JSON logs (log-json.ts),
// js-yaml only for a text the block-YAML reader declines (yaml.ts).
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import ts from 'typescript';
import { describe, expect, it } from 'vitest';

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

  it('zod comes with the validation (imported when the first list answers), pino with JSON logs', () => {
    expect(packagesReached('source/validate.ts').has('zod')).toBe(true);
    expect(packagesReached('log-json.ts').has('pino')).toBe(true);
  });
});
