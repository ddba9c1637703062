// The ipset case table: each case a sequence of IpsetClient calls and what each must come to. It
// runs against FakeIpsetClient (test/unit/fake-ipset.test.ts) and against the kernel through
// NetlinkIpsetClient (test/kernel/lib/ipset-suite.ts: the host kernel in a fresh netns, and UML),
// so the fake cannot drift from the kernel. Each case starts with no sets. Entries are compared
// sorted (the kernel lists a hash in its own order); set names in the kernel's index order.
// Sets stay small: the kernel grows a hash table (its hashsize) as it fills, the fake does not.
import { expect } from 'vitest';

import type { IpsetClient, IpsetSetInfo, IpsetSetSpec } from '../../../../src/kernel/ipset/types.js';
import { attempt, expectOutcomes, outcomeOf, type Outcome } from './outcome.js';

/** One call and what it must come to; a set command without `is` must succeed. */
export type IpsetStep =
  | { create: IpsetSetSpec; exist?: boolean; is?: Outcome }
  /** add/del: one outcome per entry, or (`is`) the error the whole call throws. */
  | { add: string; entries: string[]; exist?: boolean; results: Outcome[] }
  | { add: string; entries: string[]; is: Outcome }
  | { del: string; entries: string[]; exist?: boolean; results: Outcome[] }
  | { del: string; entries: string[]; is: Outcome }
  /** test(set, entry): in the set or not, or the error it throws. */
  | { test: string; entry: string; is: boolean | Outcome }
  | { flush: string; is?: Outcome }
  | { swap: [string, string]; is?: Outcome }
  | { rename: [string, string]; is?: Outcome }
  | { destroy: string; exist?: boolean; is?: Outcome }
  /** list(set): its entries (sorted), or the error it throws. */
  | { list: string; entries: string[] }
  | { list: string; is: Outcome }
  /** listHeaders(): every set's header line (see headerLine), and no entries. */
  | { sets: Record<string, string> }
  /** listNames(): in the kernel's index order. */
  | { names: string[] }
  /** header(set): name, type and family (the revision depends on the kernel), or the error. */
  | { header: string; is: { name: string; type: string; family: string | null } | Outcome };

export interface IpsetCase {
  name: string;
  steps: IpsetStep[];
}

/** A set's header as `ipset create` options: `hash:ip family inet hashsize 1024 maxelem 65536 …`. */
export function headerLine(s: IpsetSetInfo): string {
  const words: string[] = [s.type];
  if (s.family) words.push('family', s.family);
  if (s.hashSize !== null) words.push('hashsize', String(s.hashSize));
  if (s.maxElem !== null) words.push('maxelem', String(s.maxElem));
  if (s.range) words.push('range', `${s.range.from}-${s.range.to}`);
  if (s.timeout !== null) words.push('timeout', String(s.timeout));
  if (s.comment) words.push('comment');
  if (s.counters) words.push('counters');
  if (s.references) words.push('references', String(s.references));
  return words.join(' ');
}

/** Asserts a set command: resolves when `is` is absent or 'ok', else throws what `is` says. */
async function expectCall(call: () => Promise<unknown>, is: Outcome | undefined, where: string): Promise<void> {
  const r = await attempt(call);
  const want = is ?? 'ok';
  expect(r.ok ? 'ok' : outcomeOf(r, want), where).toEqual(want);
}

/** Runs one case against `client` (no sets in its namespace), asserting every step. */
export async function runIpsetCase(client: IpsetClient, c: IpsetCase): Promise<void> {
  for (const [i, step] of c.steps.entries()) {
    const where = `${c.name}: step ${i + 1} (${Object.keys(step)[0]})`;
    const exist = 'exist' in step && step.exist ? { exist: true } : {};
    if ('create' in step) await expectCall(() => client.create(step.create, exist), step.is, where);
    else if ('add' in step || 'del' in step) {
      const call = () => ('add' in step ? client.add(step.add, step.entries, exist) : client.del(step.del, step.entries, exist));
      if ('is' in step) await expectCall(call, step.is, where);
      else expectOutcomes(await call(), step.results, where);
    }
    else if ('test' in step) {
      const r = await attempt(() => client.test(step.test, step.entry));
      if (typeof step.is === 'boolean') expect(r.ok ? r.value : outcomeOf(r, 'error'), where).toBe(step.is);
      else expect(r.ok ? r.value : outcomeOf(r, step.is), where).toEqual(step.is);
    } else if ('flush' in step) await expectCall(() => client.flush(step.flush), step.is, where);
    else if ('swap' in step) await expectCall(() => client.swap(...step.swap), step.is, where);
    else if ('rename' in step) await expectCall(() => client.rename(...step.rename), step.is, where);
    else if ('destroy' in step) await expectCall(() => client.destroy(step.destroy, exist), step.is, where);
    else if ('list' in step) {
      const r = await attempt(() => client.list(step.list));
      if ('entries' in step) expect(r.ok ? r.value.map((s) => [s.name, [...s.entries].sort()]) : outcomeOf(r, 'error'), where).toEqual([[step.list, [...step.entries].sort()]]);
      else expect(r.ok ? 'ok' : outcomeOf(r, step.is), where).toEqual(step.is);
    } else if ('sets' in step) {
      const headers = await client.listHeaders();
      expect(Object.fromEntries(headers.map((h) => [h.name, headerLine(h)])), where).toEqual(step.sets);
      for (const h of headers) expect(h.entries, where).toEqual([]);
    } else if ('names' in step) expect(await client.listNames(), where).toEqual(step.names);
    else {
      const r = await attempt(() => client.header(step.header));
      const want = step.is;
      if (typeof want === 'object' && 'name' in want) expect(r.ok ? { name: r.value.name, type: r.value.type, family: r.value.family } : outcomeOf(r, 'error'), where).toEqual(want);
      else expect(r.ok ? 'ok' : outcomeOf(r, want as Outcome), where).toEqual(want);
    }
  }
}

const ipPort = (name: string, extra: Partial<IpsetSetSpec> = {}): IpsetSetSpec => ({ name, type: 'hash:ip,port', family: 'inet', ...extra });
const hashIp = (name: string, extra: Partial<IpsetSetSpec> = {}): IpsetSetSpec => ({ name, type: 'hash:ip', family: 'inet', ...extra });
const HASH_IP = 'hash:ip family inet hashsize 1024 maxelem 65536';

export const IPSET_CASES: IpsetCase[] = [
  {
    // With -exist and another family, kernel 6.18 says ok and 7.2 EEXIST: left out.
    name: 'create twice: EEXIST; with -exist only the same type and options pass',
    steps: [
      { create: hashIp('a', { hashSize: 1000, maxElem: 10 }) },
      { create: hashIp('a', { hashSize: 1000, maxElem: 10 }), is: { code: 'EEXIST', errno: 17, op: 'ipset.create', object: 'a' } },
      { create: hashIp('a', { hashSize: 1000, maxElem: 10 }), exist: true },
      { create: hashIp('a', { hashSize: 1024, maxElem: 10 }), exist: true },
      { create: hashIp('a', { hashSize: 1000, maxElem: 11 }), exist: true, is: 'EEXIST' },
      { create: hashIp('a'), exist: true, is: 'EEXIST' },
      { create: { name: 'a', type: 'hash:net', family: 'inet', hashSize: 1000, maxElem: 10 }, exist: true, is: 'EEXIST' },
      { create: hashIp('b', { maxElem: 65536 }) },
      { create: hashIp('b'), exist: true },
      { sets: { a: 'hash:ip family inet hashsize 1024 maxelem 10', b: HASH_IP } },
    ],
  },
  {
    name: 'an invalid set is refused before sending, naming the field',
    steps: [
      { create: hashIp('x'.repeat(32)), is: { code: 'ERR_INVALID_INPUT', message: /ipset\.create: set\.name/ } },
      { create: { name: 'p', type: 'bitmap:port' }, is: { code: 'ERR_INVALID_INPUT', message: /range: bitmap:port needs a range/ } },
      { create: hashIp('p', { range: { from: 1, to: 2 } }), is: { code: 'ERR_INVALID_INPUT', message: /takes no range/ } },
      { destroy: '', is: 'ERR_INVALID_INPUT' },
      { names: [] },
    ],
  },
  {
    name: 'the hash table size: a power of two, at least 64; defaults 1024 and maxelem 65536',
    steps: [
      { create: hashIp('h3', { hashSize: 3 }) },
      { create: hashIp('h1000', { hashSize: 1000 }) },
      { create: hashIp('h2048', { hashSize: 2048, maxElem: 131072 }) },
      { create: { name: 'bp', type: 'bitmap:port', range: { from: 1, to: 1024 } } },
      { create: { name: 'v6', type: 'hash:ip,port,net', family: 'inet6' } },
      {
        sets: {
          h3: 'hash:ip family inet hashsize 64 maxelem 65536',
          h1000: HASH_IP,
          h2048: 'hash:ip family inet hashsize 2048 maxelem 131072',
          bp: 'bitmap:port range 1-1024',
          v6: 'hash:ip,port,net family inet6 hashsize 1024 maxelem 65536',
        },
      },
    ],
  },
  {
    name: 'add twice: IPSET_ERR_EXIST unless -exist; the same element written another way is the same',
    steps: [
      { create: ipPort('s') },
      { add: 's', entries: ['10.0.0.1,tcp:80', '10.0.0.1,80', '10.0.0.1,udp:80'], results: ['ok', { code: 'IPSET_ERR_EXIST', errno: 4103, op: 'ipset.add', object: 's 10.0.0.1,80' }, 'ok'] },
      { add: 's', entries: ['10.0.0.1,tcp:80', '10.0.0.2,tcp:80'], exist: true, results: ['ok', 'ok'] },
      { list: 's', entries: ['10.0.0.1,tcp:80', '10.0.0.1,udp:80', '10.0.0.2,tcp:80'] },
    ],
  },
  {
    name: 'del of an entry not in the set: IPSET_ERR_EXIST (op ipset.del) unless -exist',
    steps: [
      { create: ipPort('s') },
      { add: 's', entries: ['10.0.0.1,tcp:80', '10.0.0.3,udp:53'], results: ['ok', 'ok'] },
      { del: 's', entries: ['10.0.0.1,tcp:80', '10.0.0.9,tcp:80', '10.0.0.3,udp:53', '10.0.0.1,tcp:80'], results: ['ok', { code: 'IPSET_ERR_EXIST', op: 'ipset.del', object: 's 10.0.0.9,tcp:80' }, 'ok', 'IPSET_ERR_EXIST'] },
      { del: 's', entries: ['10.0.0.9,tcp:80'], exist: true, results: ['ok'] },
      { list: 's', entries: [] },
    ],
  },
  {
    name: 'a mixed batch: each entry reported, every valid one applied',
    steps: [
      { create: ipPort('mixed') },
      { add: 'mixed', entries: ['10.0.0.2,tcp:80'], results: ['ok'] },
      {
        add: 'mixed',
        entries: ['10.0.0.1,tcp:80', '10.0.0.2,tcp:80', 'nonsense', '10.0.0.3,udp:53', '10.0.0.4,tcp:99999', '10.0.0.3,udp:53', '10.0.0.5,sctp:1', 'fd00::1,tcp:80'],
        results: ['ok', { code: 'IPSET_ERR_EXIST', object: 'mixed 10.0.0.2,tcp:80' }, 'ERR_INVALID_INPUT', 'ok', 'ERR_INVALID_INPUT', 'IPSET_ERR_EXIST', 'ok', 'ERR_INVALID_INPUT'],
      },
      { list: 'mixed', entries: ['10.0.0.1,tcp:80', '10.0.0.2,tcp:80', '10.0.0.3,udp:53', '10.0.0.5,sctp:1'] },
    ],
  },
  {
    name: 'hash:net: host bits cleared; test finds a host in the most specific network that holds it, nomatch excludes',
    steps: [
      { create: { name: 'net', type: 'hash:net', family: 'inet' } },
      { add: 'net', entries: ['10.0.0.0/24', '10.0.5.6/16', '10.0.0.0/16', '10.0.0.128/25 nomatch', '192.168.7.7/16', '10.9.9.9'], results: ['ok', 'ok', 'IPSET_ERR_EXIST', 'ok', 'ok', 'ok'] },
      { list: 'net', entries: ['10.0.0.0/24', '10.0.0.0/16', '10.0.0.128/25 nomatch', '192.168.0.0/16', '10.9.9.9'] },
      { test: 'net', entry: '10.0.0.5', is: true },
      { test: 'net', entry: '10.0.0.5/32', is: true },
      { test: 'net', entry: '10.0.0.200', is: false },
      { test: 'net', entry: '10.0.5.5', is: true },
      { test: 'net', entry: '192.168.1.1', is: true },
      { test: 'net', entry: '10.9.9.9', is: true },
      { test: 'net', entry: '11.0.0.1', is: false },
      { test: 'net', entry: '10.0.0.0/24', is: true },
      { test: 'net', entry: '10.0.0.0/25', is: false },
      { test: 'net', entry: '10.0.0.128/25', is: false },
      { add: 'net', entries: ['192.168.0.0/16 nomatch'], results: ['IPSET_ERR_EXIST'] },
      { add: 'net', entries: ['192.168.0.0/16 nomatch'], exist: true, results: ['ok'] },
      { test: 'net', entry: '192.168.1.1', is: false },
      { del: 'net', entries: ['10.0.0.128/25', '192.168.0.0/16'], results: ['ok', 'ok'] },
      { test: 'net', entry: '10.0.0.200', is: true },
      { list: 'net', entries: ['10.0.0.0/24', '10.0.0.0/16', '10.9.9.9'] },
    ],
  },
  {
    name: 'hash:ip,port,net: the network part is widened as in hash:net; the rest must match exactly',
    steps: [
      { create: { name: 'ipn', type: 'hash:ip,port,net', family: 'inet' } },
      { add: 'ipn', entries: ['10.0.0.1,tcp:80,10.1.0.0/16', '10.0.0.1,tcp:80,10.1.2.0/24 nomatch', '10.0.0.1,tcp:443,192.168.1.1'], results: ['ok', 'ok', 'ok'] },
      { test: 'ipn', entry: '10.0.0.1,tcp:80,10.1.5.5', is: true },
      { test: 'ipn', entry: '10.0.0.1,tcp:80,10.1.2.5', is: false },
      { test: 'ipn', entry: '10.0.0.1,tcp:80,10.1.0.0/16', is: true },
      { test: 'ipn', entry: '10.0.0.1,udp:80,10.1.5.5', is: false },
      { test: 'ipn', entry: '10.0.0.2,tcp:80,10.1.5.5', is: false },
      { test: 'ipn', entry: '10.0.0.1,tcp:443,192.168.1.1', is: true },
      { test: 'ipn', entry: 'fd00::1,tcp:80,fd00::/64', is: 'ERR_INVALID_INPUT' },
    ],
  },
  {
    name: 'IPv6 entries read back canonical; an entry of the other family is refused before sending',
    steps: [
      { create: { name: 'v6', type: 'hash:ip,port,net', family: 'inet6' } },
      { add: 'v6', entries: ['FD00:0::1,udp:53,fd00:1::5/64', 'fd00::1,udp:53,FD00:1::/64', '10.0.0.1,tcp:80,10.0.0.0/8'], results: ['ok', 'IPSET_ERR_EXIST', 'ERR_INVALID_INPUT'] },
      { list: 'v6', entries: ['fd00::1,udp:53,fd00:1::/64'] },
      { create: { name: 'ip6', type: 'hash:ip', family: 'inet6' } },
      { add: 'ip6', entries: ['2001:DB8:0:0::1', '::ffff:1.2.3.4'], results: ['ok', 'ok'] },
      { list: 'ip6', entries: ['2001:db8::1', '::ffff:1.2.3.4'] },
      { test: 'ip6', entry: '2001:db8::1', is: true },
    ],
  },
  {
    name: 'a missing set: ENOENT for every command; swap names a missing second set IPSET_ERR_EXIST_SETNAME2',
    steps: [
      { create: hashIp('x') },
      { add: 'nosuch', entries: ['10.0.0.1'], is: { code: 'ENOENT', op: 'ipset.header' } },
      { del: 'nosuch', entries: ['10.0.0.1'], is: { code: 'ENOENT', op: 'ipset.header' } },
      { add: 'nosuch', entries: [], results: [] },
      { list: 'nosuch', is: { code: 'ENOENT', op: 'ipset.list' } },
      { flush: 'nosuch', is: { code: 'ENOENT', op: 'ipset.flush' } },
      { destroy: 'nosuch', is: { code: 'ENOENT', op: 'ipset.destroy', object: 'nosuch' } },
      { destroy: 'nosuch', exist: true },
      { rename: ['nosuch', 'y'], is: { code: 'ENOENT', op: 'ipset.rename' } },
      { swap: ['nosuch', 'x'], is: { code: 'ENOENT', op: 'ipset.swap' } },
      { swap: ['x', 'nosuch'], is: { code: 'IPSET_ERR_EXIST_SETNAME2', op: 'ipset.swap' } },
      { test: 'nosuch', entry: '10.0.0.1', is: { code: 'ENOENT', op: 'ipset.header' } },
      { header: 'nosuch', is: { code: 'ENOENT', op: 'ipset.header' } },
      { names: ['x'] },
    ],
  },
  {
    name: 'swap: contents and sizes change places (a set grown under another name); type and family must match',
    steps: [
      { create: ipPort('a', { maxElem: 65536 }) },
      { create: ipPort('KUBE-GROW-0', { maxElem: 131072 }) },
      { add: 'a', entries: ['10.0.0.1,tcp:80'], results: ['ok'] },
      { add: 'KUBE-GROW-0', entries: ['10.0.0.1,tcp:80', '10.0.0.2,tcp:80'], results: ['ok', 'ok'] },
      { swap: ['a', 'KUBE-GROW-0'] },
      { list: 'a', entries: ['10.0.0.1,tcp:80', '10.0.0.2,tcp:80'] },
      { list: 'KUBE-GROW-0', entries: ['10.0.0.1,tcp:80'] },
      { sets: { a: 'hash:ip,port family inet hashsize 1024 maxelem 131072', 'KUBE-GROW-0': 'hash:ip,port family inet hashsize 1024 maxelem 65536' } },
      { destroy: 'KUBE-GROW-0' },
      { create: hashIp('ip4') },
      { create: hashIp('ip6', { family: 'inet6' }) },
      { create: { name: 'net4', type: 'hash:net', family: 'inet' } },
      { swap: ['ip4', 'ip6'], is: { code: 'IPSET_ERR_TYPE_MISMATCH', op: 'ipset.swap', object: 'ip4 <-> ip6' } },
      { swap: ['ip4', 'net4'], is: 'IPSET_ERR_TYPE_MISMATCH' },
      { swap: ['a', 'ip4'], is: 'IPSET_ERR_TYPE_MISMATCH' },
      { create: hashIp('t', { timeout: 100 }) },
      { swap: ['ip4', 't'] },
      { create: { name: 'bp1', type: 'bitmap:port', range: { from: 0, to: 65535 } } },
      { create: { name: 'bp2', type: 'bitmap:port', range: { from: 1, to: 100 } } },
      { swap: ['bp1', 'bp2'] },
      {
        sets: {
          a: 'hash:ip,port family inet hashsize 1024 maxelem 131072',
          ip4: `${HASH_IP} timeout 100`,
          ip6: 'hash:ip family inet6 hashsize 1024 maxelem 65536',
          net4: 'hash:net family inet hashsize 1024 maxelem 65536',
          t: HASH_IP,
          bp1: 'bitmap:port range 1-100',
          bp2: 'bitmap:port range 0-65535',
        },
      },
    ],
  },
  {
    name: 'set names by index: a new set takes the first free one, rename keeps its place',
    steps: [
      { create: hashIp('s1') },
      { create: hashIp('s2') },
      { create: hashIp('s3') },
      { destroy: 's2' },
      { create: hashIp('s4') },
      { rename: ['s1', 's5'] },
      { rename: ['s5', 's3'], is: { code: 'IPSET_ERR_EXIST_SETNAME2', op: 'ipset.rename', object: 's5 -> s3' } },
      { names: ['s5', 's4', 's3'] },
      { header: 's5', is: { name: 's5', type: 'hash:ip', family: 'inet' } },
    ],
  },
  {
    name: 'flush empties a set and keeps it; destroy removes it',
    steps: [
      { create: hashIp('a') },
      { add: 'a', entries: ['10.0.0.1', '10.0.0.2'], results: ['ok', 'ok'] },
      { flush: 'a' },
      { list: 'a', entries: [] },
      { add: 'a', entries: ['10.0.0.1'], results: ['ok'] },
      { destroy: 'a' },
      { list: 'a', is: 'ENOENT' },
      { names: [] },
    ],
  },
  {
    name: 'a full hash refuses each entry past maxelem: IPSET_ERR_HASH_FULL',
    steps: [
      { create: hashIp('small', { maxElem: 4 }) },
      { add: 'small', entries: ['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4', '10.0.0.5', '10.0.0.6'], results: ['ok', 'ok', 'ok', 'ok', 'IPSET_ERR_HASH_FULL', { code: 'IPSET_ERR_HASH_FULL', object: 'small 10.0.0.6' }] },
      { add: 'small', entries: ['10.0.0.4'], exist: true, results: ['ok'] },
      { del: 'small', entries: ['10.0.0.1'], results: ['ok'] },
      { add: 'small', entries: ['10.0.0.6'], results: ['ok'] },
      { list: 'small', entries: ['10.0.0.2', '10.0.0.3', '10.0.0.4', '10.0.0.6'] },
    ],
  },
  {
    name: 'bitmap:port: a port outside the range is IPSET_ERR_BITMAP_RANGE',
    steps: [
      { create: { name: 'bp', type: 'bitmap:port', range: { from: 1000, to: 2000 } } },
      { add: 'bp', entries: ['999', '1000', '2001', '2000', 'tcp:1500'], results: ['IPSET_ERR_BITMAP_RANGE', 'ok', 'IPSET_ERR_BITMAP_RANGE', 'ok', 'ERR_INVALID_INPUT'] },
      { add: 'bp', entries: ['1000'], results: ['IPSET_ERR_EXIST'] },
      { test: 'bp', entry: '2000', is: true },
      { test: 'bp', entry: '1999', is: false },
      { list: 'bp', entries: ['1000', '2000'] },
    ],
  },
  {
    name: 'entry options: refused by a set without them; listed by a set with them',
    steps: [
      { create: hashIp('plain') },
      { add: 'plain', entries: ['10.0.0.1 timeout 5', '10.0.0.1 comment "x"', '10.0.0.1 packets 1'], results: ['IPSET_ERR_TIMEOUT', 'IPSET_ERR_COMMENT', 'IPSET_ERR_COUNTER'] },
      { create: hashIp('opts', { timeout: 600, comment: true, counters: true }) },
      { add: 'opts', entries: ['10.0.0.1 timeout 0 comment "pods of ns a"', '10.0.0.2 timeout 0 packets 5 bytes 700'], results: ['ok', 'ok'] },
      { list: 'opts', entries: ['10.0.0.1 timeout 0 packets 0 bytes 0 comment "pods of ns a"', '10.0.0.2 timeout 0 packets 5 bytes 700'] },
      { sets: { plain: HASH_IP, opts: `${HASH_IP} timeout 600 comment counters` } },
    ],
  },
];
