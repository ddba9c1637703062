import { assertIsolated } from '../lib/guard.js';
assertIsolated();

// The link client against the host kernel, in a fresh network namespace. The host kernel has
// no dummy links (CONFIG_DUMMY off), so addresses are exercised on a veth pair, and
// ensureDummy must fail cleanly.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { NetlinkError, ValidationError, isExist, isNotFound } from '../../../src/kernel/errors.js';
import { LinkKindError, NetlinkLinkClient } from '../../../src/kernel/link.js';
import { dumpLocalRoutesRequest, parseRoute } from '../../../src/kernel/link/codec.js';
import { constantsOf, native, type NlMessage } from '../../../src/native/binding.js';
import { CLI } from '../lib/daemon.js';
import { delLink, run } from '../lib/netns.js';

const client = NetlinkLinkClient.open();
let hostHasDummy = false;

/** `ip -o addr show dev X` as "address/prefix flags..." lines. */
async function ipAddrs(dev: string): Promise<string[]> {
  const out = await run('ip', ['-o', 'addr', 'show', 'dev', dev]);
  return out
    .split('\n')
    .filter(Boolean)
    .map((l) => l.replace(/^\d+:\s+\S+\s+inet6?\s+/, '').replace(/\\.*$/, '').trim());
}

async function veth(a: string, b: string): Promise<void> {
  await run('ip', ['link', 'add', 'name', a, 'type', 'veth', 'peer', 'name', b]);
}

beforeAll(async () => {
  hostHasDummy = await run('ip', ['link', 'add', 'name', 'kip-probe', 'type', 'dummy']).then(
    () => true,
    () => false,
  );
  if (hostHasDummy) await delLink('kip-probe');
});

afterAll(async () => {
  for (const l of ['kipa', 'kipc', 'kube-ipvs0', 'kip-probe']) await delLink(l);
  client.close();
});

describe('links', () => {
  it('gets lo by name; null for a missing link; refuses invalid names', async () => {
    expect(await client.getLink('lo')).toEqual({ index: 1, name: 'lo', kind: null, up: true });
    expect(await client.getLink('kip-nosuch')).toBeNull();
    await expect(client.getLink('bad/name')).rejects.toThrow(ValidationError);
    await expect(client.getLink('x'.repeat(16))).rejects.toThrow(/name/);
  });

  it('ensureDummy fails with a typed error when the kernel has no dummy links', async () => {
    if (hostHasDummy) {
      const r = await client.ensureDummy();
      expect(r.link.kind).toBe('dummy');
      expect(await client.deleteLink('kube-ipvs0', { kind: 'dummy' })).toBe(true);
      return;
    }
    const e = await client.ensureDummy().then(
      () => null,
      (x: unknown) => x,
    );
    expect(e).toBeInstanceOf(NetlinkError);
    expect(e).toMatchObject({ code: 'EOPNOTSUPP', errno: 95, op: 'link.ensureDummy', object: 'kube-ipvs0' });
    expect((e as Error).message).toMatch(/cannot create dummy links.*dummy module/);
    expect(await client.getLink('kube-ipvs0')).toBeNull();
  });

  it('refuses to adopt or delete a link of another kind under the dummy name', async () => {
    await veth('kube-ipvs0', 'kip-peer');
    await expect(client.ensureDummy('kube-ipvs0')).rejects.toMatchObject({
      name: 'LinkKindError',
      code: 'ERR_LINK_KIND',
      expected: 'dummy',
      actual: 'veth',
    });
    await expect(client.deleteLink('kube-ipvs0', { kind: 'dummy' })).rejects.toThrow(LinkKindError);
    expect((await client.getLink('kube-ipvs0'))?.kind).toBe('veth');
    expect(await client.deleteLink('kube-ipvs0')).toBe(true);
    expect(await client.getLink('kube-ipvs0')).toBeNull();
    expect(await client.getLink('kip-peer')).toBeNull(); // a veth takes its peer along
    expect(await client.deleteLink('kube-ipvs0')).toBe(false);
  });
});

describe('addresses on a veth', () => {
  beforeAll(() => veth('kipa', 'kipb'));
  afterEach(async () => {
    await run('ip', ['addr', 'flush', 'dev', 'kipa']);
  });

  it('adds v4 and v6 host addresses in one batch, with a per-address result', async () => {
    const results = await client.addAddresses('kipa', ['10.96.0.1', 'not-an-ip', '2001:DB8::A', '10.96.0.2/32', 'fd00::1']);
    expect(results.map((r) => [r.address, r.ok])).toEqual([
      ['10.96.0.1', true],
      ['not-an-ip', false],
      ['2001:db8::a', true],
      ['10.96.0.2', true],
      ['fd00::1', true],
    ]);
    const bad = results[1]!;
    expect(!bad.ok && bad.error).toBeInstanceOf(ValidationError);
    expect(!bad.ok && bad.error.message).toMatch(/addresses\[1\]: "not-an-ip"/);

    const shown = await ipAddrs('kipa');
    expect(shown).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^10\.96\.0\.1\/32 scope global kipa$/),
        expect.stringMatching(/^10\.96\.0\.2\/32 scope global kipa$/),
        expect.stringMatching(/^2001:db8::a\/128 scope global nodad$/),
        expect.stringMatching(/^fd00::1\/128 scope global nodad$/),
      ]),
    );
    expect(shown.join('\n')).not.toMatch(/tentative/); // NODAD: usable at once, even on a down link
    expect(await run('ip', ['-6', 'route', 'get', 'fd00::1'])).toMatch(/^local fd00::1 /);
    expect((await client.listAddresses('kipa')).sort()).toEqual(['10.96.0.1', '10.96.0.2', '2001:db8::a', 'fd00::1']);
  });

  it('reports EEXIST per address on a second add and EADDRNOTAVAIL per address on a missing delete', async () => {
    await client.addAddresses('kipa', ['10.96.0.1', 'fd00::1']);
    const again = await client.addAddresses('kipa', ['10.96.0.1', '10.96.0.3', 'fd00::1']);
    expect(again.map((r) => (r.ok ? 'ok' : (r.error as NetlinkError).code))).toEqual(['EEXIST', 'ok', 'EEXIST']);
    const first = again[0]!;
    expect(!first.ok && isExist(first.error)).toBe(true);
    expect(!first.ok && first.error).toMatchObject({ op: 'link.addAddress', object: '10.96.0.1 dev kipa', errno: 17 });

    const del = await client.deleteAddresses('kipa', ['10.96.0.1', 'fd00::1', '10.96.0.99', 'fd00::99']);
    expect(del.map((r) => (r.ok ? 'ok' : (r.error as NetlinkError).code))).toEqual(['ok', 'ok', 'EADDRNOTAVAIL', 'EADDRNOTAVAIL']);
    expect(del.every((r) => r.ok || isNotFound(r.error))).toBe(true);
    expect(await client.listAddresses('kipa')).toEqual(['10.96.0.3']);
  });

  it('reads back addresses added by `ip addr add`, canonical', async () => {
    await run('ip', ['addr', 'add', '192.0.2.7/32', 'dev', 'kipa']);
    await run('ip', ['addr', 'add', '2001:0DB8:0:0::7/128', 'dev', 'kipa', 'nodad']);
    await run('ip', ['addr', 'add', '198.51.100.9/24', 'dev', 'kipa']);
    expect((await client.listAddresses('kipa')).sort()).toEqual(['192.0.2.7', '198.51.100.9', '2001:db8::7']);
    const del = await client.deleteAddresses('kipa', ['192.0.2.7', '2001:db8::7']);
    expect(del.every((r) => r.ok)).toBe(true);
    expect(await ipAddrs('kipa')).toEqual([expect.stringMatching(/^198\.51\.100\.9\/24 /)]);
  });

  it('batches hundreds of addresses, and takes a Link to skip the name lookup', async () => {
    const link = (await client.getLink('kipa'))!;
    const addrs = Array.from({ length: 300 }, (_, i) => (i % 2 ? `10.97.${i >> 8}.${i & 255}` : `fd00:97::${(i + 1).toString(16)}`));
    expect((await client.addAddresses(link, addrs)).filter((r) => !r.ok)).toEqual([]);
    expect(await ipAddrs('kipa')).toHaveLength(300);
    expect(new Set(await client.listAddresses(link))).toEqual(new Set(addrs));
    expect((await client.deleteAddresses(link, addrs)).filter((r) => !r.ok)).toEqual([]);
    expect(await client.listAddresses(link)).toEqual([]);
  });

  it('fails the whole call with ENODEV when the link is missing; sends nothing when every address is invalid', async () => {
    await expect(client.addAddresses('kip-nosuch', ['10.0.0.1'])).rejects.toMatchObject({ code: 'ENODEV', object: 'kip-nosuch' });
    await expect(client.listAddresses('kip-nosuch')).rejects.toMatchObject({ code: 'ENODEV' });
    const r = await client.addAddresses('kip-nosuch', ['nope']);
    expect(r[0]!.ok).toBe(false);
  });
});

describe('local addresses', () => {
  beforeAll(async () => {
    await veth('kipc', 'kipd');
    await run('ip', ['addr', 'add', '203.0.113.5/24', 'dev', 'kipc']);
    await run('ip', ['addr', 'add', '2001:db8:5::5/64', 'dev', 'kipc', 'nodad']);
    await run('ip', ['link', 'set', 'kipc', 'up']);
    await run('ip', ['link', 'set', 'kipd', 'up']); // carrier on kipc: it gets a fe80:: address
    await client.addAddresses('kipa', ['10.96.0.1', 'fd00::1']);
    for (let i = 0; i < 50 && !/fe80::/.test(await run('ip', ['-6', 'addr', 'show', 'dev', 'kipc'])); i++) {
      await new Promise((r) => setTimeout(r, 100));
    }
  });

  it('lists every link but the excluded ones, without loopback and IPv6 link-local (as kube-proxy)', async () => {
    const local = await client.localAddresses({ exclude: ['kipa', 'kip-not-there'] });
    expect(local).toEqual(
      expect.arrayContaining([
        { address: '203.0.113.5', family: 'ipv4', interface: 'kipc' },
        { address: '2001:db8:5::5', family: 'ipv6', interface: 'kipc' },
      ]),
    );
    const text = JSON.stringify(local);
    for (const gone of ['10.96.0.1', 'fd00::1', '127.0.0.1', '"::1"', 'fe80:']) expect(text).not.toContain(gone);

    const all = await client.localAddresses({ includeLoopback: true, includeLinkLocal: true });
    expect(all).toEqual(
      expect.arrayContaining([
        { address: '127.0.0.1', family: 'ipv4', interface: 'lo' },
        { address: '::1', family: 'ipv6', interface: 'lo' },
        { address: '10.96.0.1', family: 'ipv4', interface: 'kipa' },
        { address: 'fd00::1', family: 'ipv6', interface: 'kipa' },
        expect.objectContaining({ address: expect.stringMatching(/^fe80::/), family: 'ipv6', interface: 'kipc' }),
      ]),
    );
  });

  it('filters address dumps by link index before decoding (where: in / notIn); a bad filter is a TypeError', async () => {
    const sock = new native.Socket(constantsOf('netlink').NETLINK_ROUTE!);
    try {
      const kipa = (await client.getLink('kipa'))!.index;
      const req = { type: constantsOf('rtnl').RTM_GETADDR!, header: { family: 0 } };
      const all = await sock.dump('rtnl.addr', req);
      const only = await sock.dump('rtnl.addr', req, { where: { field: 'index', in: [kipa] } });
      const others = await sock.dump('rtnl.addr', req, { where: { field: 'index', notIn: [kipa] } });
      const idx = (ms: NlMessage[]) => ms.map((m) => (m.header as { index: number }).index);
      expect(only.length).toBeGreaterThan(0);
      expect(idx(only).every((i) => i === kipa)).toBe(true);
      expect(idx(others)).not.toContain(kipa);
      expect(only.length + others.length).toBe(all.length);
      expect(() => sock.dump('rtnl.addr', req, { where: { field: 'ifindex', in: [1] } })).toThrow(/rtnl.addr has no header field ifindex/);
      expect(() => sock.dump('rtnl.addr', req, { where: { field: 'index' } as never })).toThrow(/exactly one of in, notIn/);
    } finally {
      sock.close();
    }
  });

  it('a local route dump carries its filter to the kernel: only our routes through the link come back, whatever else the tables hold', async () => {
    const kipc = (await client.getLink('kipc'))!.index;
    await client.addLocalRoutes('kipc', ['10.96.1.1', 'fd00::1:1']);
    await client.addLocalRoutes('kipa', ['10.96.1.2', 'fd00::1:2']); // ours, through another link
    await run('ip', ['route', 'add', 'local', '10.96.1.3', 'dev', 'kipc', 'table', 'local', 'proto', 'static']); // an operator's
    execFileSync('ip', ['-batch', '-'], { input: Array.from({ length: 2000 }, (_, i) => `route add 198.18.${i >> 8}.${i & 255}/32 dev kipc`).join('\n') });
    const sock = new native.Socket(constantsOf('netlink').NETLINK_ROUTE!);
    try {
      for (const [family, mine] of [['ipv4', '10.96.1.1'], ['ipv6', 'fd00::1:1']] as const) {
        // no `where`: what the kernel itself sent
        const sent = await sock.dump('rtnl.route', dumpLocalRoutesRequest(family, kipc));
        expect(sent.map((m) => parseRoute('t', m)?.address)).toEqual([mine]);
      }
      expect((await client.listLocalRoutes('kipc')).sort()).toEqual(['10.96.1.1', 'fd00::1:1']);
    } finally {
      sock.close();
      await client.deleteLocalRoutes('kipc', ['10.96.1.1', 'fd00::1:1']);
      await client.deleteLocalRoutes('kipa', ['10.96.1.2', 'fd00::1:2']);
      await run('ip', ['route', 'del', 'local', '10.96.1.3', 'dev', 'kipc', 'table', 'local']);
    }
  });

  it('in a namespace whose loopback is still down (no IPv4 local table: the kernel answers ENOENT), there are no local routes: `cleanup` succeeds', () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'kip-state-'));
    try {
      const r = spawnSync('unshare', ['-n', process.execPath, CLI, 'cleanup'], { encoding: 'utf8', env: { ...process.env, KUBE_IPVS_PROXY_STATE_DIR: stateDir } });
      expect(r.stdout + r.stderr).toMatch(/step="link kube-ipvs0" result="absent"/);
      expect(r.status).toBe(0);
    } finally {
      rmSync(stateDir, { recursive: true, force: true });
    }
  });

  it('agrees with `ip -o addr show`', async () => {
    const lines = (await run('ip', ['-o', 'addr', 'show'])).split('\n').filter(Boolean);
    const fromIp = lines.map((l) => {
      const [, dev, addr] = /^\d+:\s+(\S+)\s+inet6?\s+([^/\s]+)/.exec(l)!;
      return `${dev} ${addr}`;
    });
    const ours = (await client.localAddresses({ includeLoopback: true, includeLinkLocal: true })).map((a) => `${a.interface} ${a.address}`);
    expect(ours.sort()).toEqual(fromIp.sort());
  });
});
