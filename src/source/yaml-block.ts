// A reader for the block YAML that kubectl, Helm and the `yaml` package write: block mappings and
// sequences, one-line plain and quoted scalars, `[]` and `{}`, comments. It builds exactly what
// js-yaml's load (core schema) builds from the same text, faster (docs/decisions.md), and returns
// UNSUPPORTED for anything else (flow collections, block scalars, multi-line scalars, escapes,
// anchors, aliases, tags, tabs, CR, complex keys, duplicate keys, errors): the caller then reads
// the document with js-yaml, which also names the line and column of an error.
//
// Unread fields (`skip`: key → the empty value it gets) are not read at all: a plain key at the
// start of a line whose name is in `skip` gets the empty value and its block (deeper lines, `- `
// entries at its indentation, blank and comment lines) is passed over, exactly the lines
// manifest-parse.ts's stripUnread blanks, and under the same rule: from the first line whose
// brackets do not balance, nothing more is skipped.
//
// It does not import js-yaml: plain scalars are resolved by yaml-scalar.ts, js-yaml's
// core-schema rules written out.
import { cachedText, plainKey, plainValue } from './yaml-scalar.js';

/** The text needs js-yaml. */
export const UNSUPPORTED: unique symbol = Symbol('unsupported');

/** Deepest nesting read here (js-yaml's limit, 128 in manifest-parse.ts, is checked by js-yaml). */
const MAX_DEPTH = 100;
/** Longest key read here. */
const MAX_KEY = 1024;

// js-yaml's non-printable characters, tab, CR, BOM, NEL and surrogates (any character beyond
// U+FFFF): left to js-yaml. One character class: a fast test.
// eslint-disable-next-line no-control-regex
const REFUSED = /[\x00-\x09\x0B-\x1F\x7F-\x9F\uD800-\uDFFF\uFEFF\uFFFE\uFFFF]/;

const NL = 0x0a;
const SPACE = 0x20;
const HASH = 0x23;
const COLON = 0x3a;

/** Thrown inside the reader when the text needs js-yaml. */
const BAIL = new Error('unsupported');

/** One document's text (an optional leading `---` line, no other markers) → its value, or UNSUPPORTED. */
export function readBlockYaml(text: string, skip: ReadonlyMap<string, () => unknown>): unknown {
  if (REFUSED.test(text)) return UNSUPPORTED;
  const r = new Reader(text, skip);
  try {
    let marker = false;
    if (text.startsWith('---')) {
      marker = true;
      const c = text.charCodeAt(3);
      if (text.length > 3 && c !== NL && c !== SPACE) return UNSUPPORTED;
      r.endLine(3);
    }
    const indent = r.nextContent();
    // A bare `---` is an empty document (null); comments alone are left to js-yaml (null or undefined).
    if (indent === -1) return marker && !/\S/.test(text.slice(3)) ? null : UNSUPPORTED;
    if (indent !== 0) return UNSUPPORTED;
    const value = r.node(0, 0);
    return r.nextContent() === -1 ? value : UNSUPPORTED;
  } catch (err) {
    if (err === BAIL) return UNSUPPORTED;
    throw err;
  }
}

class Reader {
  /** The start of the current line. */
  pos = 0;
  /** Where the last skipped block ended (the bracket balance is checked from there). */
  #skippedTo = 0;
  #unbalanced = false;
  /** The offset of the first bracket at or after #skippedTo when last searched; -1: none left, -2: not searched. */
  #bracket = -2;
  /** Set by #key: the offset after the key's colon, and whether the key was a plain scalar. */
  #keyAfter = 0;
  #keyPlain = false;
  /** Set by #quoted: the offset after the closing quote. */
  #quotedEnd = 0;

  constructor(
    readonly s: string,
    readonly skip: ReadonlyMap<string, () => unknown>,
  ) {}

  /** Moves to the next line that is not blank or a comment; its indentation, -1 at the end. */
  nextContent(): number {
    const s = this.s;
    let p = this.pos;
    while (p < s.length) {
      let i = p;
      while (s.charCodeAt(i) === SPACE) i++;
      const c = s.charCodeAt(i);
      if (i < s.length && c !== NL && c !== HASH) {
        this.pos = p;
        if (i === p && (c === 0x2d || c === 0x2e) && isMarker(s, p)) throw BAIL; // `---` or `...` inside
        return i - p;
      }
      const nl = s.indexOf('\n', i);
      if (nl === -1) break;
      p = nl + 1;
    }
    this.pos = s.length;
    return -1;
  }

  /** After a value at `q`: only spaces and a comment may follow; moves to the next line. */
  endLine(q: number): void {
    const s = this.s;
    while (s.charCodeAt(q) === SPACE) q++;
    if (q < s.length && s.charCodeAt(q) !== NL && (s.charCodeAt(q) !== HASH || s.charCodeAt(q - 1) !== SPACE)) throw BAIL;
    const nl = s.indexOf('\n', q);
    this.pos = nl === -1 ? s.length : nl + 1;
  }

  /** The block node whose first line is the current one, indented by `indent`. */
  node(indent: number, depth: number): unknown {
    if (depth > MAX_DEPTH) throw BAIL;
    const p = this.pos + indent;
    return this.#isEntry(p) ? this.#sequence(indent, depth) : this.#mapping(indent, p, true, depth);
  }

  /** `- ` (or `-` at the end of a line) at p. */
  #isEntry(p: number): boolean {
    const s = this.s;
    if (s.charCodeAt(p) !== 0x2d) return false;
    const c = s.charCodeAt(p + 1);
    return p + 1 >= s.length || c === SPACE || c === NL;
  }

  #sequence(indent: number, depth: number): unknown[] {
    const s = this.s;
    const out: unknown[] = [];
    for (;;) {
      let q = this.pos + indent + 1;
      while (s.charCodeAt(q) === SPACE) q++;
      const c = s.charCodeAt(q);
      // `- # comment`: js-yaml's reading differs when the sequence ends right after it (the next
      // entry, less indented, joins this sequence): left to js-yaml.
      if (c === HASH) throw BAIL;
      if (q >= s.length || c === NL) {
        this.endLine(q);
        out.push(this.#blockValue(indent, depth, false));
      } else if (this.#isEntry(q)) {
        throw BAIL; // `- - x`
      } else if (this.#key(q) !== undefined) {
        out.push(this.#mapping(q - this.pos, q, false, depth + 1));
      } else {
        out.push(this.#inline(q));
      }
      const next = this.nextContent();
      if (next < indent) return out;
      if (next > indent) throw BAIL;
      if (!this.#isEntry(this.pos + indent)) return out; // a compact sequence ends: the mapping goes on
    }
  }

  /** A mapping whose first key is at p (at the start of its line, or after `- `), its keys at `indent`. */
  #mapping(indent: number, p: number, atLineStart: boolean, depth: number): Record<string, unknown> {
    if (depth > MAX_DEPTH) throw BAIL;
    const out: Record<string, unknown> = {};
    for (;;) {
      const name = this.#key(p);
      if (name === undefined || name === '__proto__' || Object.hasOwn(out, name)) throw BAIL;
      const after = this.#keyAfter;
      // As stripUnread's pattern: the name itself, the colon right after it.
      const empty = atLineStart && this.#keyPlain && after - 1 - p === name.length ? this.skip.get(name) : undefined;
      if (empty && this.#skippable()) {
        out[name] = empty();
        this.#skipBlock(indent);
      } else {
        let q = after;
        while (this.s.charCodeAt(q) === SPACE) q++;
        const c = this.s.charCodeAt(q);
        if (q >= this.s.length || c === NL || c === HASH) {
          this.endLine(q);
          out[name] = this.#blockValue(indent, depth, true);
        } else {
          out[name] = this.#inline(q);
        }
      }
      const next = this.nextContent();
      if (next < indent) return out;
      if (next > indent) throw BAIL;
      p = this.pos + indent;
      if (this.#isEntry(p)) return out; // not a key: the caller decides
      atLineStart = true;
    }
  }

  /**
   * The value of a key or entry with nothing after it on its line: a deeper block, a compact
   * sequence at the key's own indentation (`compact`), or null.
   */
  #blockValue(indent: number, depth: number, compact: boolean): unknown {
    const next = this.nextContent();
    if (next > indent) return this.node(next, depth + 1);
    if (compact && next === indent && this.#isEntry(this.pos + indent)) return this.#sequence(indent, depth + 1);
    return null;
  }

  /** A scalar, `[]` or `{}` at q, alone on the rest of its line. */
  #inline(q: number): unknown {
    const s = this.s;
    const c = s.charCodeAt(q);
    let value: unknown;
    let end: number;
    if (c === 0x22 /* " */ || c === 0x27 /* ' */) {
      value = this.#quoted(q);
      end = this.#quotedEnd;
    } else if ((c === 0x5b /* [ */ && s.charCodeAt(q + 1) === 0x5d) || (c === 0x7b /* { */ && s.charCodeAt(q + 1) === 0x7d)) {
      value = c === 0x5b ? [] : {};
      end = q + 2;
    } else {
      if (!plainStart(s, q)) throw BAIL;
      end = q;
      for (let i = q; i < s.length; i++) {
        const ch = s.charCodeAt(i);
        if (ch === NL || (ch === HASH && s.charCodeAt(i - 1) === SPACE)) break;
        if (ch === COLON && isBreak(s, i + 1)) throw BAIL; // `a: b: c`
        if (ch !== SPACE) end = i + 1;
      }
      value = plainValue(s, q, end);
    }
    this.endLine(end);
    return value;
  }

  /** A one-line quoted scalar at q (no escapes in double quotes): its text; #quotedEnd is the offset after it. */
  #quoted(q: number): string {
    const s = this.s;
    const quote = s[q]!;
    const nl = s.indexOf('\n', q);
    const eol = nl === -1 ? s.length : nl;
    if (quote === '"') {
      for (let i = q + 1; i < eol; i++) {
        const c = s.charCodeAt(i);
        if (c === 0x22) {
          this.#quotedEnd = i + 1;
          return cachedText(s, q + 1, i);
        }
        if (c === 0x5c /* backslash */) throw BAIL;
      }
      throw BAIL;
    }
    let text = '';
    for (let from = q + 1; ; ) {
      const close = s.indexOf("'", from);
      if (close === -1 || close > eol) throw BAIL;
      text += s.slice(from, close);
      if (s.charCodeAt(close + 1) !== 0x27) {
        this.#quotedEnd = close + 1;
        return text;
      }
      text += "'";
      from = close + 2;
    }
  }

  /**
   * The key at p, when the line holds `key:` there: its name (undefined when there is none);
   * #keyAfter is the offset after the colon, #keyPlain whether the key was a plain scalar.
   */
  #key(p: number): string | undefined {
    const s = this.s;
    const c = s.charCodeAt(p);
    if (c === 0x22 || c === 0x27) {
      let name: string;
      try {
        name = this.#quoted(p);
      } catch {
        return undefined;
      }
      let q = this.#quotedEnd;
      while (s.charCodeAt(q) === SPACE) q++;
      if (s.charCodeAt(q) !== COLON || !isBreak(s, q + 1)) return undefined;
      this.#keyAfter = q + 1;
      this.#keyPlain = false;
      return name;
    }
    if (!plainStart(s, p)) return undefined;
    for (let i = p; i < s.length && i - p <= MAX_KEY; i++) {
      const ch = s.charCodeAt(i);
      if (ch === NL || (ch === HASH && s.charCodeAt(i - 1) === SPACE)) return undefined;
      if (ch === 0x5b || ch === 0x5d || ch === 0x7b || ch === 0x7d || ch === 0x2c) throw BAIL; // [ ] { } ,
      if (ch === COLON && isBreak(s, i + 1)) {
        let end = i;
        while (s.charCodeAt(end - 1) === SPACE) end--;
        this.#keyAfter = i + 1;
        this.#keyPlain = true;
        return plainKey(s, p, end);
      }
    }
    throw BAIL;
  }

  /**
   * stripUnread's rule: no skipping once a line before this one has unbalanced brackets. The
   * lines are checked from the first bracket after the last skipped block (most text between
   * unread fields has none), found by a regex and searched again only once passed.
   */
  #skippable(): boolean {
    if (this.#unbalanced) return false;
    if (this.#bracket === -2 || (this.#bracket >= 0 && this.#bracket < this.#skippedTo)) {
      BRACKET.lastIndex = this.#skippedTo;
      this.#bracket = BRACKET.exec(this.s)?.index ?? -1;
    }
    if (this.#bracket >= 0 && this.#bracket < this.pos && !balanced(this.s, this.#bracket, this.pos)) this.#unbalanced = true;
    return !this.#unbalanced;
  }

  /** Passes over the key's line at `pos` and its block (see blockEnd). */
  #skipBlock(indent: number): void {
    const end = blockEnd(this.s, this.pos, indent);
    this.#skippedTo = end;
    this.pos = end >= this.s.length ? this.s.length : end + 1;
  }
}

/** The brackets balanced() counts. */
const BRACKET = /[[\]{}]/g;

/** True when every line in s[from, to) has as many closing brackets as opening ones. */
export function balanced(s: string, from: number, to: number): boolean {
  let depth = 0;
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x5b || c === 0x7b) depth++;
    else if (c === 0x5d || c === 0x7d) depth--;
    else if (c === NL && depth !== 0) return false;
  }
  return depth === 0;
}

/**
 * The end (the offset of its last line break, or the text's end) of the block of the key whose
 * line starts at `lineStart` with `indent` spaces: the key's line, then every line indented
 * deeper, every `- ` entry at the key's indentation, and blank and comment lines between.
 */
export function blockEnd(s: string, lineStart: number, indent: number): number {
  let end = s.indexOf('\n', lineStart);
  if (end === -1) return s.length;
  while (end < s.length) {
    let i = end + 1;
    while (s.charCodeAt(i) === SPACE) i++;
    const c = s.charCodeAt(i);
    const blank = i >= s.length || c === NL || c === 0x0d || c === HASH;
    const after = s.charCodeAt(i + 1);
    const entry = i - end - 1 === indent && c === 0x2d && (after === SPACE || after === 0x09 || after === NL || after === 0x0d || i + 1 >= s.length);
    if (!blank && i - end - 1 <= indent && !entry) break;
    const next = s.indexOf('\n', i);
    end = next === -1 ? s.length : next;
  }
  return end;
}

/** A plain scalar may start at p (not an indicator; `-`, `?` and `:` only before a non-space). */
function plainStart(s: string, p: number): boolean {
  const c = s.charCodeAt(p);
  if (p >= s.length || c === SPACE || c === NL || c === COLON) return false;
  if ('[]{},#&*!|>\'"%@`'.includes(s[p]!)) return false;
  return !((c === 0x2d || c === 0x3f) && isBreak(s, p + 1));
}

/** A document marker (`---` or `...` then a space or the line's end) at p. */
function isMarker(s: string, p: number): boolean {
  const c = s.charCodeAt(p);
  return s.charCodeAt(p + 1) === c && s.charCodeAt(p + 2) === c && isBreak(s, p + 3);
}

/** The end of the text, a space or a line break at i. */
function isBreak(s: string, i: number): boolean {
  return i >= s.length || s.charCodeAt(i) === SPACE || s.charCodeAt(i) === NL;
}
