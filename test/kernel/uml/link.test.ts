import { assertIsolated } from '../lib/guard.js';
assertIsolated();

// The link client inside User-Mode Linux (which has the dummy module): the case table the fake
// runs too; kube-ipvs0 cross-checked with iproute2; batched v4+v6 addresses cross-checked both
// ways with iproute2; the addresses of a down dummy are local (traffic to them is accepted).
import { afterAll, afterEach, describe, expect, it } from 'vitest';

import { NetlinkError, isExist } from '../../../src/kernel/errors.js';
import { DEFAULT_DUMMY_LINK, NetlinkLinkClient } from '../../../src/kernel/link.js';
import { LINK_CASES, runLinkCase, type LinkWorld } from '../lib/cases/link-cases.js';
import { NetLab, connectMany, delLink, run } from '../lib/netns.js';

const client = NetlinkLinkClient.open();
const lab = new NetLab();

/** `ip -o addr show dev X` as "address/prefix" strings. */
async function ipAddrs(dev: string): Promise<string[]> {
  const out = await run('ip', ['-o', 'addr', 'show', 'dev', dev]);
  return out
    .split('\n')
    .filter(Boolean)
    .map((l) => /\binet6?\s+(\S+)/.exec(l)![1]!);
}

const codes = (rs: ReadonlyArray<{ ok: boolean; error?: unknown }>) => rs.map((r) => (r.ok ? 'ok' : (r.error as NetlinkError).code));

afterAll(async () => {
  await lab.cleanup();
  await delLink(DEFAULT_DUMMY_LINK);
  client.close();
});

/** What another program does to links: iproute2. */
const iproute2: LinkWorld = {
  addLink: async (name, kind) => void (await run('ip', ['link', 'add', name, 'type', kind, ...(kind === 'veth' ? ['peer', 'name', `${name}p`] : [])])),
  addStaticRoute: async (dev, address) => void (await run('ip', ['route', 'add', 'local', address, 'dev', dev, 'table', 'local', 'proto', 'static'])),
};

describe('the link case table (the fake runs it too: test/unit/link-fake.test.ts)', () => {
  afterEach(async () => {
    const links = (await run('ip', ['-o', 'link', 'show'])).split('\n').map((l) => /^\d+: ([^:@]+)/.exec(l)?.[1]).filter((n): n is string => !!n);
    for (const l of links.filter((n) => n === DEFAULT_DUMMY_LINK || n.startsWith('kipc'))) await delLink(l);
  });
  it.each(LINK_CASES.map((c) => [c.name, c] as const))('%s', (_name, c) => runLinkCase(client, iproute2, c));
});

describe('the dummy link', () => {
  it('creates kube-ipvs0 as a dummy, left down; a second call adopts it', async () => {
    const first = await client.ensureDummy();
    expect(first).toMatchObject({ created: true, link: { name: 'kube-ipvs0', kind: 'dummy', up: false } });
    const shown = await run('ip', ['-d', 'link', 'show', 'kube-ipvs0']);
    expect(shown).toMatch(new RegExp(`^${first.link.index}: kube-ipvs0: <BROADCAST,NOARP> .* state DOWN`, 'm'));
    expect(shown).toMatch(/^\s+dummy /m);
    const again = await client.ensureDummy('kube-ipvs0');
    expect(again).toEqual({ created: false, link: first.link });
    expect(await client.getLink('kube-ipvs0')).toEqual(first.link);
  });
});

describe('addresses on kube-ipvs0', () => {
  afterEach(async () => {
    await run('ip', ['addr', 'flush', 'dev', 'kube-ipvs0']);
  });

  it('adds v4 and v6 in one batch; iproute2 sees them as /32 and /128, routed locally', async () => {
    const v4 = Array.from({ length: 40 }, (_, i) => `10.96.${i >> 4}.${(i & 15) + 1}`);
    const v6 = Array.from({ length: 40 }, (_, i) => `fd00:96::${(i + 1).toString(16)}`);
    const all = v4.flatMap((a, i) => [a, v6[i]!]);
    const results = await client.addAddresses('kube-ipvs0', all);
    expect(codes(results).filter((c) => c !== 'ok')).toEqual([]);
    expect(results.map((r) => r.address)).toEqual(all);

    const shown = await ipAddrs('kube-ipvs0');
    expect(shown.sort()).toEqual([...v4.map((a) => `${a}/32`), ...v6.map((a) => `${a}/128`)].sort());
    expect(await run('ip', ['-6', 'addr', 'show', 'dev', 'kube-ipvs0'])).not.toMatch(/tentative|dadfailed/);
    expect(await run('ip', ['route', 'get', '10.96.0.1'])).toMatch(/^local 10\.96\.0\.1 dev lo/);
    expect(await run('ip', ['-6', 'route', 'get', 'fd00:96::1'])).toMatch(/^local fd00:96::1 /);
    expect(new Set(await client.listAddresses('kube-ipvs0'))).toEqual(new Set(all));
  });

  it('reads back exactly what `ip addr add` wrote, and deletes it', async () => {
    const written = ['10.96.2.1', '10.96.2.200', '2001:db8:0:0:0:0:0:7', 'FD00:96:2::A', 'fd00:96:2:0:1:2:3:4'];
    for (const a of written) await run('ip', ['addr', 'add', `${a}/${a.includes(':') ? 128 : 32}`, 'dev', 'kube-ipvs0']);
    const expected = ['10.96.2.1', '10.96.2.200', '2001:db8::7', 'fd00:96:2::a', 'fd00:96:2:0:1:2:3:4'];
    expect((await client.listAddresses('kube-ipvs0')).sort()).toEqual(expected.sort());
    expect(codes(await client.deleteAddresses('kube-ipvs0', written))).toEqual(['ok', 'ok', 'ok', 'ok', 'ok']);
    expect(await ipAddrs('kube-ipvs0')).toEqual([]);
  });

  it('accepts traffic to its addresses while the link is down', async () => {
    await client.addAddresses('kube-ipvs0', ['10.96.3.1', 'fd00:96:3::1']);
    expect((await client.getLink('kube-ipvs0'))?.up).toBe(false);
    await lab.echoServer({ name: 'on-dummy', host: '10.96.3.1', port: 8080 });
    await lab.echoServer({ name: 'on-dummy6', host: 'fd00:96:3::1', port: 8080 });
    expect(await connectMany({ host: '10.96.3.1', port: 8080, count: 2 })).toEqual(['on-dummy', 'on-dummy']);
    expect(await connectMany({ host: 'fd00:96:3::1', port: 8080, count: 1 })).toEqual(['on-dummy6']);
  });

  it('a batch over several sendmsg chunks (acks asked only of each chunk\'s last) reports every failure at its index', async () => {
    const all = Array.from({ length: 2600 }, (_, i) => `10.101.${i >> 8}.${i & 255}`);
    // Already bound: the first, the last, and every 97th (some at or next to a chunk's end).
    const taken = all.filter((_, i) => i === 0 || i === all.length - 1 || i % 97 === 96 || i === 1023 || i === 1024);
    await client.addAddresses('kube-ipvs0', taken);
    const results = await client.addAddresses('kube-ipvs0', all);
    const failed = results.flatMap((r, i) => (r.ok ? [] : [i]));
    expect(failed.map((i) => all[i])).toEqual(taken);
    expect(results.filter((r) => !r.ok).every((r) => !r.ok && isExist(r.error) && r.error.message.includes('dev kube-ipvs0'))).toBe(true);
    expect(await ipAddrs('kube-ipvs0')).toHaveLength(all.length);
    // Every delete succeeds but those of the addresses removed first.
    await client.deleteAddresses('kube-ipvs0', taken);
    const del = await client.deleteAddresses('kube-ipvs0', all);
    expect(del.flatMap((r, i) => (r.ok ? [] : [all[i]]))).toEqual(taken);
    expect(await ipAddrs('kube-ipvs0')).toEqual([]);
  });

  it('binds 1,000 addresses in one call', async () => {
    const unique = Array.from({ length: 1000 }, (_, i) => `10.100.${i >> 8}.${i & 255}`);
    const t0 = performance.now();
    const added = await client.addAddresses('kube-ipvs0', unique);
    const ms = performance.now() - t0;
    expect(codes(added).filter((c) => c !== 'ok')).toEqual([]);
    expect(await ipAddrs('kube-ipvs0')).toHaveLength(unique.length);
    console.log(`link: ${unique.length} addresses added in ${ms.toFixed(0)} ms (UML)`);
    expect(codes(await client.deleteAddresses('kube-ipvs0', unique)).filter((c) => c !== 'ok')).toEqual([]);
  });
});

describe('local addresses and cleanup', () => {
  it('lists the node addresses (uml0) but not the dummy ones', async () => {
    await client.addAddresses('kube-ipvs0', ['10.96.4.1', 'fd00:96:4::1']);
    const local = await client.localAddresses({ exclude: ['kube-ipvs0'] });
    expect(local).toContainEqual({ address: '10.255.255.1', family: 'ipv4', interface: 'uml0' });
    const text = JSON.stringify(local);
    for (const gone of ['10.96.4.1', 'fd00:96:4::1', '127.0.0.1', 'fe80:']) expect(text).not.toContain(gone);
    expect(await client.localAddresses()).toContainEqual({ address: '10.96.4.1', family: 'ipv4', interface: 'kube-ipvs0' });
  });

  it('deletes kube-ipvs0 with its addresses; a second delete finds nothing', async () => {
    expect(await client.deleteLink('kube-ipvs0', { kind: 'dummy' })).toBe(true);
    expect(await client.getLink('kube-ipvs0')).toBeNull();
    await expect(run('ip', ['link', 'show', 'kube-ipvs0'])).rejects.toThrow(/does not exist/);
    expect(await run('ip', ['route', 'get', '10.96.4.1'])).not.toMatch(/^local/);
    expect(await client.deleteLink('kube-ipvs0')).toBe(false);
    await expect(client.addAddresses('kube-ipvs0', ['10.96.4.2'])).rejects.toMatchObject({ code: 'ENODEV' });
  });
});
