// The ipset kernel tests, shared by test/kernel/netns/ipset.test.ts (host kernel, fresh netns)
// and test/kernel/uml/ipset.test.ts (UML). Only for use after assertIsolated().
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';

import { NetlinkError, ValidationError, isExist, isNotFound } from '../../../src/kernel/errors.js';
import { NetlinkIpsetClient } from '../../../src/kernel/ipset/client.js';
import type { IpsetFamily, IpsetSetSpec, SetType } from '../../../src/kernel/ipset/types.js';
import { run } from './netns.js';

/** ipset(8), the independent cross-check. */
const ipset = (args: string[], input?: string) => run('ipset', args, input === undefined ? {} : { input });

/** `ipset save` of one set: its create line and its entries (kernel order). */
async function saved(name: string): Promise<{ create: string; entries: string[] }> {
  const lines = (await ipset(['save', name])).trim().split('\n');
  return { create: lines[0]!, entries: lines.slice(1).map((l) => l.slice(`add ${name} `.length)) };
}
const sorted = (a: readonly string[]) => [...a].sort();

interface Case {
  spec: IpsetSetSpec;
  /** Options as `ipset create` takes them. */
  create: string;
  entries: string[];
}
const set = (name: string, type: SetType, family: IpsetFamily, entries: string[], extra: Partial<IpsetSetSpec> = {}, create = ''): Case => ({
  spec: { name, type, family, ...extra },
  create: `${type} family ${family}${create}`,
  entries,
});
const CASES: Case[] = [
  set('ip4', 'hash:ip', 'inet', ['10.96.0.10', '10.96.0.11', '0.0.0.1']),
  set('ip6', 'hash:ip', 'inet6', ['fd00::a', '2001:db8::1', '::ffff:1.2.3.4']),
  set('ipport4', 'hash:ip,port', 'inet', ['10.0.0.1,tcp:80', '10.0.0.1,udp:53', '10.0.0.2,sctp:9', '10.0.0.3,udplite:7'], { hashSize: 2048, maxElem: 1000 }, ' hashsize 2048 maxelem 1000'),
  set('ipport6', 'hash:ip,port', 'inet6', ['fd00::1,tcp:80', 'fd00::1,udp:53', '2001:db8::1:0:0:1,tcp:65535']),
  set('ipportip4', 'hash:ip,port,ip', 'inet', ['10.0.0.1,tcp:80,10.0.0.2', '10.0.0.1,udp:53,192.168.0.1']),
  set('ipportip6', 'hash:ip,port,ip', 'inet6', ['fd00::1,tcp:80,fd00::2', '::ffff:1.2.3.4,udp:53,::1.2.3.4']),
  set('ipportnet4', 'hash:ip,port,net', 'inet', ['10.0.0.1,udp:53,10.0.0.0/8', '10.0.0.1,tcp:443,192.168.1.1', '10.0.0.9,tcp:22,10.1.0.0/16 nomatch']),
  set('ipportnet6', 'hash:ip,port,net', 'inet6', ['fd00::1,tcp:80,fd00:1::/64', 'fd00::1,tcp:81,fd00:2::1']),
  set('net4', 'hash:net', 'inet', ['10.0.0.0/24', '10.0.0.5', '10.1.0.0/16 nomatch', '0.0.0.0/1']),
  set('net6', 'hash:net', 'inet6', ['fd00::/64', 'fd00:1::1', 'fd00:2::/127']),
  set('timeouts', 'hash:ip,port', 'inet', ['10.0.0.1,tcp:80 timeout 0', '10.0.0.2,tcp:80 timeout 0'], { timeout: 600 }, ' timeout 600'),
  set('comments', 'hash:net', 'inet6', ['fd00::/64 comment "pods of ns a"', 'fd00:1::1 comment "x"'], { comment: true }, ' comment'),
  set('counters', 'hash:ip', 'inet', ['10.0.0.1 packets 5 bytes 700', '10.0.0.2 packets 0 bytes 0'], { counters: true }, ' counters'),
  { spec: { name: 'ports', type: 'bitmap:port', range: { from: 1, to: 1024 } }, create: 'bitmap:port range 1-1024', entries: ['80', '443', '1024', '1'] },
];

let client: NetlinkIpsetClient;

/** The ipset kernel tests; `where` names the kernel (host netns or UML). */
export function ipsetSuite(where: string): void {
  describe(`ipset client on ${where}`, () => {
    beforeAll(async () => {
      client = await NetlinkIpsetClient.open();
    });
    afterAll(() => client?.close());
    beforeEach(async () => {
      await ipset(['destroy']); // every set of this isolated namespace (a fresh netns, or UML)
    });

    it('negotiates protocol 7 (6 on kernels without it)', () => {
      expect([6, 7]).toContain(client.protocol);
    });

    it.each(CASES.map((c) => [c.spec.name, c] as const))('%s: what the client writes, `ipset save` reads exactly', async (_n, c) => {
      await client.create(c.spec);
      const results = await client.add(c.spec.name, c.entries);
      expect(results.filter((r) => !r.ok)).toEqual([]);
      const s = await saved(c.spec.name);
      expect(sorted(s.entries)).toEqual(sorted(c.entries));
      const want = c.spec.type === 'bitmap:port' ? c.create : c.create.replace(/ hashsize \d+ maxelem \d+/, '');
      for (const word of want.split(' ')) expect(s.create.split(' '), c.spec.name).toContain(word);
    });

    it.each(CASES.map((c) => [c.spec.name, c] as const))('%s: what `ipset restore` writes, the client reads exactly', async (_n, c) => {
      await ipset(['restore'], [`create ${c.spec.name} ${c.create}`, ...c.entries.map((e) => `add ${c.spec.name} ${e}`), ''].join('\n'));
      const [info] = await client.list(c.spec.name);
      const s = await saved(c.spec.name);
      expect(info!.entries).toEqual(s.entries);
      expect(sorted(info!.entries)).toEqual(sorted(c.entries));
      const rev = Number(/Revision: (\d+)/.exec(await ipset(['list', '-t', c.spec.name]))![1]);
      expect(info).toMatchObject({ name: c.spec.name, type: c.spec.type, revision: rev, references: 0 });
      expect(info!.family).toBe(c.spec.type === 'bitmap:port' ? null : c.spec.family);
      if (c.spec.type === 'bitmap:port') expect(info!.range).toEqual(c.spec.range);
      else expect(s.create).toContain(`hashsize ${info!.hashSize} maxelem ${info!.maxElem}`);
      expect(info!.timeout).toBe(c.spec.timeout ?? null);
      expect(info!.comment).toBe(c.spec.comment ?? false);
      expect(info!.counters).toBe(c.spec.counters ?? false);
    });

    it('creates sets with the revision ipset(8) picks', async () => {
      for (const c of CASES) await client.create(c.spec);
      const names = CASES.map((c) => c.spec.name).join(' ');
      await ipset(['restore'], CASES.map((c) => `create x-${c.spec.name} ${c.create}`).join('\n') + '\n');
      const revisions = (await ipset(['list', '-t'])).split('\n\n').map((b) => [/Name: (\S+)/.exec(b)?.[1], /Revision: (\d+)/.exec(b)?.[1]]);
      const rev = new Map(revisions);
      for (const n of names.split(' ')) expect(rev.get(n), n).toBe(rev.get(`x-${n}`));
    });

    it('lists sets of types it does not write as ipset prints them', async () => {
      const text = ['create np hash:net,port family inet', 'add np 10.0.0.0/8,udp:53', 'add np 10.1.0.0/16,tcp:80', 'create ni hash:net,iface family inet6',
        'add ni fd00::/64,eth0', 'create bi bitmap:ip range 10.0.0.0/24', 'add bi 10.0.0.7', 'create l list:set', 'add l np', ''];
      await ipset(['restore'], text.join('\n'));
      try {
        const sets = await client.list();
        expect(sets.map((x) => x.name)).toEqual(['np', 'ni', 'bi', 'l']);
        for (const x of sets) expect(x.entries, x.name).toEqual((await saved(x.name)).entries);
        expect(sets[0]!.references).toBe(1);
        await expect(client.add('np', ['10.2.0.0/16,udp:53'])).rejects.toThrow(/set type hash:net,port is not supported/);
      } finally {
        await ipset(['flush', 'l']);
      }
    });

    it('a mixed batch: each entry reported, every valid one applied', async () => {
      await client.create({ name: 'mixed', type: 'hash:ip,port', family: 'inet' });
      await client.add('mixed', ['10.0.0.2,tcp:80']);
      const entries = ['10.0.0.1,tcp:80', '10.0.0.2,tcp:80', 'nonsense', '10.0.0.3,udp:53', '10.0.0.4,tcp:99999', '10.0.0.3,udp:53', '10.0.0.5,sctp:1'];
      const results = await client.add('mixed', entries);
      expect(results.map((r) => (r.ok ? 'ok' : r.error instanceof NetlinkError ? r.error.code : r.error.name))).toEqual([
        'ok',
        'IPSET_ERR_EXIST',
        'ValidationError',
        'ok',
        'ValidationError',
        'IPSET_ERR_EXIST',
        'ok',
      ]);
      expect((results[1] as { error: NetlinkError }).error.object).toBe('mixed 10.0.0.2,tcp:80');
      expect(isExist((results[5] as { error: unknown }).error)).toBe(true);
      expect(sorted((await saved('mixed')).entries)).toEqual(['10.0.0.1,tcp:80', '10.0.0.2,tcp:80', '10.0.0.3,udp:53', '10.0.0.5,sctp:1']);
      expect((await client.add('mixed', entries.filter((_, i) => i !== 2 && i !== 4), { exist: true })).every((r) => r.ok)).toBe(true);

      const del = await client.del('mixed', ['10.0.0.1,tcp:80', '10.0.0.9,tcp:80', '10.0.0.3,udp:53']);
      expect(del.map((r) => r.ok)).toEqual([true, false, true]);
      expect(isNotFound((del[1] as { error: unknown }).error)).toBe(true);
      expect((await client.del('mixed', ['10.0.0.9,tcp:80'], { exist: true }))[0]).toEqual({ ok: true });
      expect(sorted((await saved('mixed')).entries)).toEqual(['10.0.0.2,tcp:80', '10.0.0.5,sctp:1']);
    });

    it('type-specific errors per entry: a full hash, a port outside the bitmap', async () => {
      await client.create({ name: 'small', type: 'hash:ip', family: 'inet', maxElem: 4 });
      const full = await client.add('small', Array.from({ length: 6 }, (_, i) => `10.0.0.${i + 1}`));
      expect(full.map((r) => (r.ok ? 'ok' : (r.error as NetlinkError).code))).toEqual(['ok', 'ok', 'ok', 'ok', 'IPSET_ERR_HASH_FULL', 'IPSET_ERR_HASH_FULL']);
      await client.create({ name: 'bp', type: 'bitmap:port', range: { from: 1000, to: 2000 } });
      const range = await client.add('bp', ['999', '1000', '2001', '2000']);
      expect(range.map((r) => (r.ok ? 'ok' : (r.error as NetlinkError).code))).toEqual(['IPSET_ERR_BITMAP_RANGE', 'ok', 'IPSET_ERR_BITMAP_RANGE', 'ok']);
      const timeout = await client.add('small', ['10.0.0.1 timeout 5']);
      expect((timeout[0] as { error: NetlinkError }).error.code).toBe('IPSET_ERR_TIMEOUT');
    });

    it('test: in set, not in set, missing set', async () => {
      await ipset(['restore'], 'create t hash:ip,port,net family inet6\nadd t fd00::1,tcp:80,fd00:1::/64\n');
      expect(await client.test('t', 'fd00::1,tcp:80,fd00:1::/64')).toBe(true);
      expect(await client.test('t', 'fd00::1,tcp:80,fd00:1::5')).toBe(true); // inside the network, as `ipset test` says
      expect(await client.test('t', 'fd00::1,udp:80,fd00:1::/64')).toBe(false);
      await expect(client.test('nosuch', '1.2.3.4')).rejects.toMatchObject({ code: 'ENOENT', op: 'ipset.header' });
      await expect(client.test('t', '10.0.0.1,tcp:80,10.0.0.0/8')).rejects.toBeInstanceOf(ValidationError);
    });

    it('swap, rename, flush, destroy, and their errors', async () => {
      await client.create({ name: 'a', type: 'hash:ip', family: 'inet' });
      await client.create({ name: 'b', type: 'hash:ip', family: 'inet' });
      await client.add('a', ['10.0.0.1']);
      await client.add('b', ['10.0.0.2', '10.0.0.3']);
      await client.swap('a', 'b');
      expect((await saved('a')).entries.sort()).toEqual(['10.0.0.2', '10.0.0.3']);
      expect((await saved('b')).entries).toEqual(['10.0.0.1']);
      await expect(client.create({ name: 'a', type: 'hash:ip', family: 'inet' })).rejects.toMatchObject({ code: 'EEXIST' });
      await client.create({ name: 'a', type: 'hash:ip', family: 'inet' }, { exist: true });
      await client.create({ name: 'v6', type: 'hash:ip', family: 'inet6' });
      await expect(client.swap('a', 'v6')).rejects.toMatchObject({ code: 'IPSET_ERR_TYPE_MISMATCH' });
      await expect(client.swap('a', 'nosuch')).rejects.toMatchObject({ code: 'IPSET_ERR_EXIST_SETNAME2' });
      await client.rename('b', 'c');
      await expect(client.rename('a', 'c')).rejects.toMatchObject({ code: 'IPSET_ERR_EXIST_SETNAME2' });
      expect(await client.listNames()).toEqual(['a', 'c', 'v6']);
      expect(await client.header('c')).toEqual({ name: 'c', type: 'hash:ip', family: 'inet', revision: expect.any(Number) });
      await client.flush('a');
      expect((await saved('a')).entries).toEqual([]);
      await client.destroy('c');
      await expect(client.destroy('c')).rejects.toMatchObject({ code: 'ENOENT', op: 'ipset.destroy', object: 'c' });
      await client.destroy('c', { exist: true });
      expect((await client.list()).map((s) => s.name)).toEqual(['a', 'v6']);
      await expect(client.list('c')).rejects.toMatchObject({ code: 'ENOENT' });
    });

    it('listHeaders: every set with its sizes and no entries, as `ipset list -t` prints them', async () => {
      await ipset(['restore'], 'create h1 hash:ip,port family inet hashsize 2048 maxelem 131072\nadd h1 10.0.0.1,tcp:80\ncreate h2 bitmap:port range 0-65535\nadd h2 80\n');
      const headers = await client.listHeaders();
      expect(headers.map((h) => [h.name, h.type, h.maxElem, h.range, h.entries])).toEqual([
        ['h1', 'hash:ip,port', 131072, null, []],
        ['h2', 'bitmap:port', null, { from: 0, to: 65535 }, []],
      ]);
      const text = await ipset(['list', '-t', 'h1']);
      expect(text).toContain(`hashsize ${headers[0]!.hashSize} maxelem 131072`);
    });

    it('validates before any I/O', async () => {
      await expect(client.create({ name: 'x'.repeat(32), type: 'hash:ip' })).rejects.toBeInstanceOf(ValidationError);
      await expect(client.create({ name: 'p', type: 'bitmap:port' })).rejects.toThrow(/range: bitmap:port needs a range/);
      await expect(client.create({ name: 'p', type: 'hash:ip', range: { from: 1, to: 2 } })).rejects.toThrow(/takes no range/);
      await expect(client.create({ name: 'p', type: 'hash:mac' as SetType })).rejects.toBeInstanceOf(ValidationError);
      await expect(client.destroy('')).rejects.toBeInstanceOf(ValidationError);
      expect(await ipset(['list', '-n'])).toBe('');
    });

    it('20,000 entries: batched in, listed completely (a multi-message dump), both ways', async () => {
      const entries = Array.from({ length: 20000 }, (_, i) => `10.${i >> 16}.${(i >> 8) & 255}.${i & 255},${i % 2 ? 'udp' : 'tcp'}:${1 + (i % 5000)}`);
      await client.create({ name: 'big', type: 'hash:ip,port', family: 'inet', hashSize: 32768, maxElem: 65536 });
      const results = await client.add('big', entries);
      expect(results.every((r) => r.ok)).toBe(true);
      const s = await saved('big');
      expect(s.entries).toHaveLength(20000);
      const [info] = await client.list('big');
      expect(info!.entries).toEqual(s.entries);
      expect(sorted(info!.entries)).toEqual(sorted(entries));

      const v6 = Array.from({ length: 20000 }, (_, i) => `fd00::${i.toString(16)},tcp:${i % 65536},fd01::/${1 + (i % 128)}`);
      await ipset(['restore'], `create big6 hash:ip,port,net family inet6 maxelem 65536\n${v6.map((e) => `add big6 ${e}`).join('\n')}\n`);
      const all = await client.list();
      const big6 = all.find((x) => x.name === 'big6')!;
      expect(big6.entries).toEqual((await saved('big6')).entries);
      expect(big6.entries).toHaveLength(20000);
      expect(all.find((x) => x.name === 'big')!.entries).toHaveLength(20000);
    });
  });
}
