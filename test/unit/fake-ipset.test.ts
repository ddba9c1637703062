// FakeIpsetClient: the ipset case table the kernel runs too (test/kernel/lib/ipset-suite.ts), then
// what only the fake has (fault injection, counters of calls and entries, members()).
import { describe, expect, it } from 'vitest';

import { NetlinkError } from '../../src/kernel/errors.js';
import { FakeIpsetClient } from '../../src/kernel/ipset/fake.js';
import type { IpsetEntryResult } from '../../src/kernel/ipset/types.js';
import { IPSET_CASES, runIpsetCase } from '../kernel/lib/cases/ipset-cases.js';

const codes = (rs: IpsetEntryResult[]) => rs.map((r) => (r.ok ? 'ok' : r.error instanceof NetlinkError ? r.error.code : r.error.name));

describe('FakeIpsetClient: the ipset case table', () => {
  it.each(IPSET_CASES.map((c) => [c.name, c] as const))('%s', (_name, c) => runIpsetCase(new FakeIpsetClient(), c));
});

describe('FakeIpsetClient', () => {
  it('members(): the canonical elements of a set, undefined for a missing one', async () => {
    const c = new FakeIpsetClient();
    await c.create({ name: 'net', type: 'hash:net', family: 'inet' });
    await c.add('net', ['10.1.2.3/16', '10.2.0.1']);
    expect(c.members('net')).toEqual(['10.1.0.0/16', '10.2.0.1']);
    expect(c.members('nosuch')).toBeUndefined();
  });

  it('injects entry faults and call faults; counts calls and entries', async () => {
    const c = new FakeIpsetClient();
    await c.create({ name: 's', type: 'hash:ip' });
    c.failEntries('ENOMEM', (op, _set, e) => op === 'add' && e === '10.0.0.2');
    expect(codes(await c.add('s', ['10.0.0.1', '10.0.0.2', '10.0.0.3']))).toEqual(['ok', 'ENOMEM', 'ok']);
    c.failCall('del', new Error('boom'));
    await expect(c.del('s', ['10.0.0.1'])).rejects.toThrow('boom');
    expect(c.calls).toMatchObject({ create: 1, add: 1, del: 1 });
    expect(c.entries).toEqual({ add: 3, del: 0 });
    c.resetCounters();
    expect(c.calls.add).toBe(0);
  });
});
