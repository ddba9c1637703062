// One --manifests file: YAML (multi-document) or JSON text → validated Services, EndpointSlices
// and Nodes, each with its location, plus an ObjectError for everything rejected.
// Locations: `<file>#<doc>` where doc is the 0-based index of the document in the stream
// (empty documents count); objects inside a `kind: List` carry `items[i]` in their field paths.
import { parseAllDocuments } from 'yaml';

import { objectKey } from '../model/k8s.js';
import type { EndpointSlice, Node, Service } from '../model/k8s.js';
import type { ObjectError } from '../model/service.js';
import { formatPath, isSourceKind, validate, type SourceKind } from './validate.js';

/** A validated object and where it came from. */
export interface ManifestObject {
  kind: SourceKind;
  /** objectKey: `namespace/name` (Node: `name`). */
  key: string;
  object: Service | EndpointSlice | Node;
  file: string;
  doc: number;
  /** Index within a `kind: List`, -1 for a top-level object. */
  item: number;
}

/** What one file yields. */
export interface ParsedManifest {
  objects: ManifestObject[];
  errors: ObjectError[];
  /** The YAML is broken or an object failed validation (unknown kinds do not count). */
  failed: boolean;
}

/** Parses and validates one file's text; `file` is used only to name locations. */
export function parseManifest(file: string, text: string): ParsedManifest {
  const out: ParsedManifest = { objects: [], errors: [], failed: false };
  const docs = parseAllDocuments(text);
  const broken = (Array.isArray(docs) ? docs : []).flatMap((d) => d.errors);
  if (broken.length > 0) {
    // NOTE: yaml's messages end with "at line L, column C:" and a code excerpt; keep the first line.
    const first = broken[0]!.message.split('\n')[0]!.replace(/:$/, '');
    const more = broken.length > 1 ? ` (and ${broken.length - 1} more)` : '';
    out.errors.push({ object: file, reason: `invalid YAML: ${first}${more}` });
    out.failed = true;
    return out;
  }
  (Array.isArray(docs) ? docs : []).forEach((d, doc) => {
    const value: unknown = d.toJS();
    if (value === null || value === undefined) return;
    if (isRecord(value) && value.kind === 'List' && Array.isArray(value.items)) {
      value.items.forEach((raw: unknown, item) => addObject(out, file, doc, item, raw));
    } else {
      addObject(out, file, doc, -1, value);
    }
  });
  return out;
}

function addObject(out: ParsedManifest, file: string, doc: number, item: number, raw: unknown): void {
  const base: PropertyKey[] = item >= 0 ? ['items', item] : [];
  const fail = (what: string, reason: string, fatal = true): void => {
    out.errors.push({ object: `${file}#${doc}${what}`, reason });
    if (fatal) out.failed = true;
  };
  if (!isRecord(raw)) return fail('', `${formatPath(base) || '(document)'}: expected an object, got ${describe(raw)}`);
  const kind = raw.kind;
  if (typeof kind !== 'string' || kind === '') return fail(prefixed(rawName(raw)), `${formatPath([...base, 'kind'])}: missing`);
  const where = prefixed(`${kind} ${rawName(raw, kind !== 'Node')}`.trimEnd());
  if (!isSourceKind(kind)) {
    return fail(where, `${formatPath([...base, 'kind'])}: unsupported kind ${String(raw.apiVersion ?? '?')}/${kind}; skipped`, false);
  }
  const result = validate(kind, raw, base);
  if (!result.ok) return fail(where, result.reason);
  out.objects.push({ kind, key: objectKey(result.value), object: result.value, file, doc, item });
}

/** `ns/name` (or `name`) from raw metadata when present, else ''. */
function rawName(raw: Record<string, unknown>, namespaced = true): string {
  const md = isRecord(raw.metadata) ? raw.metadata : {};
  if (typeof md.name !== 'string') return '';
  if (!namespaced) return md.name;
  return `${typeof md.namespace === 'string' && md.namespace ? md.namespace : 'default'}/${md.name}`;
}

function prefixed(s: string): string {
  return s ? ` ${s}` : '';
}

function describe(v: unknown): string {
  return Array.isArray(v) ? 'a list' : typeof v;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
