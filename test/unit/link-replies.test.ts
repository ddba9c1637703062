// Decoding rtnetlink replies captured from a real kernel (see link-fixtures.ts for the version).
import { describe, expect, it } from 'vitest';

import { native, type NlControl, type NlMessage } from '../../src/native/binding.js';
import { isIpv6LinkLocal, isLoopback, parseAddress, parseLink } from '../../src/kernel/link/codec.js';
import { NetlinkError } from '../../src/kernel/errors.js';
import { CAPTURED, CAPTURED_KERNEL } from './link-fixtures.js';

function decodeAll(schema: string, datagrams: readonly string[]): Array<NlMessage | NlControl> {
  return datagrams.flatMap((h) => native.decode(schema, Buffer.from(h, 'hex')));
}
const isData = (m: NlMessage | NlControl): m is NlMessage => 'header' in m;

describe(`replies captured from ${CAPTURED_KERNEL}`, () => {
  it('RTM_GETLINK kube-ipvs0: RTM_NEWLINK with the dummy kind, down, then the ack', () => {
    const msgs = decodeAll('rtnl.link', CAPTURED.getLink);
    expect(msgs).toHaveLength(2);
    const [reply, ack] = msgs;
    expect(isData(reply!)).toBe(true);
    const m = reply as NlMessage;
    expect(m).toMatchObject({ type: 16, seq: 1, header: { family: 0, type: 1, index: 3, flags: 0x82 } });
    expect(m.attrs).toMatchObject({ ifname: 'kube-ipvs0', mtu: 1500, operState: 2, qdisc: 'noop', linkInfo: { kind: 'dummy' } });
    expect((m.attrs.address as Buffer).length).toBe(6);
    expect(parseLink('t', m)).toEqual({ index: 3, name: 'kube-ipvs0', kind: 'dummy', up: false });
    expect(ack).toMatchObject({ type: 2, seq: 1, errno: 0 });
  });

  it('RTM_GETADDR dump: IPv4 from IFA_LOCAL, IPv6 from IFA_ADDRESS, flags from IFA_FLAGS, then NLMSG_DONE', () => {
    const msgs = decodeAll('rtnl.addr', CAPTURED.dumpAddresses);
    expect(msgs.at(-1)).toMatchObject({ type: 3, errno: 0 });
    const addrs = msgs.filter(isData).map((m) => parseAddress('t', m));
    expect(addrs).toEqual([
      { address: '127.0.0.1', family: 'ipv4', prefixLength: 8, index: 1, flags: 0x80, scope: 254 },
      { address: '10.255.255.1', family: 'ipv4', prefixLength: 24, index: 2, flags: 0x80, scope: 0 },
      { address: '10.96.0.1', family: 'ipv4', prefixLength: 32, index: 3, flags: 0x80, scope: 0 },
      { address: '::1', family: 'ipv6', prefixLength: 128, index: 1, flags: 0x80, scope: 254 },
      { address: 'fe80::40f1:a0ff:fea2:8124', family: 'ipv6', prefixLength: 64, index: 2, flags: 0x80, scope: 253 },
      { address: 'fd00::1', family: 'ipv6', prefixLength: 128, index: 3, flags: 0x82, scope: 0 },
    ]);
    const v4 = msgs.filter(isData).find((m) => m.header.index === 3 && m.header.family === 2)!;
    expect(v4.attrs).toMatchObject({ label: 'kube-ipvs0' });
    expect((v4.attrs.cacheInfo as Buffer).length).toBe(16);
  });

  it('errors: EEXIST on a second add and a second dummy, EADDRNOTAVAIL on a missing delete, ENODEV on a missing link', () => {
    expect(decodeAll('rtnl.addr', CAPTURED.addExisting)).toEqual([{ type: 2, flags: 0x100, seq: 3, pid: expect.any(Number), errno: 17 }]);
    expect(decodeAll('rtnl.link', CAPTURED.newLinkExisting)[0]).toMatchObject({ type: 2, errno: 17 });
    expect(decodeAll('rtnl.addr', CAPTURED.deleteMissing)[0]).toMatchObject({ type: 2, errno: 99 });
    expect(decodeAll('rtnl.link', CAPTURED.getMissingLink)[0]).toMatchObject({ type: 2, errno: 19 });
    expect([17, 99, 19].map((e) => native.errnoName(e))).toEqual(['EEXIST', 'EADDRNOTAVAIL', 'ENODEV']);
  });
});

describe('parsers', () => {
  const msg = (header: Record<string, number>, attrs: Record<string, unknown>): NlMessage => ({ type: 20, flags: 0, seq: 0, pid: 0, header, attrs });

  it('prefers IFA_LOCAL over IFA_ADDRESS (the peer on point-to-point links)', () => {
    const m = msg({ family: 2, prefixLen: 32, index: 4, flags: 0, scope: 0 }, { local: Buffer.from([10, 0, 0, 1]), address: Buffer.from([10, 0, 0, 2]) });
    expect(parseAddress('t', m)?.address).toBe('10.0.0.1');
  });

  it('skips other families and refuses addresses of the wrong length', () => {
    expect(parseAddress('t', msg({ family: 17 }, {}))).toBeNull();
    expect(() => parseAddress('t', msg({ family: 10 }, { address: Buffer.alloc(4) }))).toThrow(NetlinkError);
    expect(() => parseAddress('t', msg({ family: 2 }, {}))).toThrow(/malformed reply/);
  });

  it('a link without a name is malformed; a link without LINKINFO has kind null', () => {
    expect(() => parseLink('t', msg({ index: 1, flags: 1 }, {}))).toThrow(expect.objectContaining({ code: 'EBADMSG' }));
    expect(parseLink('t', msg({ index: 1, flags: 0x49 }, { ifname: 'lo' }))).toEqual({ index: 1, name: 'lo', kind: null, up: true });
  });

  it('classifies loopback and IPv6 link-local like kube-proxy (net.IP.IsLoopback / IsLinkLocalUnicast)', () => {
    expect(isLoopback('127.0.0.1', 'ipv4')).toBe(true);
    expect(isLoopback('127.255.0.9', 'ipv4')).toBe(true);
    expect(isLoopback('::1', 'ipv6')).toBe(true);
    expect(isLoopback('10.0.0.1', 'ipv4')).toBe(false);
    for (const a of ['fe80::1', 'fe80::40f1:a0ff:fea2:8124', 'febf:ffff::1']) expect(isIpv6LinkLocal(a, 'ipv6')).toBe(true);
    for (const a of ['fec0::1', 'fd00::1', '2001:db8::1', 'fe8::1']) expect(isIpv6LinkLocal(a, 'ipv6')).toBe(false);
    expect(isIpv6LinkLocal('169.254.1.1', 'ipv4')).toBe(false);
  });
});
