// The --manifests parser splits a YAML stream into documents at the byte level (no string of the
// whole file): the same documents, with the same first lines, as splitting the decoded text at its
// `---` lines with the YAML 1.2 rule (a line starting with `---` then white space or its end).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

import { documents, LineCounter, parseManifest, splittable } from '../../src/source/manifest-parse.js';

/** The reference: split the decoded text with a regular expression. */
function reference(text: string): { splittable: boolean; docs: Array<{ text: string; line: number }> } {
  const ok = !text.startsWith('%') && !text.includes('\n%') && !/^\.\.\.(?=[ \t\r\n]|$)/m.test(text) && !/\r(?!\n)/.test(text);
  const docs: Array<{ text: string; line: number }> = [];
  const marker = /^---(?=[ \t\r\n]|$)/gm;
  const starts = [...text.matchAll(marker)].map((m) => m.index);
  const lineOf = (at: number): number => text.slice(0, at).split('\n').length - 1;
  if (starts.length === 0) {
    if (text.length > 0) docs.push({ text, line: 0 });
  } else {
    const head = text.slice(0, starts[0]);
    if (/^[ \t]*[^#\s]/m.test(head)) docs.push({ text: head, line: 0 });
    starts.forEach((s, k) => docs.push({ text: text.slice(s, starts[k + 1] ?? text.length), line: lineOf(s) }));
  }
  return { splittable: ok, docs };
}

function split(text: string): { splittable: boolean; docs: Array<{ text: string; line: number }> } {
  const buf = Buffer.from(text, 'utf8');
  const lines = new LineCounter(buf);
  return { splittable: splittable(buf), docs: [...documents(buf)].map(([s, e]) => ({ text: buf.toString('utf8', s, e), line: lines.at(s) })) };
}

const PIECES = ['---', '--- ', '---\t', '---x', ' ---', '...', '... ', '%YAML 1.2', 'a: 1', '# c', '- x', 'é: ü', '', '\r', '--', '----', 'k: ---', 'a\r--- b', '\r...', '\r\n---'];

describe('manifest documents split at the byte level', () => {
  it('match a split of the decoded text', () => {
    const stream = fc.array(fc.oneof(fc.constantFrom(...PIECES), fc.string({ maxLength: 6 })), { maxLength: 12 }).chain((ls) => fc.constantFrom(ls.join('\n'), `${ls.join('\n')}\n`));
    fc.assert(fc.property(stream, (text) => {
      const [got, want] = [split(text), reference(text)];
      expect(got.splittable).toBe(want.splittable);
      if (want.splittable) expect(got.docs).toEqual(want.docs);
    }), { numRuns: 2000 });
  });

  it('name the line of an error in a later document', () => {
    const text = '~\n---\n~\n---\n# three\nc: [\n';
    const r = parseManifest('f.yaml', Buffer.from(text));
    expect(r.errors).toHaveLength(1);
    expect(r.errors[0]!.object).toBe('f.yaml#2');
    expect(r.errors[0]!.reason).toMatch(/^invalid YAML: .* at line 7, column 1$/);
  });

  it('read a byte-order mark and a string as the same bytes', () => {
    const svc = 'apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: n}\nspec: {clusterIP: 10.96.0.1, ports: [{port: 80}]}\n';
    const plain = parseManifest('f.yaml', svc);
    expect(plain.errors).toEqual([]);
    expect(parseManifest('f.yaml', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(svc)]))).toEqual(plain);
    expect(parseManifest('f.yaml', `\uFEFF${svc}`)).toEqual(plain);
  });
});
