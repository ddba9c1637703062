// One --manifests file: YAML (multi-document) or JSON text → validated Services, EndpointSlices
// and Nodes, each with its location, plus an ObjectError for everything rejected.
// Locations: `<file>#<doc>` where doc is the 0-based index of the document in the stream
// (empty documents count); objects inside a `kind: List` carry `items[i]` in their field paths.
//
// Parsing: JSON text goes to JSON.parse; YAML is split at its `---` lines (in YAML 1.2 such a line
// always starts a document; the split is made on the bytes, each document decoded alone), so a
// broken document fails alone. Each document is read by the fast block-YAML reader
// (yaml-block.ts), which builds exactly what js-yaml would and declines anything else; what it
// declines is read by js-yaml (core schema: no timestamps, no merge keys, no custom tags), which
// names line and column of an error. Hostile input is bounded: nesting deeper than MAX_DEPTH and
// alias expansion beyond MAX_EXPANSION (alias bombs, self-references) are a document's error;
// nothing this module calls may throw out of parseManifest.
// Fields no proxy reads and that make up most of a real manifest (metadata.managedFields and
// ownerReferences, endpoints' targetRef, the last-applied annotation) are not read: the fast
// reader passes over them, and for js-yaml they are blanked in the text (lines kept, so positions
// in errors stay right); a document that then fails is read again unchanged.
import { hash } from 'node:crypto';

import type { LoadOptions } from 'js-yaml';

import { objectKey } from '../model/k8s.js';
import type { EndpointSlice, Node, Service } from '../model/k8s.js';
import type { ObjectError } from '../model/service.js';
import { jsYaml, parseJson, yamlReason } from '../yaml.js';
import { quote } from './names.js';
import { formatPath, isSourceKind, validate, type SourceKind } from './validate.js';
import { balanced, blockEnd, readBlockYaml, UNSUPPORTED } from './yaml-block.js';

/** Deepest nesting of collections accepted in a YAML document. */
export const MAX_DEPTH = 128;
/** Nodes a YAML document may expand to through aliases, beyond twice its length in characters. */
export const MAX_EXPANSION = 100_000;
/** Errors reported per file; a file with more is not read further (its last good state stays). */
export const MAX_ERRORS = 100;

/** A validated object and where it came from. */
export interface ManifestObject {
  kind: SourceKind;
  /** objectKey: `namespace/name` (Node: `name`). */
  key: string;
  object: Service | EndpointSlice | Node;
  /**
   * A digest that changes when the object may have (the manifests source compares objects between
   * reads by it): of its document's bytes for a top-level object of a document read on its own
   * (no JSON of it made), else of its validated form as JSON (a `kind: List`'s items: one edited
   * item must not change the others'). Equal texts give equal objects; a document edited without
   * changing its object (a comment) gets a new digest.
   */
  sig: string;
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

/** js-yaml's options (js-yaml is loaded only when a text needs it). */
const options = (): LoadOptions => ({ schema: jsYaml().CORE_SCHEMA, maxDepth: MAX_DEPTH }) as LoadOptions;

/**
 * Parses and validates one file's content; `file` is used only to name locations. Never throws.
 * Bytes must be UTF-8 (the caller checks; a string is encoded as UTF-8). The YAML stream is split
 * into documents at the byte level and each document decoded on its own: no string of the whole
 * file is made (one would be a fresh large object of the file's size).
 */
export function parseManifest(file: string, input: string | Uint8Array): ParsedManifest {
  const out: Parsing = { objects: [], errors: [], failed: false };
  try {
    let buf = typeof input === 'string' ? Buffer.from(input, 'utf8') : Buffer.from(input.buffer, input.byteOffset, input.byteLength);
    if (buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf) buf = buf.subarray(3);
    const json = parseJsonFile(buf);
    if (json.ok) {
      addDocument(out, file, 0, json.value, buf);
      return finish(out, file);
    }
    if (!splittable(buf)) {
      // Directives or `...` markers: read the stream as a whole (a YAML error fails the file).
      const text = buf.toString('utf8');
      let docs: unknown[];
      try {
        docs = jsYaml().loadAll(text, null, options());
        if (text.includes('&')) docs.forEach((d) => checkExpansion(d, text.length));
      } catch (err) {
        return failFile(out, file, `invalid YAML: ${yamlError(err, 0)}`);
      }
      docs.every((value, doc) => (addDocument(out, file, doc, value), !out.stopped));
      return finish(out, file);
    }
    const lines = new LineCounter(buf);
    let doc = 0;
    for (const [start, end] of documents(buf)) {
      if (out.stopped) break;
      let value: unknown;
      try {
        value = loadDocument(buf.toString('utf8', start, end));
      } catch (err) {
        addError(out, { object: `${file}#${doc}`, reason: `invalid YAML: ${yamlError(err, lines.at(start))}` });
        doc++;
        continue;
      }
      addDocument(out, file, doc++, value, buf.subarray(start, end));
    }
  } catch (err) {
    // Not expected (every step above handles its own input); still the file's error, not ours.
    out.objects = [];
    return failFile(out, file, `cannot parse: ${(err as Error)?.message ?? String(err)}`);
  }
  return finish(out, file);
}

type Parsing = ParsedManifest & { stopped?: boolean };

/** Records an error; at MAX_ERRORS the file is not read further (stopped). */
function addError(out: Parsing, error: ObjectError): void {
  out.failed = true;
  if (out.errors.length < MAX_ERRORS) out.errors.push(error);
  else out.stopped = true;
}

function finish(out: Parsing, file: string): ParsedManifest {
  if (out.stopped) out.errors.push({ object: file, reason: `more than ${MAX_ERRORS} errors: the rest of the file was not read` });
  delete out.stopped;
  return out;
}

function loadDocument(text: string): unknown {
  const fast = readBlockYaml(text, UNREAD_VALUES);
  if (fast !== UNSUPPORTED) return fast;
  const stripped = stripUnread(text);
  if (stripped !== text) {
    try {
      const value = jsYaml().load(stripped, options());
      if (stripped.includes('&')) checkExpansion(value, stripped.length);
      return value;
    } catch {
      // e.g. an anchor defined in a blanked field: read the document as it is.
    }
  }
  const value = jsYaml().load(text, options());
  if (text.includes('&')) checkExpansion(value, text.length);
  return value;
}

/**
 * The fields no proxy reads, and the empty value each gets instead: the fast reader sets it,
 * stripUnread writes it as JSON (`[]`, `{}`, `""`), which js-yaml reads back the same.
 */
export const UNREAD_VALUES: ReadonlyMap<string, () => unknown> = new Map<string, () => unknown>([
  ['managedFields', () => []],
  ['ownerReferences', () => []],
  ['targetRef', () => ({})],
  ['kubectl.kubernetes.io/last-applied-configuration', () => ''],
]);
const UNREAD = new RegExp(`^( *)(${[...UNREAD_VALUES.keys()].map((k) => k.replace(/[./]/g, '\\$&')).join('|')}):(?=[ \\t\\r\\n]|$)`, 'gm');

/**
 * `text` with the block values of unread fields blanked: the key's line and every following line
 * indented deeper (or a `- ` entry at the key's indentation) become empty lines; the key stays,
 * with an empty value of its type (`[]`, `""`). Only in block context: blanking stops at the
 * first line whose brackets do not balance (a flow collection may span lines from there).
 * NOTE: a block scalar whose text has such a key line at its start is blanked too; only
 * values the proxy does not read could hold one.
 */
export function stripUnread(text: string): string {
  UNREAD.lastIndex = 0;
  if (!UNREAD.test(text)) return text;
  UNREAD.lastIndex = 0;
  const parts: string[] = [];
  let done = 0;
  for (let m = UNREAD.exec(text); m !== null; m = UNREAD.exec(text)) {
    if (m.index < done) continue;
    if (!balanced(text, done, m.index)) break;
    const end = blockEnd(text, m.index, m[1]!.length);
    const lines = countLines(text, m.index, end);
    parts.push(text.slice(done, m.index), `${m[0]} ${JSON.stringify(UNREAD_VALUES.get(m[2]!)!())}`, '\n'.repeat(lines));
    done = end;
    UNREAD.lastIndex = end;
  }
  parts.push(text.slice(done));
  return parts.join('');
}

function countLines(s: string, from: number, to: number): number {
  let n = 0;
  for (let i = s.indexOf('\n', from); i !== -1 && i < to; i = s.indexOf('\n', i + 1)) n++;
  return n;
}

function failFile(out: ParsedManifest, file: string, reason: string): ParsedManifest {
  addError(out, { object: file, reason });
  return finish(out, file);
}

/** parseJson of the file's text, decoded only when its first non-blank byte is `{` or `[`. */
function parseJsonFile(buf: Buffer): ReturnType<typeof parseJson> {
  let i = 0;
  while (i < buf.length && isSpace(buf[i]!)) i++;
  if (buf[i] !== 0x7b /* { */ && buf[i] !== 0x5b /* [ */) return { ok: false };
  return parseJson(buf.toString('utf8'));
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09 || c === 0x0b || c === 0x0c;
}

/** True when the three bytes at `at` are `c` and at a line's start, followed by white space or the end. */
function markerAt(buf: Buffer, at: number, c: number): boolean {
  if (buf[at] !== c || buf[at + 1] !== c || buf[at + 2] !== c || (at > 0 && buf[at - 1] !== 0x0a)) return false;
  const next = buf[at + 3];
  return next === undefined || next === 0x20 || next === 0x09 || next === 0x0d || next === 0x0a;
}

/** The offset of the next line starting with the marker `ccc` at or after `from`; -1 when none. */
function nextMarker(buf: Buffer, from: number, marker: string): number {
  if (from === 0 && markerAt(buf, 0, marker.charCodeAt(0))) return 0;
  for (let i = buf.indexOf(`\n${marker}`, Math.max(from - 1, 0)); i !== -1; i = buf.indexOf(`\n${marker}`, i + 1)) {
    if (markerAt(buf, i + 1, marker.charCodeAt(0))) return i + 1;
  }
  return -1;
}

/**
 * True when the stream can be split at its `---` lines: no directives, no `...` end markers, and
 * no line ending in a lone CR (a line break to YAML that the byte-level split does not look for).
 */
export function splittable(buf: Buffer): boolean {
  return buf[0] !== 0x25 /* % */ && buf.indexOf('\n%') === -1 && nextMarker(buf, 0, '...') === -1 && !loneCr(buf);
}

function loneCr(buf: Buffer): boolean {
  for (let i = buf.indexOf(0x0d); i !== -1; i = buf.indexOf(0x0d, i + 1)) if (buf[i + 1] !== 0x0a) return true;
  return false;
}

/** The [start, end) byte ranges of the documents of a splittable YAML stream (exported for tests). */
export function* documents(buf: Buffer): Generator<[number, number]> {
  let m = nextMarker(buf, 0, '---');
  if (m === -1) {
    if (buf.length > 0) yield [0, buf.length]; // one document (comments alone read as nothing)
    return;
  }
  // Content before the first `---` is a document; comments and blank lines alone are not.
  if (m > 0 && /^[ \t]*[^#\s]/m.test(buf.toString('utf8', 0, m))) yield [0, m];
  while (m !== -1) {
    const start = m;
    m = nextMarker(buf, start + 3, '---');
    yield [start, m === -1 ? buf.length : m];
  }
}

/** 0-based line numbers of byte offsets, asked in increasing order (only for error messages). */
export class LineCounter {
  #offset = 0;
  #line = 0;
  constructor(readonly buf: Buffer) {}

  at(offset: number): number {
    for (let i = this.buf.indexOf(0x0a, this.#offset); i !== -1 && i < offset; i = this.buf.indexOf(0x0a, i + 1)) this.#line++;
    this.#offset = offset;
    return this.#line;
  }
}

/** Throws when `value` expands (through aliases) to more nodes than its text can justify. */
function checkExpansion(value: unknown, length: number): void {
  let budget = 2 * length + MAX_EXPANSION;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (--budget < 0) throw new Error(`aliases expand to more than ${2 * length + MAX_EXPANSION} nodes (an alias bomb or a self-reference)`);
    if (typeof v !== 'object' || v === null) continue;
    for (const child of Array.isArray(v) ? v : Object.values(v)) if (typeof child === 'object' && child !== null) stack.push(child);
    budget -= Array.isArray(v) ? v.length : Object.keys(v).length;
  }
}

/** js-yaml's reason with the file's line and column (1-based); any other error's message. */
function yamlError(err: unknown, lineOffset: number): string {
  if (err instanceof RangeError) return `nesting too deep (${err.message})`;
  return yamlReason(err, lineOffset);
}

/** `bytes`: the document's own text, when it was read on its own (its digest is its objects' sig). */
function addDocument(out: Parsing, file: string, doc: number, value: unknown, bytes?: Uint8Array): void {
  if (value === null || value === undefined) return;
  if (isRecord(value) && value.kind === 'List' && Array.isArray(value.items)) {
    value.items.every((raw: unknown, item) => (addObject(out, file, doc, item, raw), !out.stopped));
  } else {
    addObject(out, file, doc, -1, value, bytes);
  }
}

/** A short digest of `data` (sha256: the fastest of node's hashes here, with the CPU's SHA instructions). */
export function digest(data: string | Uint8Array): string {
  return hash('sha256', data, 'base64');
}

function addObject(out: ParsedManifest, file: string, doc: number, item: number, raw: unknown, bytes?: Uint8Array): void {
  const base: PropertyKey[] = item >= 0 ? ['items', item] : [];
  const fail = (what: string, reason: string, fatal = true): void => {
    const failed = out.failed;
    addError(out, { object: `${file}#${doc}${what}`, reason });
    out.failed = failed || fatal;
  };
  if (!isRecord(raw)) return fail('', `${formatPath(base) || '(document)'}: expected an object, got ${describe(raw)}`);
  const kind = raw.kind;
  if (typeof kind !== 'string' || kind === '') return fail(prefixed(rawName(raw)), `${formatPath([...base, 'kind'])}: missing`);
  const where = prefixed(`${safe(kind)} ${rawName(raw, kind !== 'Node')}`.trimEnd());
  if (!isSourceKind(kind)) {
    const api = typeof raw.apiVersion === 'string' ? safe(raw.apiVersion) : '?';
    return fail(where, `${formatPath([...base, 'kind'])}: unsupported kind ${api}/${safe(kind)}; skipped`, false);
  }
  const result = validate(kind, raw, base);
  if (!result.ok) return fail(where, result.reason);
  const object = ownStrings(result.value);
  out.objects.push({ kind, key: objectKey(object), object, sig: bytes ? digest(bytes) : digest(JSON.stringify(object)), file, doc, item });
}

/**
 * `value` (a validated object: plain objects, arrays, strings, numbers, booleans) with strings of
 * its own. The readers return substrings of the document's text, and V8 may make a substring of
 * 13 characters or more a view of its parent (a sliced string) that keeps the whole document
 * alive as long as the proxy holds the string (a uid, an address): without this copy, 20,000
 * objects held 134 MiB instead of 43. `(s + ' ').slice(0, -1)` is a copy: the concatenation is
 * flattened into a new string and the result is a view of that one. This replaced a JSON round
 * trip, whose JSON.parse of 20,000 validated objects took 300–450 ms on a host; its objects are
 * smaller (34 MiB for those 20,000: exact-size shapes, its own string sharing), a cost taken for
 * the start-up time (the reader shares its short texts: yaml-block.ts's cachedText).
 */
function ownStrings<T>(value: T): T {
  if (typeof value === 'string') return (value.length < 13 ? value : (value + ' ').slice(0, -1)) as T;
  if (typeof value !== 'object' || value === null) return value;
  // A copy of an array: one grown by push() keeps its spare capacity (17 slots for one element).
  if (Array.isArray(value)) return value.map(ownStrings) as T;
  const copy: Record<string, unknown> = {};
  for (const k in value) {
    const v = (value as Record<string, unknown>)[k];
    if (v !== undefined) copy[k] = ownStrings(v);
  }
  return copy as T;
}

/** `ns/name` (or `name`) from raw metadata when present, else ''; quoted when not plain. */
function rawName(raw: Record<string, unknown>, namespaced = true): string {
  const md = isRecord(raw.metadata) ? raw.metadata : {};
  if (typeof md.name !== 'string') return '';
  if (!namespaced) return safe(md.name);
  return safe(`${typeof md.namespace === 'string' && md.namespace ? md.namespace : 'default'}/${md.name}`);
}

/** `s` as is when it is short and plain (names, kinds), else JSON-quoted and cut. */
function safe(s: string): string {
  return s.length <= 253 && /^[A-Za-z0-9_./-]*$/.test(s) ? s : quote(s);
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
