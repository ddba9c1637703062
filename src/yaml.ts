// One YAML document (a config file, a kubeconfig) → its value, without loading js-yaml when the
// block reader (source/yaml-block.ts) can read the text, which is what kubectl, kubeadm and Helm
// write. js-yaml is loaded the first time a text needs it (from node_modules, outside the bundle;
// --manifests uses the same copy).
import { createRequire } from 'node:module';

import type * as JsYaml from 'js-yaml';

import { readBlockYaml, UNSUPPORTED } from './source/yaml-block.js';

const require = createRequire(import.meta.url);
let loaded: typeof JsYaml | undefined;

/** js-yaml, loaded on the first call. */
export function jsYaml(): typeof JsYaml {
  return (loaded ??= require('js-yaml') as typeof JsYaml);
}

const NOTHING_UNREAD: ReadonlyMap<string, () => unknown> = new Map();

/** How loadYaml reads a text. */
export interface LoadYamlOptions {
  /** js-yaml's schema: core (default), or default (adds timestamps, merge keys and binary). */
  schema?: 'core' | 'default';
  /**
   * JSON text goes to JSON.parse first (as manifest-parse.ts takes a JSON file). Off where a
   * duplicated key must be an error (the config file, as kube-proxy's strict decoding): JSON.parse
   * keeps the last one; the block reader declines such a text and js-yaml refuses it.
   */
  json?: boolean;
}

/**
 * The document's value: JSON.parse's for JSON text (`json`), else the block reader's (js-yaml's
 * core schema, exactly), else js-yaml's `load` (the default schema's additions each need syntax
 * the block reader declines, except timestamps, which it leaves strings). A YAML error is
 * js-yaml's, naming `filename`, line and column.
 */
export function loadYaml(text: string, filename: string, { schema = 'core', json = false }: LoadYamlOptions = {}): unknown {
  if (json) {
    const parsed = parseJson(text);
    if (parsed.ok) return parsed.value;
  }
  const value = readBlockYaml(text, NOTHING_UNREAD);
  if (value !== UNSUPPORTED) return value;
  const y = jsYaml();
  return y.load(text, { filename, schema: schema === 'core' ? y.CORE_SCHEMA : y.DEFAULT_SCHEMA });
}

/** JSON text (`{` or `[` its first non-blank character) → JSON.parse's value; not ok for anything else. */
export function parseJson(text: string): { ok: true; value: unknown } | { ok: false } {
  const first = /\S/.exec(text)?.[0];
  if (first !== '{' && first !== '[') return { ok: false };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false }; // YAML flow syntax, or broken: js-yaml reads it or names line and column.
  }
}

/** js-yaml's reason with line (plus `lineOffset`) and column, 1-based; any other error's message. */
export function yamlReason(err: unknown, lineOffset = 0): string {
  // An error from js-yaml means it was loaded: the instanceof check never loads it.
  if (loaded === undefined || !(err instanceof loaded.YAMLException)) return (err as Error)?.message ?? String(err);
  const { reason, mark } = err as JsYaml.YAMLException & { reason: string; mark?: { line: number; column: number } };
  return mark ? `${reason} at line ${mark.line + 1 + lineOffset}, column ${mark.column + 1}` : reason;
}
