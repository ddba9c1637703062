import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  IptablesError,
  comment,
  parseSave,
  planRestore,
  quoteToken,
  renderCommand,
  ruleTarget,
  sanitizeComment,
  tokenize,
} from '../../src/kernel/iptables.js';

const HOSTILE = [
  '"\n-A INPUT -j DROP\n',
  'a"\n-A INPUT -j DROP\n#',
  '\\"\r\n-A INPUT -j DROP',
  '-t nat',
  '--table=nat',
  '" -j DROP "',
  "'; rm -rf / #",
  '\\',
  '\\\\"',
  '\u0000\u0007\u001b[31m\u007f',
  'COMMIT\n*filter\n-A INPUT -j DROP',
  'x'.repeat(1000),
  'ünïcödé/名前',
  '',
  '#',
];

describe('sanitizeComment', () => {
  it('keeps ordinary Kubernetes names', () => {
    expect(sanitizeComment('default/web:http')).toBe('default/web:http');
    expect(sanitizeComment('kube-system/kube-dns:dns-tcp cluster IP')).toBe('kube-system/kube-dns:dns-tcp cluster IP');
  });

  it('replaces control and non-ASCII characters, leading dashes, and caps the length', () => {
    expect(sanitizeComment('"\n-A INPUT -j DROP\n')).toBe('"_-A INPUT -j DROP_');
    expect(sanitizeComment('--table=nat')).toBe('__table=nat');
    expect(sanitizeComment('ä\tb')).toBe('__b');
    expect(sanitizeComment('x'.repeat(300))).toHaveLength(255);
    expect(sanitizeComment('')).toBe('_');
  });

  it('always yields printable ASCII of 1..255 chars without a leading dash', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 600 }), (s) => {
        const out = sanitizeComment(s);
        expect(out).toMatch(/^[\x20-\x7e]{1,255}$/);
        expect(out.startsWith('-')).toBe(false);
      }),
    );
  });
});

describe('quoteToken / tokenize', () => {
  it('leaves plain tokens bare and quotes the rest', () => {
    expect(quoteToken('KUBE-SERVICES')).toBe('KUBE-SERVICES');
    expect(quoteToken('0x4000/0x4000')).toBe('0x4000/0x4000');
    expect(quoteToken('a b')).toBe('"a b"');
    expect(quoteToken('say "hi"')).toBe('"say \\"hi\\""');
    expect(quoteToken('back\\slash')).toBe('"back\\\\slash"');
    expect(quoteToken('')).toBe('""');
    expect(quoteToken('#x')).toBe('"#x"');
  });

  it('refuses control characters', () => {
    expect(() => quoteToken('a\nb')).toThrow(IptablesError);
    expect(() => quoteToken('a\rb')).toThrow(/control character/);
    try {
      quoteToken('\0');
    } catch (e) {
      expect((e as IptablesError).code).toBe('EINVAL');
    }
  });

  it('tokenizes iptables-save quoting, including \\\' as printed by iptables-save', () => {
    expect(tokenize(`-A X -m comment --comment "a \\"q\\" b\\\\c \\'e\\'" -j RETURN`)).toEqual([
      '-A',
      'X',
      '-m',
      'comment',
      '--comment',
      `a "q" b\\c 'e'`,
      '-j',
      'RETURN',
    ]);
    expect(tokenize('-A X  -m comment --comment ""  -j RETURN')).toEqual(['-A', 'X', '-m', 'comment', '--comment', '', '-j', 'RETURN']);
    expect(() => tokenize('-A X "open')).toThrow(/unterminated/);
  });

  it('round-trips any printable token through quoteToken and tokenize', () => {
    fc.assert(
      fc.property(fc.array(fc.string({ unit: 'grapheme-ascii', maxLength: 40 }), { maxLength: 8 }), (tokens) => {
        const safe = tokens.filter((t) => !/[\x00-\x1f\x7f]/.test(t));
        expect(tokenize(safe.map(quoteToken).join(' '))).toEqual(safe);
      }),
    );
  });

  it('finds the jump or goto target', () => {
    expect(ruleTarget(['-m', 'comment', '--comment', '-j', '-j', 'KUBE-A'])).toBe('KUBE-A');
    expect(ruleTarget(['-g', 'KUBE-B'])).toBe('KUBE-B');
    expect(ruleTarget(['-p', 'tcp'])).toBeUndefined();
  });
});

describe('hostile comments never add a rule', () => {
  it.each(HOSTILE)('%j', (name) => {
    const rule = [...comment(`${name}/svc:port`), '-j', 'KUBE-MARK-MASQ'];
    const line = renderCommand('-A', 'KUBE-SERVICES', rule);
    expect(line).not.toMatch(/[\n\r]/);
    // iptables-restore reads it back as exactly the tokens we meant.
    expect(tokenize(line)).toEqual(['-A', 'KUBE-SERVICES', ...rule]);
    // A whole restore input holds exactly one rule line, and parses back as one rule.
    const plan = planRestore(
      { table: 'nat', chains: [{ name: 'KUBE-SERVICES', rules: [rule] }] },
      undefined,
      { isOwned: (c) => c.startsWith('KUBE-') },
    );
    const lines = plan.text.split('\n');
    expect(lines.filter((l) => l.startsWith('-'))).toHaveLength(1);
    expect(lines.filter((l) => l === 'COMMIT')).toHaveLength(1);
    const saved = parseSave(plan.text);
    expect(saved).toHaveLength(1);
    expect(saved[0]?.chains).toHaveLength(1);
    expect(saved[0]?.chains[0]?.rules.map((r) => r.args)).toEqual([rule]);
  });
});
