// The in-memory LinkClient answers like the kernel does in test/kernel/{netns,uml}/link.test.ts.
import { describe, expect, it } from 'vitest';

import { NetlinkError, ValidationError, isExist, isNotFound } from '../../src/kernel/errors.js';
import { FakeLinkClient, LinkKindError } from '../../src/kernel/link.js';

const codes = (rs: ReadonlyArray<{ ok: boolean; error?: unknown }>) => rs.map((r) => (r.ok ? 'ok' : (r.error as NetlinkError).code));

describe('FakeLinkClient', () => {
  it('creates the dummy down, adopts it after, refuses another kind', async () => {
    const c = new FakeLinkClient();
    const first = await c.ensureDummy();
    expect(first).toMatchObject({ created: true, link: { name: 'kube-ipvs0', kind: 'dummy', up: false } });
    expect(await c.ensureDummy()).toEqual({ created: false, link: first.link });
    c.addLink('eth0', 'veth');
    await expect(c.ensureDummy('eth0')).rejects.toThrow(LinkKindError);
    await expect(c.deleteLink('eth0', { kind: 'dummy' })).rejects.toThrow(LinkKindError);
    expect(await c.deleteLink('kube-ipvs0', { kind: 'dummy' })).toBe(true);
    expect(await c.deleteLink('kube-ipvs0')).toBe(false);
    expect(await c.getLink('kube-ipvs0')).toBeNull();
  });

  it('adds and deletes per address: EEXIST, EADDRNOTAVAIL, ValidationError, injected faults', async () => {
    const c = new FakeLinkClient();
    const { link } = await c.ensureDummy();
    expect(codes(await c.addAddresses(link, ['10.96.0.1', 'FD00::1', 'bad']))).toEqual(['ok', 'ok', 'ERR_INVALID_INPUT']);
    const again = await c.addAddresses('kube-ipvs0', ['10.96.0.1', '10.96.0.2']);
    expect(codes(again)).toEqual(['EEXIST', 'ok']);
    expect(!again[0]!.ok && isExist(again[0]!.error)).toBe(true);
    expect(!again[0]!.ok && again[0]!.error).toMatchObject({ errno: 17, object: '10.96.0.1 dev kube-ipvs0' });
    c.failAddress('10.96.0.3', 'EPERM');
    expect(codes(await c.addAddresses(link, ['10.96.0.3', '10.96.0.3']))).toEqual(['EPERM', 'ok']);
    const del = await c.deleteAddresses(link, ['fd00::1', 'fd00::9']);
    expect(codes(del)).toEqual(['ok', 'EADDRNOTAVAIL']);
    expect(!del[1]!.ok && isNotFound(del[1]!.error)).toBe(true);
    expect(await c.listAddresses(link)).toEqual(['10.96.0.1', '10.96.0.2', '10.96.0.3']);
    await expect(c.addAddresses('nope', ['10.0.0.1'])).rejects.toMatchObject({ code: 'ENODEV' });
    const invalid = await c.addAddresses('nope', ['x']);
    expect(!invalid[0]!.ok && invalid[0]!.error).toBeInstanceOf(ValidationError);
  });

  it('lists local addresses like the real client, and records calls and injected call faults', async () => {
    const c = new FakeLinkClient();
    c.addLink('eth0', null, true, ['192.0.2.10', '2001:db8::10', 'fe80::1']);
    await c.ensureDummy();
    await c.addAddresses('kube-ipvs0', ['10.96.0.1']);
    expect(await c.localAddresses({ exclude: ['kube-ipvs0'] })).toEqual([
      { address: '192.0.2.10', family: 'ipv4', interface: 'eth0' },
      { address: '2001:db8::10', family: 'ipv6', interface: 'eth0' },
    ]);
    expect((await c.localAddresses({ includeLoopback: true, includeLinkLocal: true })).map((a) => a.address)).toEqual([
      '127.0.0.1', '::1', '192.0.2.10', '2001:db8::10', 'fe80::1', '10.96.0.1',
    ]);
    c.failCall('ensureDummy', new Error('boom'));
    await expect(c.ensureDummy()).rejects.toThrow('boom');
    expect(c.calls.slice(0, 3)).toEqual(['ensureDummy kube-ipvs0', 'addAddresses kube-ipvs0', 'localAddresses']);
  });
});
