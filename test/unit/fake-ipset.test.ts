// The in-memory IpsetClient answers as the kernel does in test/kernel/lib/ipset-suite.ts.
import { describe, expect, it } from 'vitest';

import { NetlinkError, ValidationError, isExist, isNotFound } from '../../src/kernel/errors.js';
import { FakeIpsetClient } from '../../src/kernel/ipset/fake.js';
import type { IpsetEntryResult } from '../../src/kernel/ipset/types.js';

const codes = (rs: IpsetEntryResult[]) => rs.map((r) => (r.ok ? 'ok' : r.error instanceof NetlinkError ? r.error.code : r.error.name));

describe('FakeIpsetClient', () => {
  it('a mixed batch: each entry reported, every valid one applied (as the kernel suite)', async () => {
    const c = new FakeIpsetClient();
    await c.create({ name: 'mixed', type: 'hash:ip,port', family: 'inet' });
    await c.add('mixed', ['10.0.0.2,tcp:80']);
    const entries = ['10.0.0.1,tcp:80', '10.0.0.2,tcp:80', 'nonsense', '10.0.0.3,udp:53', '10.0.0.4,tcp:99999', '10.0.0.3,udp:53', '10.0.0.5,sctp:1'];
    const results = await c.add('mixed', entries);
    expect(codes(results)).toEqual(['ok', 'IPSET_ERR_EXIST', 'ValidationError', 'ok', 'ValidationError', 'IPSET_ERR_EXIST', 'ok']);
    expect((results[1] as { error: NetlinkError }).error).toMatchObject({ object: 'mixed 10.0.0.2,tcp:80', op: 'ipset.add', errno: 4103 });
    expect(isExist((results[5] as { error: unknown }).error)).toBe(true);
    expect(c.members('mixed')!.sort()).toEqual(['10.0.0.1,tcp:80', '10.0.0.2,tcp:80', '10.0.0.3,udp:53', '10.0.0.5,sctp:1']);
    expect((await c.add('mixed', entries.filter((_, i) => i !== 2 && i !== 4), { exist: true })).every((r) => r.ok)).toBe(true);

    const del = await c.del('mixed', ['10.0.0.1,tcp:80', '10.0.0.9,tcp:80', '10.0.0.3,udp:53']);
    expect(codes(del)).toEqual(['ok', 'IPSET_ERR_EXIST', 'ok']);
    expect(isNotFound((del[1] as { error: unknown }).error)).toBe(true);
    expect(isExist((del[1] as { error: unknown }).error)).toBe(false);
    expect((await c.del('mixed', ['10.0.0.9,tcp:80'], { exist: true }))[0]).toEqual({ ok: true });
    expect((await c.list('mixed'))[0]!.entries.sort()).toEqual(['10.0.0.2,tcp:80', '10.0.0.5,sctp:1']);
  });

  it('entries are keyed by their canonical element: default protocol, host bits of a network, IPv6 text', async () => {
    const c = new FakeIpsetClient();
    await c.create({ name: 'ipp', type: 'hash:ip,port', family: 'inet' });
    await c.create({ name: 'net', type: 'hash:net', family: 'inet' });
    await c.create({ name: 'v6', type: 'hash:ip,port,net', family: 'inet6' });
    expect(codes(await c.add('ipp', ['10.0.0.1,80', '10.0.0.1,tcp:80']))).toEqual(['ok', 'IPSET_ERR_EXIST']);
    expect(codes(await c.add('net', ['10.1.2.3/16', '10.1.0.0/16', '10.2.0.1']))).toEqual(['ok', 'IPSET_ERR_EXIST', 'ok']);
    expect(c.members('net')).toEqual(['10.1.0.0/16', '10.2.0.1']);
    expect(codes(await c.add('v6', ['FD00:0::1,udp:53,fd00:1::5/64']))).toEqual(['ok']);
    expect(c.members('v6')).toEqual(['fd00::1,udp:53,fd00:1::/64']);
    expect(await c.test('v6', 'fd00::1,udp:53,fd00:1::/64')).toBe(true);
    expect(await c.test('ipp', '10.0.0.1,udp:80')).toBe(false);
    await expect(c.test('ipp', 'fd00::1,tcp:80')).rejects.toBeInstanceOf(ValidationError);
  });

  it('type-specific errors: a full hash, a port outside the bitmap, options the set lacks', async () => {
    const c = new FakeIpsetClient();
    await c.create({ name: 'small', type: 'hash:ip', family: 'inet', maxElem: 4 });
    expect(codes(await c.add('small', Array.from({ length: 6 }, (_, i) => `10.0.0.${i + 1}`)))).toEqual(['ok', 'ok', 'ok', 'ok', 'IPSET_ERR_HASH_FULL', 'IPSET_ERR_HASH_FULL']);
    await c.create({ name: 'bp', type: 'bitmap:port', range: { from: 1000, to: 2000 } });
    expect(codes(await c.add('bp', ['999', '1000', '2001', '2000']))).toEqual(['IPSET_ERR_BITMAP_RANGE', 'ok', 'IPSET_ERR_BITMAP_RANGE', 'ok']);
    expect(codes(await c.add('small', ['10.0.0.1 timeout 5', '10.0.0.1 comment "x"', '10.0.0.1 packets 1']))).toEqual(['IPSET_ERR_TIMEOUT', 'IPSET_ERR_COMMENT', 'IPSET_ERR_COUNTER']);
    await c.create({ name: 't', type: 'hash:ip', timeout: 60, comment: true });
    await c.add('t', ['10.0.0.1', '10.0.0.2 timeout 5 comment "kube"']);
    expect((await c.list('t'))[0]!.entries).toEqual(['10.0.0.1 timeout 60', '10.0.0.2 timeout 5 comment "kube"']);
  });

  it('listHeaders: every set with its sizes and no entries (as the kernel suite)', async () => {
    const c = new FakeIpsetClient();
    await c.create({ name: 'h1', type: 'hash:ip,port', family: 'inet', hashSize: 2048, maxElem: 131072 });
    await c.add('h1', ['10.0.0.1,tcp:80']);
    await c.create({ name: 'h2', type: 'bitmap:port', range: { from: 0, to: 65535 } });
    await c.add('h2', ['80']);
    expect((await c.listHeaders()).map((h) => [h.name, h.type, h.maxElem, h.range, h.entries])).toEqual([
      ['h1', 'hash:ip,port', 131072, null, []],
      ['h2', 'bitmap:port', null, { from: 0, to: 65535 }, []],
    ]);
  });

  it('set commands and their errors: EEXIST, ENOENT, SETNAME2, TYPE_MISMATCH; a missing set in add is ENOENT from the header lookup', async () => {
    const c = new FakeIpsetClient();
    await c.create({ name: 'a', type: 'hash:ip', family: 'inet' });
    await c.create({ name: 'b', type: 'hash:ip', family: 'inet' });
    await c.add('a', ['10.0.0.1']);
    await c.add('b', ['10.0.0.2', '10.0.0.3']);
    await c.swap('a', 'b');
    expect(c.members('a')).toEqual(['10.0.0.2', '10.0.0.3']);
    expect(c.members('b')).toEqual(['10.0.0.1']);
    await expect(c.create({ name: 'a', type: 'hash:ip', family: 'inet' })).rejects.toMatchObject({ code: 'EEXIST', errno: 17 });
    await c.create({ name: 'a', type: 'hash:ip', family: 'inet' }, { exist: true });
    await expect(c.create({ name: 'a', type: 'hash:ip', family: 'inet', maxElem: 9 }, { exist: true })).rejects.toMatchObject({ code: 'EEXIST' });
    await c.create({ name: 'v6', type: 'hash:ip', family: 'inet6' });
    await expect(c.swap('a', 'v6')).rejects.toMatchObject({ code: 'IPSET_ERR_TYPE_MISMATCH' });
    await expect(c.swap('a', 'nosuch')).rejects.toMatchObject({ code: 'IPSET_ERR_EXIST_SETNAME2' });
    await c.rename('b', 'c');
    await expect(c.rename('a', 'c')).rejects.toMatchObject({ code: 'IPSET_ERR_EXIST_SETNAME2' });
    expect(await c.listNames()).toEqual(['a', 'v6', 'c']);
    expect(await c.header('c')).toEqual({ name: 'c', type: 'hash:ip', family: 'inet', revision: expect.any(Number) });
    await c.flush('a');
    expect(c.members('a')).toEqual([]);
    await c.destroy('c');
    await expect(c.destroy('c')).rejects.toMatchObject({ code: 'ENOENT', op: 'ipset.destroy', object: 'c' });
    await c.destroy('c', { exist: true });
    await expect(c.list('c')).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(c.add('c', ['10.0.0.1'])).rejects.toMatchObject({ code: 'ENOENT', op: 'ipset.header' });
    expect(await c.add('c', [])).toEqual([]);
    await expect(c.create({ name: 'x'.repeat(32), type: 'hash:ip' })).rejects.toBeInstanceOf(ValidationError);
    await expect(c.create({ name: 'p', type: 'bitmap:port' })).rejects.toThrow(/range: bitmap:port needs a range/);
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
