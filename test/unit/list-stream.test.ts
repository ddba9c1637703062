import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

import { ListSplitter } from '../../src/source/list-stream.js';

/** Feeds `text` cut at `cuts` (offsets, any order); returns the items and the head. */
function split(text: string, cuts: number[] = []) {
  const items: unknown[] = [];
  const s = new ListSplitter((item) => items.push(item));
  let from = 0;
  for (const at of [...new Set(cuts.map((c) => Math.min(text.length, c)))].sort((a, b) => a - b)) {
    s.write(text.slice(from, at));
    from = at;
  }
  s.write(text.slice(from));
  return { items, head: s.end() };
}

/** Every cut of `text` into two chunks, and into single characters. */
function everyChunking(text: string): number[][] {
  return [...Array.from({ length: text.length + 1 }, (_, i) => [i]), Array.from({ length: text.length }, (_, i) => i)];
}

const list = (items: unknown[], extra: Record<string, unknown> = {}) => ({ kind: 'ServiceList', apiVersion: 'v1', metadata: { resourceVersion: '42', continue: 'abc' }, items, ...extra });

describe('ListSplitter', () => {
  it('hands on each item and keeps the other members, however the text is cut', () => {
    const body = list([{ metadata: { name: 'a' } }, { metadata: { name: 'b', labels: { x: 'y' } }, spec: { ports: [1, 2] } }]);
    const text = JSON.stringify(body);
    for (const cuts of everyChunking(text)) {
      const { items, head } = split(text, cuts);
      expect(items).toEqual(body.items);
      expect(head).toEqual({ members: { kind: 'ServiceList', apiVersion: 'v1', metadata: body.metadata }, hasItems: true });
    }
  });

  it('escapes: quotes, backslash runs and brackets inside strings, cut anywhere', () => {
    const tricky = ['a"b', 'a\\', '\\\\"', '\\"]},[{', '"', '\\', 'ünïcödé ✓ 😀', '\u0000\n\t', '{"items":[1]}'];
    const body = list(tricky.map((t) => ({ [t]: t, v: [t, { t }] })), { [tricky[3]!]: tricky[3] });
    const text = JSON.stringify(body);
    for (const cuts of everyChunking(text)) {
      const { items, head } = split(text, cuts);
      expect(items).toEqual(body.items);
      expect(head.members[tricky[3]!]).toBe(tricky[3]);
    }
  });

  it('pretty-printed text, items first, empty items, primitive items', () => {
    expect(split(JSON.stringify(list([{ a: 1 }, { b: [] }]), null, 2))).toEqual({ items: [{ a: 1 }, { b: [] }], head: expect.objectContaining({ hasItems: true }) });
    expect(split('{"items":[{"a":1}],"metadata":{"resourceVersion":"7"}}')).toEqual({ items: [{ a: 1 }], head: { members: { metadata: { resourceVersion: '7' } }, hasItems: true } });
    expect(split('{"metadata":{},"items":[],"kind":"X"}')).toEqual({ items: [], head: { members: { metadata: {}, kind: 'X' }, hasItems: true } });
    expect(split(' { "items" : [ 1 , "two" , null , [3] ] } ')).toEqual({ items: [1, 'two', null, [3]], head: { members: {}, hasItems: true } });
  });

  it('items missing or not an array: no items, hasItems false', () => {
    expect(split('{"metadata":{}}').head).toEqual({ members: { metadata: {} }, hasItems: false });
    expect(split('{"items":null}').head).toEqual({ members: { items: null }, hasItems: false });
    expect(split('{"items":{"a":[1]}}').head).toEqual({ members: { items: { a: [1] } }, hasItems: false });
    // a nested "items" key is not the list's
    expect(split('{"metadata":{"items":[1]}}').head).toEqual({ members: { metadata: { items: [1] } }, hasItems: false });
    // a member named __proto__ is an own property, as JSON.parse makes it
    expect(Object.keys(split('{"__proto__":{"x":1},"items":[]}').head.members)).toEqual(['__proto__']);
  });

  it('matches JSON.parse on random lists cut into random chunks', () => {
    fc.assert(
      fc.property(
        fc.array(fc.jsonValue({ maxDepth: 4 }), { maxLength: 8 }),
        fc.dictionary(fc.string().filter((k) => k !== 'items'), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 4 }),
        fc.array(fc.nat(), { maxLength: 12 }),
        fc.boolean(),
        (items, members, cuts, pretty) => {
          const body = { ...members, items };
          const text = pretty ? JSON.stringify(body, null, 1) : JSON.stringify(body);
          const got = split(text, cuts.map((c) => c % (text.length + 1)));
          // JSON.parse of the whole text is the reference (it also maps -0 to 0 the same way)
          const want = JSON.parse(text) as Record<string, unknown>;
          expect(got.items).toEqual(want.items);
          const { items: _, ...rest } = want;
          expect(got.head).toEqual({ members: rest, hasItems: true });
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('a body cut short anywhere, or malformed, is an error, never a silent success', () => {
    const text = JSON.stringify(list([{ metadata: { name: 'a"\\' } }, { b: [1, { c: '}' }] }]));
    for (let n = 0; n < text.length; n++) {
      expect(() => split(text.slice(0, n)), `cut at ${n}`).toThrow();
    }
    for (const bad of ['[1]', '"x"', '{"items":[1,]}', '{"items":[,]}', '{"a":}', '{"items":[{"a":1]]}', '{} {}', '{"a":1}x', 'null']) {
      expect(() => split(bad), bad).toThrow();
    }
  });

  it('an error thrown by onItem stops the split', () => {
    const s = new ListSplitter(() => {
      throw new Error('bad item');
    });
    expect(() => s.write('{"items":[{"a":1},')).toThrow('bad item');
  });
});
