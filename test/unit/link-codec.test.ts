// Golden bytes for every rtnetlink request the link client sends, written out from the UAPI
// structs (nlmsghdr 16 B, ifinfomsg 16 B, ifaddrmsg 8 B, nlattr 4 B + payload padded to 4).
// Cross-checked with `strace -xx` of iproute2 6.x: `ip link add name kube-ipvs0 type dummy`,
// `ip addr add 10.96.0.1/32 dev X`, `ip addr add fd00::1/128 dev X nodad`, `ip addr del ...`,
// `ip link del X` send the same bytes, except that iproute2 leaves NLA_F_NESTED off IFLA_LINKINFO.
import { describe, expect, it } from 'vitest';

import { native } from '../../src/native/binding.js';
import {
  addressRequest,
  checkLinkName,
  deleteLinkRequest,
  dumpAddressesRequest,
  dumpLinksRequest,
  dumpLocalRoutesRequest,
  getLinkRequest,
  localRouteRequest,
  newDummyRequest,
  parseHostAddress,
  parseRoute,
  setLinkUpRequest,
} from '../../src/kernel/link/codec.js';
import { ValidationError } from '../../src/kernel/errors.js';

/** Encodes one request with seq 1, pid 0, as hex. */
function hex(schema: string, req: Parameters<typeof native.encode>[1][number]): string {
  return native.encode(schema, [req], 1, 0).toString('hex');
}

/** nlmsghdr: len (LE u32), type (LE u16), flags (LE u16), seq 1, pid 0. */
function nlh(len: number, type: number, flags: number): string {
  const b = Buffer.alloc(16);
  b.writeUInt32LE(len, 0);
  b.writeUInt16LE(type, 4);
  b.writeUInt16LE(flags, 6);
  b.writeUInt32LE(1, 8);
  return b.toString('hex');
}

const IFNAME_KUBE_IPVS0 = '0f000300' + '6b7562652d6970767330' + '00' + '00'; // len 15, IFLA_IFNAME=3, "kube-ipvs0\0", pad 1
const IFINFO_ZERO = '00'.repeat(16); // family 0, pad, type 0, index 0, flags 0, change 0
const V4 = '0a600001'; // 10.96.0.1
const V6 = 'fd00' + '00'.repeat(12) + '0001'; // fd00::1

describe('rtnl.link requests', () => {
  it('RTM_NEWLINK creates a dummy: CREATE|EXCL, IFLA_IFNAME, IFLA_LINKINFO{IFLA_INFO_KIND "dummy"}', () => {
    const linkinfo = '10001280' + '0a000100' + '64756d6d7900' + '0000'; // len 16, 18|NLA_F_NESTED; kind len 10, type 1, "dummy\0", pad 2
    expect(hex('rtnl.link', newDummyRequest('kube-ipvs0'))).toBe(nlh(64, 16, 0x0601) + IFINFO_ZERO + IFNAME_KUBE_IPVS0 + linkinfo);
  });

  it('RTM_GETLINK by name asks for no statistics (IFLA_EXT_MASK = RTEXT_FILTER_SKIP_STATS)', () => {
    const extMask = '08001d00' + '08000000'; // len 8, IFLA_EXT_MASK=29, 1<<3
    expect(hex('rtnl.link', getLinkRequest('kube-ipvs0'))).toBe(nlh(56, 18, 0x0001) + IFINFO_ZERO + IFNAME_KUBE_IPVS0 + extMask);
  });

  it('RTM_GETLINK dump request (NLM_F_DUMP is added by the socket)', () => {
    expect(hex('rtnl.link', dumpLinksRequest())).toBe(nlh(40, 18, 0x0001) + IFINFO_ZERO + '08001d0008000000');
  });

  it('RTM_DELLINK by index', () => {
    const ifinfo = '00' + '00' + '0000' + '07000000' + '00000000' + '00000000'; // ifi_index 7
    expect(hex('rtnl.link', deleteLinkRequest(7))).toBe(nlh(32, 17, 0x0001) + ifinfo);
  });

  it('encodes and decodes the header fields at the ifinfomsg offsets', () => {
    const buf = native.encode('rtnl.link', [{ type: 16, header: { family: 10, type: 772, index: 0x01020304, flags: 0x1003, change: 0xffffffff } }]);
    expect(buf.subarray(16).toString('hex')).toBe('0a00' + '0403' + '04030201' + '03100000' + 'ffffffff');
    expect(native.decode('rtnl.link', buf)[0]).toMatchObject({ header: { family: 10, type: 772, index: 0x01020304, flags: 0x1003, change: 0xffffffff } });
  });

  it('rejects an interface name longer than IFNAMSIZ-1 in the encoder too', () => {
    expect(() => native.encode('rtnl.link', [{ type: 18, attrs: { ifname: 'a'.repeat(16) } }])).toThrow(/ifname/);
  });
});

describe('rtnl.link: setting a link up', () => {
  it('RTM_NEWLINK on an index with ifi_flags = ifi_change = IFF_UP (`ip link set X up`)', () => {
    const ifinfo = '00' + '00' + '0000' + '07000000' + '01000000' + '01000000';
    expect(hex('rtnl.link', setLinkUpRequest(7))).toBe(nlh(32, 16, 0x0001) + ifinfo);
  });
});

describe('rtnl.route requests (`ip route prepend local IP dev X table local proto 107 scope host`)', () => {
  // rtmsg: family, dst_len, src_len 0, tos 0, table 255 (local), protocol 107 (ours), scope 254 (host), type 2 (local), flags 0
  const rtm = (family: string, len: string) => family + len + '0000' + 'ff' + '6b' + 'fe' + '02' + '00000000';
  const OIF = '08000400' + '03000000'; // RTA_OIF = 4, index 3

  it('RTM_NEWROUTE 10.96.0.1/32: CREATE without EXCL, RTA_DST, RTA_OIF, no preferred source', () => {
    expect(hex('rtnl.route', localRouteRequest('add', 3, '10.96.0.1'))).toBe(nlh(44, 24, 0x0401) + rtm('02', '20') + '08000100' + V4 + OIF);
  });

  it('RTM_NEWROUTE fd00::1/128 and RTM_DELROUTE of both: the same rtmsg (the protocol picks our route)', () => {
    expect(hex('rtnl.route', localRouteRequest('add', 3, 'fd00::1'))).toBe(nlh(56, 24, 0x0401) + rtm('0a', '80') + '14000100' + V6 + OIF);
    expect(hex('rtnl.route', localRouteRequest('delete', 3, '10.96.0.1'))).toBe(nlh(44, 25, 0x0001) + rtm('02', '20') + '08000100' + V4 + OIF);
    expect(hex('rtnl.route', localRouteRequest('delete', 3, 'fd00::1'))).toBe(nlh(56, 25, 0x0001) + rtm('0a', '80') + '14000100' + V6 + OIF);
  });

  it('RTM_GETROUTE dump request, per family: the local table, our protocol, type local and the link as its filter', () => {
    expect(hex('rtnl.route', dumpLocalRoutesRequest('ipv4', 3))).toBe(nlh(36, 26, 0x0001) + '02000000' + 'ff' + '6b' + '00' + '02' + '00000000' + OIF);
    expect(hex('rtnl.route', dumpLocalRoutesRequest('ipv6', 3))).toBe(nlh(36, 26, 0x0001) + '0a000000' + 'ff' + '6b' + '00' + '02' + '00000000' + OIF);
  });

  it('parseRoute reads a dumped route back; RTA_TABLE wins over rtm_table; a bad destination length is EBADMSG', () => {
    const [msg] = native.decode('rtnl.route', native.encode('rtnl.route', [localRouteRequest('add', 3, 'fd00::1')]));
    expect(parseRoute('t', msg!)).toEqual({ address: 'fd00::1', family: 'ipv6', prefixLength: 128, oif: 3, table: 255, type: 2, protocol: 107 });
    expect(parseRoute('t', { header: { family: 2, table: 252 }, attrs: { dst: new Uint8Array([10, 0, 0, 1]), oif: 1, table: 1000 } })).toMatchObject({ table: 1000 });
    expect(parseRoute('t', { header: { family: 2 }, attrs: { oif: 1 } })).toBeNull(); // a default route: no destination
    expect(() => parseRoute('t', { header: { family: 10 }, attrs: { dst: new Uint8Array(4), oif: 1 } })).toThrow(expect.objectContaining({ code: 'EBADMSG' }));
  });
});

describe('rtnl.addr requests', () => {
  it('RTM_NEWADDR 10.96.0.1/32: CREATE|EXCL, ifaddrmsg{AF_INET, 32, 0, universe, index}, IFA_LOCAL, IFA_ADDRESS', () => {
    const ifa = '02' + '20' + '00' + '00' + '03000000';
    const attrs = '08000200' + V4 + '08000100' + V4;
    expect(hex('rtnl.addr', addressRequest('add', 3, '10.96.0.1'))).toBe(nlh(40, 20, 0x0601) + ifa + attrs);
  });

  it('RTM_NEWADDR fd00::1/128 carries IFA_F_NODAD in ifa_flags', () => {
    const ifa = '0a' + '80' + '02' + '00' + '03000000';
    const attrs = '14000200' + V6 + '14000100' + V6;
    expect(hex('rtnl.addr', addressRequest('add', 3, 'fd00::1'))).toBe(nlh(64, 20, 0x0601) + ifa + attrs);
  });

  it('RTM_DELADDR 10.96.0.1/32 and fd00::1/128: no CREATE/EXCL, no NODAD', () => {
    expect(hex('rtnl.addr', addressRequest('delete', 3, '10.96.0.1'))).toBe(
      nlh(40, 21, 0x0001) + '02200000' + '03000000' + '08000200' + V4 + '08000100' + V4,
    );
    expect(hex('rtnl.addr', addressRequest('delete', 3, 'fd00::1'))).toBe(
      nlh(64, 21, 0x0001) + '0a800000' + '03000000' + '14000200' + V6 + '14000100' + V6,
    );
  });

  it('RTM_GETADDR dump request: AF_UNSPEC, all zero ifaddrmsg', () => {
    expect(hex('rtnl.addr', dumpAddressesRequest())).toBe(nlh(24, 22, 0x0001) + '00'.repeat(8));
  });

  it('a batch is consecutive messages with consecutive sequence numbers', () => {
    const reqs = ['10.96.0.1', '10.96.0.2', '2001:db8::a'].map((a) => addressRequest('add', 9, a));
    const buf = native.encode('rtnl.addr', reqs, 100, 42);
    expect(buf.length).toBe(40 + 40 + 64);
    expect([buf.readUInt32LE(8), buf.readUInt32LE(48), buf.readUInt32LE(88)]).toEqual([100, 101, 102]);
    expect(buf.readUInt32LE(12)).toBe(42);
    expect(native.decode('rtnl.addr', buf).map((m) => ('header' in m ? m.header.index : -1))).toEqual([9, 9, 9]);
  });
});

describe('input checks', () => {
  it('accepts valid interface names and refuses what dev_valid_name() refuses', () => {
    for (const ok of ['kube-ipvs0', 'a', 'x'.repeat(15), 'eth0.100', 'dummy_1']) expect(() => checkLinkName('t', ok)).not.toThrow();
    for (const bad of ['', 'x'.repeat(16), '.', '..', 'a/b', 'a:b', 'a b', 'a\tb', 42]) {
      expect(() => checkLinkName('t', bad)).toThrow(ValidationError);
    }
  });

  it('canonicalizes addresses and names the bad ones', () => {
    expect(parseHostAddress('t', 'a', '10.96.0.1')).toEqual({ address: '10.96.0.1', family: 'ipv4' });
    expect(parseHostAddress('t', 'a', '2001:DB8:0:0::0:1')).toEqual({ address: '2001:db8::1', family: 'ipv6' });
    expect(parseHostAddress('t', 'a', '10.96.0.1/32').address).toBe('10.96.0.1');
    expect(parseHostAddress('t', 'a', 'fd00::1/128').address).toBe('fd00::1');
    for (const bad of ['10.96.0.256', 'kube', '', '10.96.0.1/24', 'fd00::1/64', 'fe80::1%eth0', '::ffff:1.2.3']) {
      expect(() => parseHostAddress('t', 'addresses[0]', bad)).toThrow(new RegExp(`addresses\\[0\\]: "${bad.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}`));
    }
    expect(() => parseHostAddress('t', 'a', 7)).toThrow(ValidationError);
  });
});
