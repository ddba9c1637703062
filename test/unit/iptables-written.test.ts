import { describe, expect, it } from 'vitest';

import { parseSave, type ChainSpec, type SavedChain } from '../../src/kernel/iptables.js';
import { WrittenChains } from '../../src/kernel/iptables/written.js';

const chain: ChainSpec = { name: 'KUBE-SVC-A', rules: [['-m', 'comment', '--comment', 'ns/a', '-j', 'KUBE-SEP-A'], ['-j', 'KUBE-MARK-MASQ']] };
const saved = (...lines: string[]): SavedChain =>
  parseSave(`*nat\n:KUBE-SVC-A - [0:0]\n${lines.map((l) => `-A KUBE-SVC-A ${l}\n`).join('')}COMMIT\n`)[0]!.chains[0]!;
const PRINTED = ['-m comment --comment ns/a -j KUBE-SEP-A', '-j KUBE-MARK-MASQ'];

describe('WrittenChains', () => {
  it('keeps nothing it did not write', () => {
    expect(new WrittenChains().unchanged('nat', chain, saved(...PRINTED))).toBe(false);
  });

  it('after a write: a read-back with the same rule count and targets is adopted, then must print the same', () => {
    const w = new WrittenChains();
    w.wrote('nat', [chain]);
    expect(w.unchanged('nat', chain, saved(...PRINTED))).toBe(true);
    expect(w.unchanged('nat', chain, saved(...PRINTED))).toBe(true);
    expect(w.unchanged('nat', chain, saved('-m comment --comment ns/b -j KUBE-SEP-A', '-j KUBE-MARK-MASQ'))).toBe(false);
    expect(w.unchanged('nat', chain, undefined)).toBe(false);
    expect(w.unchanged('filter', chain, saved(...PRINTED))).toBe(false);
  });

  it('a flushed, shortened or retargeted chain on the first read-back is not adopted', () => {
    const w = new WrittenChains();
    w.wrote('nat', [chain]);
    expect(w.unchanged('nat', chain, saved())).toBe(false);
    expect(w.unchanged('nat', chain, saved(PRINTED[0]!))).toBe(false);
    expect(w.unchanged('nat', chain, saved(PRINTED[0]!, '-j RETURN'))).toBe(false);
    expect(w.unchanged('nat', chain, saved(...PRINTED))).toBe(true);
  });

  it('new wanted rules, a deletion or a failed restore make it rewrite', () => {
    const w = new WrittenChains();
    w.wrote('nat', [chain]);
    expect(w.unchanged('nat', { ...chain, rules: [chain.rules[0]!, ['-j', 'KUBE-MARK-DROP']] }, saved(...PRINTED))).toBe(false);
    w.wrote('nat', [], ['KUBE-SVC-A']);
    expect(w.unchanged('nat', chain, saved(...PRINTED))).toBe(false);
    w.wrote('nat', [chain]);
    w.forget('nat', ['KUBE-SVC-A']);
    expect(w.unchanged('nat', chain, saved(...PRINTED))).toBe(false);
  });
});
