// The ipset kernel tests, shared by test/kernel/netns/ipset.test.ts (host kernel, fresh netns)
// and test/kernel/uml/ipset.test.ts (UML): the case table the fake runs too, and cross-checks
// both ways with ipset(8). Only for use after assertIsolated().
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';

import { ValidationError } from '../../../src/kernel/errors.js';
import { NetlinkIpsetClient } from '../../../src/kernel/ipset/client.js';
import type { IpsetFamily, IpsetSetSpec, SetType } from '../../../src/kernel/ipset/types.js';
import { IPSET_CASES, runIpsetCase } from './cases/ipset-cases.js';
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

    it.each(IPSET_CASES.map((c) => [c.name, c] as const))('case table: %s', (_name, c) => runIpsetCase(client, c));

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
