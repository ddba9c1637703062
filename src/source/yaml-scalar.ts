// Plain scalars of the block-YAML reader (yaml-block.ts): their values under js-yaml's core
// schema (a test checks them against js-yaml's own types on random and hand-picked strings), and
// caches that share the short key and value strings Kubernetes objects repeat.

/**
 * Recent key names by length and first character: Kubernetes objects repeat a few dozen keys, and
 * a name found here is taken as it is (already internalized) instead of sliced from the text and
 * looked up in V8's string table (for each key of each object, most of the reader's time on them).
 */
const KEYS: string[] = new Array<string>(4096).fill('');

/** The name of the plain key s[p, end). */
export function plainKey(s: string, p: number, end: number): string {
  const slot = (((end - p) & 63) << 6) | (s.charCodeAt(p) & 63);
  const known = recent(KEYS, slot, s, p, end);
  if (known !== undefined) return known;
  const text = s.slice(p, end);
  const name = String(plainScalar(text));
  // The property key made of it: V8's internalized copy, which holds no slice of the text.
  if (name === text) KEYS[slot] = Object.keys({ [name]: 0 })[0]!;
  return name;
}

/**
 * Recent short scalar texts by length, first and last character: the values Kubernetes objects
 * repeat (namespaces, protocols, zones, node names, condition values) are one string each, as
 * JSON.parse makes them, instead of one copy per object the proxy holds.
 */
const TEXTS: string[] = new Array<string>(13 * 256).fill('');
/** Longest scalar text cached: V8 copies a substring this short (a longer one may be a view of the text). */
const MAX_CACHED = 12;

/** s[p, end) as a string, shared with an equal recent one when short. */
export function cachedText(s: string, p: number, end: number): string {
  const len = end - p;
  if (len > MAX_CACHED || len === 0) return s.slice(p, end);
  const slot = (len << 8) | ((s.charCodeAt(p) & 15) << 4) | (s.charCodeAt(end - 1) & 15); // < 13 × 256
  return recent(TEXTS, slot, s, p, end) ?? (TEXTS[slot] = s.slice(p, end));
}

/** The string in `cache[slot]` when it is the text s[p, end). */
function recent(cache: readonly string[], slot: number, s: string, p: number, end: number): string | undefined {
  const known = cache[slot]!;
  return known.length === end - p && s.startsWith(known, p) ? known : undefined;
}

/** The value of the plain scalar s[p, end). */
export function plainValue(s: string, p: number, end: number): unknown {
  if (!typedStart(s.charCodeAt(p))) return cachedText(s, p, end);
  const value = plainScalar(s.slice(p, end));
  return typeof value === 'string' ? cachedText(s, p, end) : value;
}

/**
 * A plain scalar's value under js-yaml's core schema, whose implicit types are tried in its order:
 * null (`~`, `null`), bool (`true`, `false`), int (decimal, `0b`, `0o`, `0x`, optional sign; no
 * `_`), float (decimal with `.` and/or exponent, `.inf`, `.nan`); else the text itself.
 */
export function plainScalar(text: string): unknown {
  const c = text.charCodeAt(0);
  if (!typedStart(c)) return text;
  switch (text) {
    case '~': case 'null': case 'Null': case 'NULL':
      return null;
    case 'true': case 'True': case 'TRUE':
      return true;
    case 'false': case 'False': case 'FALSE':
      return false;
  }
  // An int or a float starts with a sign, a digit or a dot.
  if (!(c === 0x2b || c === 0x2d || c === 0x2e || (c >= 0x30 && c <= 0x39))) return text;
  const int = yamlInt(text);
  if (int !== undefined) return int;
  if (FLOAT.test(text)) {
    const lower = text.toLowerCase();
    const sign = lower[0] === '-' ? -1 : 1;
    const body = lower[0] === '-' || lower[0] === '+' ? lower.slice(1) : lower;
    if (body === '.inf') return sign * Infinity;
    if (body === '.nan') return NaN;
    const value = sign * parseFloat(body);
    if (Number.isFinite(value)) return value;
  }
  return text;
}

/** A plain scalar starting with this character may be a null, a bool or a number (`~nNtTfF+-.` or a digit). */
function typedStart(c: number): boolean {
  return c === 0x7e || c === 0x6e || c === 0x4e || c === 0x74 || c === 0x54 || c === 0x66 || c === 0x46 || c === 0x2b || c === 0x2d || c === 0x2e || (c >= 0x30 && c <= 0x39);
}

/** js-yaml's float pattern (core schema). */
const FLOAT = /^(?:[-+]?[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9]+(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$/;
const RADIX: Record<string, [number, RegExp]> = { b: [2, /^[01]+$/], o: [8, /^[0-7]+$/], x: [16, /^[0-9a-fA-F]+$/] };

/** js-yaml's int (core schema): its value, or undefined when the text is not one (or not finite). */
function yamlInt(text: string): number | undefined {
  const signed = text[0] === '-' || text[0] === '+';
  const sign = text[0] === '-' ? -1 : 1;
  const body = signed ? text.slice(1) : text;
  let value: number;
  const radix = body[0] === '0' && body.length > 2 ? RADIX[body[1]!] : undefined;
  if (radix) {
    if (!radix[1].test(body.slice(2))) return undefined;
    value = sign * parseInt(body.slice(2), radix[0]);
  } else {
    if (!/^[0-9]+$/.test(body)) return undefined;
    value = body === '0' ? 0 : sign * parseInt(body, 10);
  }
  return Number.isFinite(value) ? value : undefined;
}
