// The fast block-YAML reader against js-yaml: whenever it reads a document, it builds exactly what
// js-yaml's load (core schema) builds from the text with the unread fields blanked (stripUnread),
// key order, -0, NaN and all; whenever js-yaml fails, it declines (UNSUPPORTED). Documents come from
// random values written by the `yaml` package and js-yaml in several styles, then mutated with
// hostile fragments. And it does read what kubectl and the `yaml` package write.
import fc from 'fast-check';
import { CORE_SCHEMA, dump, load } from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';

import { stripUnread, UNREAD_VALUES } from '../../src/source/manifest-parse.js';
import { readBlockYaml, UNSUPPORTED } from '../../src/source/yaml-block.js';
import { plainScalar } from '../../src/source/yaml-scalar.js';

/** Key order, types, -0 and NaN all visible. */
function canon(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) => (typeof x === 'number' ? `n:${Object.is(x, -0) ? '-0' : String(x)}` : typeof x === 'string' ? `s:${x}` : x));
}

function jsYaml(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: load(stripUnread(text), { schema: CORE_SCHEMA, maxDepth: 128 }) };
  } catch {
    return { ok: false };
  }
}

/** Returns whether the fast reader took the text (and checks it against js-yaml when it did). */
function agrees(text: string): boolean {
  const fast = readBlockYaml(text, UNREAD_VALUES);
  if (fast === UNSUPPORTED) return false;
  const ref = jsYaml(text);
  expect(ref.ok, `js-yaml fails on a text the fast reader took:\n${text}`).toBe(true);
  expect(canon(fast), text).toBe(canon((ref as { value: unknown }).value));
  return true;
}

const KEYS = ['a', 'b', 'name', 'b c', 'null', 'True', 'true', '1', '0x10', '1.0', '~', '.inf', '-a', '?b', ':c', 'a:b', 'a#b', '#x', 'é', '<<',
  'managedFields', 'targetRef', 'ownerReferences', 'kubectl.kubernetes.io/last-applied-configuration', 'k:{"p":1}', 'x ', ' y', "it's", 'q"q', '__proto__', 'constructor'];
const STRINGS = ['', ' ', 'true', 'True', 'FALSE', 'null', 'Null', '~', '1', '-1', '+1', '-0', '0.5', '.5', '1e3', '1_000', '0o17', '0x1F', '0b101', '.inf', '-.Inf', '.NaN',
  'a: b', 'a:b', 'x #y', 'x#y', '#', '-', '- a', '? a', ': a', "it's", 'say "hi"', 'back\\slash', 'line\nbreak', 'tab\there', 'cr\rhere', '10.96.0.1',
  '2026-11-20T10:00:00Z', '[]', '{}', '[a]', '{a: 1}', '&a', '*a', '!x', '|', '>', '%x', '@x', '`x', ',x', 'a, b', 'trailing ', ' leading', 'é ü', '\u0085', '\uFEFF'];

const scalar = fc.oneof(fc.constantFrom(...STRINGS), fc.string({ maxLength: 8 }), fc.integer(), fc.double(), fc.boolean(), fc.constant(null));
const { value } = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small', withCrossShrink: true }, scalar, tie('array'), tie('object')),
  array: fc.array(tie('value'), { maxLength: 4 }),
  object: fc.dictionary(fc.oneof(fc.constantFrom(...KEYS), fc.string({ maxLength: 6 })), tie('value'), { maxKeys: 5 }),
}));
const top = fc.oneof(fc.dictionary(fc.constantFrom(...KEYS), value, { minKeys: 1, maxKeys: 6 }), fc.array(value, { minLength: 1, maxLength: 4 }));

const WRITERS: Array<(v: unknown) => string> = [
  (v) => stringify(v),
  (v) => stringify(v, { indentSeq: false, lineWidth: 0 }),
  (v) => stringify(v, { indent: 4 }),
  (v) => dump(v, { lineWidth: -1 }),
  (v) => dump(v, { noArrayIndent: true, lineWidth: -1 }),
  (v) => dump(v, { flowLevel: 2 }),
];

const FRAGMENTS = ['  ', '- ', '# c', ' # c', '---', ':', ': ', 'x: 1', '  x: 1', '- x', '[', '{', '"', "'", '&a ', '*a', '!t ', '|', '>-', '\t', '\r', '\\',
  'managedFields:', '  - a: 1', 'targetRef: {kind: Pod}', '? ', '%', '...', 'a: [1,', '  ]', 'é'];

describe('readBlockYaml', () => {
  it("resolves plain scalars as js-yaml's implicit core-schema types do (null, bool, int, float, else the text)", () => {
    type Implicit = { tag: string; resolve(s: string): boolean; construct(s: string): unknown };
    const implicit = (CORE_SCHEMA as unknown as { compiledImplicit: Implicit[] }).compiledImplicit;
    expect(implicit.map((t) => t.tag.split(':').pop())).toEqual(['null', 'bool', 'int', 'float']);
    const reference = (text: string): unknown => {
      const type = implicit.find((t) => t.resolve(text));
      return type ? type.construct(text) : text;
    };
    const same = (text: string): void => expect(canon([plainScalar(text)]), JSON.stringify(text)).toBe(canon([reference(text)]));
    const HAND = ['', '~', 'null', 'Null', 'NULL', 'nULL', 'true', 'True', 'TRUE', 'tRUE', 'false', 'False', 'FALSE', 'yes', 'on', '0', '-0', '+0', '00', '-00', '007',
      '0b', '0b101', '-0b0', '0b2', '0B1', '0o', '0o17', '0o8', '-0o7', '0x', '0x1F', '0xg', '-0x1f', '+0xA', '0X1', '0x0x1', '1_000', '1,000', '12e', '1e3', '1E3',
      '1e+3', '1e-3', '-1.5e-3', '1.', '-1.', '.5', '-.5', '+.5', '.', '..', '1.2.3', '1e999', '-1e999', `1${'0'.repeat(400)}`, `0x${'f'.repeat(300)}`, `0b${'1'.repeat(1100)}`,
      '9007199254740993', '.inf', '+.inf', '-.Inf', '.INF', '-.iNF', '.nan', '.NaN', '.NAN', '-.nan', '+.nan', '.Nan', '+', '-', '+-1', '--1', ' 1', '1 ', 'Infinity', 'NaN', '0.0', '-0.0'];
    for (const text of HAND) same(text);
    const chars = fc.constantFrom(...'0123456789+-.eExXoObBaAfFnNiI_ ~'.split(''));
    fc.assert(
      fc.property(fc.string({ unit: chars, maxLength: 10 }), (text) => {
        same(text);
      }),
      { numRuns: 20_000 },
    );
  });

  it('builds what js-yaml builds from random documents in several styles, or declines', () => {
    let taken = 0;
    fc.assert(
      fc.property(top, fc.nat(WRITERS.length - 1), fc.boolean(), (v, w, marker) => {
        const text = `${marker ? '---\n' : ''}${WRITERS[w]!(v)}`;
        if (agrees(text)) taken++;
      }),
      { numRuns: 3000 },
    );
    expect(taken).toBeGreaterThan(500); // it does read many (random strings often need quotes with escapes)
  });

  it("reads keys and values that share a slot of the reader's caches (same length, first and last character) as js-yaml does", () => {
    // The caches keep one recent text per slot; a text is taken from there only when it is the same text.
    const texts = [
      'name: zone-a\nnbme: zone-b\n',
      'nbme: zzne-a\nname: zone-a\n',
      'null: nul1\nnul1: null\nnall: n__l\n',
      '1: a\n2: "zone-a"\n"3": \'zone-a\'\n',
      'true: zone-b\ntrue1: tr1e1\ntrue2: 0x1f\n',
      'a: 10.1.1.1\nb: 10.1.1.2\nc: 1e1\nd: 1.1\ne: 11\nf: 1.1.1\n',
      'labels:\n  app.kubernetes.io/name: app-00001\n  app.kubernetes.io/nbme: app-00011\n',
    ];
    for (const text of [...texts, ...texts.reverse()]) expect(agrees(text), text).toBe(true);
  });

  it('declines or agrees on mutated documents', () => {
    fc.assert(
      fc.property(top, fc.nat(WRITERS.length - 1), fc.array(fc.tuple(fc.nat(), fc.nat(), fc.constantFrom(...FRAGMENTS)), { minLength: 1, maxLength: 3 }), (v, w, edits) => {
        const lines = WRITERS[w]!(v).split('\n');
        for (const [l, c, f] of edits) {
          const line = lines[l % lines.length]!;
          const at = c % (line.length + 1);
          lines[l % lines.length] = line.slice(0, at) + f + line.slice(at);
        }
        agrees(lines.join('\n'));
      }),
      { numRuns: 3000 },
    );
  });

  it('declines or agrees on documents assembled line by line', () => {
    const key = fc.constantFrom('a', 'b', 'c', 'managedFields', 'targetRef', 'ownerReferences', '"q"', "'s'", 'k :', 'x y', '1', 'null', '- a');
    const val = fc.constantFrom('', ' 1', ' x', ' "s"', " 'it''s'", ' []', ' {}', ' # c', ' x # c', ' a:b', ' -1', ' true', ' ~', ' [1]', ' |', ' "a', ' :');
    const line = fc.tuple(fc.nat(6), fc.constantFrom('', '- ', '- - ', '-', '# c', ''), fc.option(key), val).map(([n, dash, k, v]) => `${' '.repeat(n)}${dash}${k === null ? v.trimStart() : `${k}:${v}`}`);
    fc.assert(
      fc.property(fc.array(line, { minLength: 1, maxLength: 10 }), fc.boolean(), (lines, marker) => {
        agrees(`${marker ? '---\n' : ''}${lines.join('\n')}\n`);
      }),
      { numRuns: 20000 },
    );
  });

  it('reads what kubectl and the yaml package write, unread fields blanked', () => {
    const kubectl = `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  annotations:
    endpoints.kubernetes.io/last-change-trigger-time: "2026-11-20T10:00:00Z"
    kubectl.kubernetes.io/last-applied-configuration: |
      {"apiVersion":"v1"}
  labels:
    kubernetes.io/service-name: web
  managedFields:
  - apiVersion: discovery.k8s.io/v1
    fieldsV1:
      f:metadata:
        f:labels:
          .: {}
          k:{"port":80}: {}
    manager: kube-controller-manager
  name: web-abcde
  namespace: demo
  ownerReferences:
  - apiVersion: v1
    kind: Service
    name: web
addressType: IPv4
endpoints:
- addresses:
  - 10.244.1.2
  conditions:
    ready: true
    serving: true
    terminating: false
  nodeName: node-1
  targetRef:
    kind: Pod
    name: web-7d9f8b6c5d-x
  zone: zone-a
ports:
- name: http
  port: 8080
  protocol: TCP
`;
    expect(agrees(kubectl)).toBe(true);
    const value = readBlockYaml(kubectl, UNREAD_VALUES) as { metadata: Record<string, unknown>; endpoints: Array<Record<string, unknown>> };
    expect(value.metadata.managedFields).toEqual([]);
    expect(value.metadata.ownerReferences).toEqual([]);
    expect(value.endpoints[0]!.targetRef).toEqual({});
    expect((value.metadata.annotations as Record<string, unknown>)['kubectl.kubernetes.io/last-applied-configuration']).toBe('');
    const parsed = load(kubectl, { schema: CORE_SCHEMA }) as object;
    expect(agrees(stringify(parsed))).toBe(true);
    expect(agrees(`---\n${stringify(parsed, { indentSeq: false })}`)).toBe(true);
    expect(agrees(dump(parsed))).toBe(true);
  });

  it('declines what it does not read: js-yaml reads it, or names the error', () => {
    for (const text of ['a: &x 1\nb: *x\n', 'a: |\n  text\n', 'a: [1, 2]\n', 'a: "esc\\n"\n', 'a: b\n  c\n', 'a: 1\na: 2\n', '? a\n: b\n', '- - a\n', 'a:\tb\n', 'a: 1\r\n', '  a: 1\n', 'a: b: c\n', 'just text\n', '--- a\n']) {
      expect(readBlockYaml(text, UNREAD_VALUES), text).toBe(UNSUPPORTED);
    }
  });
});
