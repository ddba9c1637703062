// parseManifest against hostile input (fast-check): random text and bytes, YAML built from hostile
// fragments (anchors, aliases, directives, markers, tags), alias bombs, deep nesting, long scalars,
// mutations of a valid manifest. Never an exception, always bounded; whatever it returns is valid.
// Then the fast path's blanking of unread fields: the same objects as a plain full parse.
import fc from 'fast-check';
import { CORE_SCHEMA, dump, load } from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';

import { MAX_ERRORS, parseManifest, stripUnread, type ParsedManifest } from '../../src/source/manifest-parse.js';
import { validate } from '../../src/source/validate.js';

/** Parses, asserting it neither throws nor returns anything unvalidated. */
function check(text: string): ParsedManifest {
  let r: ParsedManifest | undefined;
  expect(() => (r = parseManifest('f.yaml', text))).not.toThrow();
  for (const o of r!.objects) expect(validate(o.kind, o.object).ok, JSON.stringify(o.object)).toBe(true);
  for (const e of r!.errors) {
    expect(e.object.startsWith('f.yaml')).toBe(true);
    expect(e.reason.length).toBeLessThan(3000);
  }
  return r!;
}

const VALID = `apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: demo
  labels: {app: web}
  managedFields:
  - manager: kubectl
    fieldsV1: {f:spec: {f:ports: {}}}
spec:
  clusterIP: 10.96.0.10
  ports:
  - {name: http, port: 80, targetPort: 8080}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: demo, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
endpoints: [{addresses: [10.244.1.2], conditions: {ready: true}}]
ports: [{name: http, port: 8080}]
`;

const FRAGMENTS = [
  '---\n', '...\n', '%YAML 1.2\n', '%TAG ! tag:x,2000:\n', '&a ', '*a', '&b [*a, *a, *a]\n', '*b', '<<: *a\n',
  'kind: Service\n', 'kind: List\nitems:\n', 'metadata: {name: x}\n', 'metadata:\n  name: "evil\\n-A INPUT"\n',
  '- ', '  ', '\t', '[', ']', '{', '}', ',', ':', '? ', '|\n', '>-\n', '"', "'", '#', '!!binary ', '!!timestamp ', '!x ',
  'managedFields:\n', 'kubectl.kubernetes.io/last-applied-configuration: |\n', 'spec: {ports: [{port: 80}]}\n',
  '\n', '\r\n', '\u0000', '\uFEFF', '\uD800', 'é', '0x1F', '.inf', '~', 'null', 'true', '1e999',
];

describe('parseManifest never throws', () => {
  it('on random text', () => {
    fc.assert(fc.property(fc.string({ unit: 'grapheme-ascii', maxLength: 400 }), (s) => void check(s)), { numRuns: 300 });
    fc.assert(fc.property(fc.string({ unit: 'binary', maxLength: 200 }), (s) => void check(s)), { numRuns: 200 });
  }, 30_000);

  it('on YAML built from hostile fragments', () => {
    fc.assert(fc.property(fc.array(fc.constantFrom(...FRAGMENTS), { maxLength: 60 }), (parts) => void check(parts.join(''))), { numRuns: 1500 });
  });

  it('on mutations of a valid manifest', () => {
    const edit = fc.tuple(fc.nat(VALID.length), fc.nat(8), fc.constantFrom(...FRAGMENTS, '', 'x', '9', '-'));
    fc.assert(
      fc.property(fc.array(edit, { minLength: 1, maxLength: 6 }), (edits) => {
        let text = VALID;
        for (const [at, del, ins] of edits) text = text.slice(0, at) + ins + text.slice(at + del);
        check(text);
      }),
      { numRuns: 1000 },
    );
  });

  it('on alias bombs of any shape: refused or small, always fast', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 12 }), fc.boolean(), (levels, width, flow) => {
        let text = 'kind: Service\nmetadata: {name: bomb}\nl0: &l0 lol\n';
        for (let i = 1; i <= levels; i++) {
          const refs = Array(width).fill(`*l${i - 1}`);
          text += flow ? `l${i}: &l${i} [${refs.join(', ')}]\n` : `l${i}: &l${i}\n${refs.map((r) => `- ${r}`).join('\n')}\n`;
        }
        const t = Date.now();
        const r = check(text);
        expect(Date.now() - t).toBeLessThan(2000);
        if (width ** levels > 1_000_000) expect(r.errors[0]?.reason).toMatch(/aliases expand to more than \d+ nodes/);
      }),
      { numRuns: 60 },
    );
    for (const self of ['&a [*a]', 'a: &a {b: *a}', 'kind: Service\nmetadata: &m {name: x, m: *m}\nspec: {}\n']) {
      expect(check(self).errors[0]?.reason).toMatch(/aliases expand/);
    }
  });

  it('on deep nesting, flow and block', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 20_000 }), fc.constantFrom('[', '{a: ', '- ', 'block'), (depth, kind) => {
        const text = kind === 'block' ? Array.from({ length: Math.min(depth, 3000) }, (_, i) => `${' '.repeat(i)}a:`).join('\n') : kind.repeat(depth);
        const r = check(text);
        if (depth > 200 && kind !== '- ') expect(r.errors[0]?.reason).toMatch(/nesting|expected|unexpected|end of the stream/);
      }),
      { numRuns: 40 },
    );
    // Valid JSON nested 100,000 deep: JSON.parse takes it; nothing walks it recursively.
    const deep = (n: number): string => '['.repeat(n) + ']'.repeat(n);
    expect(check(deep(100_000)).errors[0]?.reason).toBe('(document): expected an object, got a list');
    const svc = check(`{"kind":"Service","metadata":{"name":"a","labels":${deep(100_000)}},"spec":{"ports":${deep(100_000)}}}`);
    expect(svc.errors[0]?.reason).toBe('metadata.labels: expected record, received array; spec.ports[0]: expected object, received array');
  });

  it('on very long scalars, keys and names', () => {
    for (const n of [1e3, 1e5, 4e6]) {
      const x = 'x'.repeat(n);
      check(`kind: Service\nmetadata: {name: ${x}}\nspec: {}\n`);
      check(`${x}: 1\n`);
      check(`"${x}`);
      const r = check(`kind: ${x}\n`);
      expect(r.errors[0]!.object.length).toBeLessThan(400);
    }
  });
});

describe('bounded work per file', () => {
  it('stops reading a file after MAX_ERRORS errors; many empty documents are cheap', () => {
    const broken = check('a: [\n---\n'.repeat(100_000));
    expect(broken.errors).toHaveLength(MAX_ERRORS + 1);
    expect(broken.errors.at(-1)).toEqual({ object: 'f.yaml', reason: `more than ${MAX_ERRORS} errors: the rest of the file was not read` });
    const list = check(JSON.stringify({ kind: 'List', items: Array.from({ length: 10_000 }, () => ({ kind: 'Service', metadata: { name: 'X' } })) }));
    expect(list.errors).toHaveLength(MAX_ERRORS + 1);
    const t = Date.now();
    expect(check('---\n'.repeat(500_000))).toEqual({ objects: [], errors: [], failed: false });
    expect(Date.now() - t).toBeLessThan(5000);
  });
});

describe('blanking unread fields', () => {
  const name = fc.stringMatching(/^[a-z][a-z0-9-]{0,10}[a-z0-9]$/);
  const service = fc.record({
    name,
    labels: fc.dictionary(name, name, { maxKeys: 3 }),
    annotations: fc.dictionary(name, fc.string({ maxLength: 30 }), { maxKeys: 3 }),
    lastApplied: fc.option(fc.json(), { nil: undefined }),
    managed: fc.option(fc.array(fc.record({ manager: name, fieldsV1: fc.jsonValue() }), { maxLength: 3 }), { nil: undefined }),
    owners: fc.option(fc.array(fc.record({ kind: name, name, uid: fc.uuid() }), { maxLength: 2 }), { nil: undefined }),
    order: fc.boolean(),
    endpoints: fc.option(fc.array(fc.record({ ip: fc.ipV4(), targetRef: fc.option(fc.record({ kind: name, name }), { nil: undefined }), first: fc.boolean() }), { maxLength: 3 }), { nil: undefined }),
  }).map(({ name: n, labels, annotations, lastApplied, managed, owners, order, endpoints }) => {
    const ann = lastApplied === undefined ? annotations : { ...annotations, 'kubectl.kubernetes.io/last-applied-configuration': lastApplied };
    const md: Record<string, unknown> = order ? { managedFields: managed, name: n, namespace: 'demo' } : { name: n, namespace: 'demo', managedFields: managed, ownerReferences: owners };
    const metadata = { ...md, labels, annotations: ann };
    if (endpoints === undefined) return { apiVersion: 'v1', kind: 'Service', metadata, spec: { clusterIP: '10.96.0.1', ports: [{ name: 'http', port: 80 }] } };
    return {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata,
      addressType: 'IPv4',
      endpoints: endpoints.map((e) => (e.first ? { targetRef: e.targetRef, addresses: [e.ip] } : { addresses: [e.ip], targetRef: e.targetRef, nodeName: 'n1' })),
    };
  });
  const styles = [
    (o: unknown) => stringify(o),
    (o: unknown) => stringify(o, { indent: 4, indentSeq: false }),
    (o: unknown) => dump(o),
    (o: unknown) => dump(o, { indent: 3, noArrayIndent: true, lineWidth: 20 }),
    (o: unknown) => dump(o, { flowLevel: 2 }),
  ];

  it('yields exactly the objects of a full parse, in every serialisation style', () => {
    fc.assert(
      fc.property(fc.array(service, { minLength: 1, maxLength: 3 }), fc.constantFrom(...styles), (objs, style) => {
        const text = objs.map(style).join('---\n');
        const got = check(text).objects.map((o) => o.object);
        let full: unknown[];
        try {
          full = text.split(/^---$/m).map((d) => load(d, { schema: CORE_SCHEMA }));
        } catch {
          return; // the serialiser wrote YAML that a full parse refuses (js-yaml dump of odd keys)
        }
        const kindOf = (d: unknown): 'Service' | 'EndpointSlice' => (d as { kind: 'Service' | 'EndpointSlice' }).kind;
        expect(got).toEqual(full.map((d) => validate(kindOf(d), d)).map((r) => (r.ok ? r.value : r.reason)));
        expect(stripUnread(text).split('\n').length).toBe(text.split('\n').length);
      }),
      { numRuns: 300 },
    );
  }, 30_000);

  it('leaves flow collections alone', () => {
    const text = 'kind: Service\nmetadata: {\n  namespace: demo,\n  managedFields:\n    [a], name: web\n}\nspec: {}\n';
    expect(stripUnread(text)).toBe(text);
    expect(check(text).objects[0]?.object.metadata.name).toBe('web');
    const inline = 'kind: Service\nmetadata:\n  annotations: {a: "[", b: x}\n  managedFields: [x]\n  name: web\nspec: {}\n';
    expect(stripUnread(inline)).toBe(inline); // a quoted bracket reads as unbalanced: no blanking from there
    expect(check(inline).objects[0]?.object.metadata.annotations).toEqual({ a: '[', b: 'x' });
    const block = inline.replace('{a: "[", b: x}', '{a: "[]", b: x}');
    expect(stripUnread(block)).toBe(block.replace('[x]', '[]'));
  });

  it('reads a document again unchanged when blanking broke it (an anchor inside a blanked field)', () => {
    const text = 'kind: Service\nmetadata:\n  name: web\n  managedFields:\n  - &l {app: web}\n  labels: *l\nspec: {}\n';
    expect(stripUnread(text)).not.toBe(text);
    const r = check(text);
    expect(r.errors).toEqual([]);
    expect(r.objects[0]?.object.metadata.labels).toEqual({ app: 'web' });
  });
});
