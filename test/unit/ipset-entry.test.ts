// ipset entry text: parsing and formatting round trips, ipset(8)'s canonical forms, rejections.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

import { EntrySyntaxError, formatEntry, formatV6, parseEntry, parseV4, type Entry } from '../../src/kernel/ipset/entry.js';
import type { IpsetFamily, SetType } from '../../src/kernel/ipset/types.js';

const roundTrip = (type: SetType, family: IpsetFamily, text: string) => formatEntry(type, parseEntry(type, family, text));

describe('ipset entry text', () => {
  it('reads and prints every supported type as ipset(8) does', () => {
    const same: Array<[SetType, IpsetFamily, string]> = [
      ['hash:ip', 'inet', '10.96.0.10'],
      ['hash:ip', 'inet6', 'fd00::1'],
      ['hash:ip,port', 'inet', '10.0.0.1,tcp:80'],
      ['hash:ip,port', 'inet', '10.0.0.1,udp:53'],
      ['hash:ip,port', 'inet', '10.0.0.1,sctp:9'],
      ['hash:ip,port', 'inet', '10.0.0.1,udplite:9'],
      ['hash:ip,port', 'inet6', 'fd00::1,tcp:80'],
      ['hash:ip,port,ip', 'inet', '10.0.0.1,tcp:80,10.0.0.2'],
      ['hash:ip,port,ip', 'inet6', '::ffff:1.2.3.4,udp:53,2001:db8::1:0:0:1'],
      ['hash:ip,port,net', 'inet', '10.0.0.1,udp:53,10.0.0.0/8'],
      ['hash:ip,port,net', 'inet', '10.0.0.1,udp:53,10.0.0.2'],
      ['hash:ip,port,net', 'inet', '10.0.0.9,tcp:22,10.1.0.0/16 nomatch'],
      ['hash:net', 'inet', '10.0.0.0/24'],
      ['hash:net', 'inet', '10.0.0.5'],
      ['hash:net', 'inet6', 'fd00::/64'],
      ['hash:net', 'inet', '10.0.0.0/24 timeout 0 packets 5 bytes 700 comment "pods a"'],
      ['hash:net', 'inet', '10.1.0.0/16 timeout 50 nomatch packets 0 bytes 18446744073709551615'],
      ['bitmap:port', 'inet', '80'],
      ['bitmap:port', 'inet', '0'],
      ['bitmap:port', 'inet', '65535'],
    ];
    for (const [type, family, text] of same) expect(roundTrip(type, family, text), `${type} ${text}`).toBe(text);
  });

  it('normalises what ipset(8) also accepts: default tcp, host prefixes, option order', () => {
    expect(roundTrip('hash:ip,port', 'inet', '10.0.0.1,80')).toBe('10.0.0.1,tcp:80');
    expect(roundTrip('hash:net', 'inet', '10.0.0.5/32')).toBe('10.0.0.5');
    expect(roundTrip('hash:ip,port,net', 'inet6', 'fd00::1,tcp:1,fd00::2/128')).toBe('fd00::1,tcp:1,fd00::2');
    expect(roundTrip('hash:ip', 'inet6', 'FD00:0:0::1')).toBe('fd00::1');
    expect(roundTrip('hash:net', 'inet', '10.0.0.0/8  comment "a b"   timeout 5')).toBe('10.0.0.0/8 timeout 5 comment "a b"');
  });

  it('rejects what the kernel would reject, naming the part', () => {
    const bad: Array<[SetType, IpsetFamily, string, RegExp]> = [
      ['hash:ip', 'inet', '10.0.0.256', /not an IPv4 address/],
      ['hash:ip', 'inet', '010.0.0.1', /not an IPv4 address/],
      ['hash:ip', 'inet', 'fd00::1', /not an IPv4 address/],
      ['hash:ip', 'inet6', '10.0.0.1', /not an IPv6 address/],
      ['hash:ip', 'inet6', 'fe80::1%eth0', /not an IPv6 address/],
      ['hash:ip', 'inet', 'example.com', /not an IPv4 address/],
      ['hash:ip', 'inet', '10.0.0.1-10.0.0.9', /not an IPv4 address/],
      ['hash:ip,port', 'inet', '10.0.0.1', /2 parts/],
      ['hash:ip,port', 'inet', '10.0.0.1,icmp:8', /protocol "icmp"/],
      ['hash:ip,port', 'inet', '10.0.0.1,tcp:65536', /out of range/],
      ['hash:ip,port', 'inet', '10.0.0.1,tcp:http', /not a number/],
      ['hash:ip,port', 'inet', '10.0.0.1,tcp:80-90', /not a number/],
      ['hash:ip,port,ip', 'inet', '10.0.0.1,tcp:80', /3 parts/],
      ['hash:ip,port,net', 'inet', '10.0.0.1,tcp:80,10.0.0.0/0', /prefix length must be 1\.\.32/],
      ['hash:net', 'inet', '10.0.0.0/33', /out of range/],
      ['hash:net', 'inet6', 'fd00::/129', /out of range/],
      ['bitmap:port', 'inet', 'tcp:80', /not a number/],
      ['hash:ip', 'inet', '10.0.0.1 nomatch', /nomatch is not supported by hash:ip/],
      ['hash:ip', 'inet', '10.0.0.1 timeout', /timeout needs a value/],
      ['hash:ip', 'inet', '10.0.0.1 timeout 2147484', /out of range/],
      ['hash:ip', 'inet', '10.0.0.1 comment x', /quoted/],
      ['hash:ip', 'inet', '10.0.0.1 comment ""', /non-empty/],
      ['hash:ip', 'inet', `10.0.0.1 comment "${'x'.repeat(256)}"`, /longer than 255/],
      ['hash:ip', 'inet', '10.0.0.1 packets -1', /not a counter/],
      ['hash:ip', 'inet', '10.0.0.1 skbmark 0x1', /unexpected "skbmark"/],
      ['hash:ip', 'inet', '', /not an IPv4 address/],
    ];
    for (const [type, family, text, reason] of bad) {
      expect(() => parseEntry(type, family, text), `${type} ${text}`).toThrow(EntrySyntaxError);
      expect(() => parseEntry(type, family, text), `${type} ${text}`).toThrow(reason);
    }
  });

  it('prints IPv6 exactly as glibc inet_ntop (vectors from Python socket.inet_ntop)', () => {
    const vectors = [
      ['00000000000000000000000000000000', '::'],
      ['00000000000000000000000000000001', '::1'],
      ['00000000000000000000ffff01020304', '::ffff:1.2.3.4'],
      ['00000000000000000000000001020304', '::1.2.3.4'],
      ['0000000000000000ffff000001020304', '::ffff:0:102:304'],
      ['20010db8000000000001000000000001', '2001:db8::1:0:0:1'],
      ['00010000000000010000000000000001', '1:0:0:1::1'],
      ['00010000000000000000000000000000', '1::'],
      ['00010002000300040005000600070008', '1:2:3:4:5:6:7:8'],
      ['00000000000100000000000000000000', '0:0:1::'],
      ['00000001000000000000000000000000', '0:1::'],
      ['00010000000100000001000000010000', '1:0:1:0:1:0:1:0'],
      ['00000002000300040005000600070008', '0:2:3:4:5:6:7:8'],
      ['0064ff9b000000000000000001020304', '64:ff9b::102:304'],
      ['00000000000000000000fffe01020304', '::fffe:102:304'],
      ['00000000000000000000000000010000', '::0.1.0.0'],
    ];
    for (const [hex, text] of vectors) expect(formatV6(Buffer.from(hex!, 'hex'))).toBe(text);
  });

  it('parses dotted quads strictly', () => {
    expect(parseV4('0.0.0.0')).toBe(0);
    expect(parseV4('255.255.255.255')).toBe(0xffffffff);
    for (const bad of ['1.2.3', '1.2.3.4.5', '1..2.3', '1.2.3.', '.1.2.3', '1.2.3.04', ' 1.2.3.4', '1.2.3.4 ']) expect(parseV4(bad), bad).toBe(-1);
  });

  it('property: format(parse(format(e))) is stable and parse(format(e)) = e', () => {
    const v4 = fc.integer({ min: 0, max: 0xffffffff });
    const v6 = fc.uint8Array({ minLength: 16, maxLength: 16 });
    const proto = fc.constantFrom(6, 17, 132, 136);
    const port = fc.integer({ min: 0, max: 65535 });
    const opts = fc.record(
      { timeout: fc.integer({ min: 0, max: 2147483 }), comment: fc.stringMatching(/^[a-zA-Z0-9 _.:-]{1,40}$/), packets: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }) },
      { requiredKeys: [] },
    );
    const cases = fc.oneof(
      fc.tuple(fc.constant('hash:ip' as SetType), fc.oneof(v4, v6).map((ip) => ({ ip }) as Entry), opts),
      fc.tuple(fc.constant('hash:ip,port' as SetType), fc.record({ ip: v4, proto, port }), opts),
      fc.tuple(fc.constant('hash:ip,port,ip' as SetType), fc.record({ ip: v6, proto, port, ip2: v6 }), opts),
      fc.tuple(fc.constant('hash:ip,port,net' as SetType), fc.record({ ip: v4, proto, port, ip2: v4, cidr2: fc.integer({ min: 1, max: 32 }), nomatch: fc.constant(true) }, { requiredKeys: ['ip', 'proto', 'port', 'ip2', 'cidr2'] }), opts),
      fc.tuple(fc.constant('hash:net' as SetType), fc.record({ ip: v6, cidr: fc.integer({ min: 1, max: 128 }) }), opts),
      fc.tuple(fc.constant('bitmap:port' as SetType), fc.record({ port }), fc.constant({})),
    );
    fc.assert(
      fc.property(cases, ([type, elem, o]) => {
        const e: Entry = { ...elem, ...o };
        const family: IpsetFamily = typeof e.ip === 'object' || typeof e.ip2 === 'object' ? 'inet6' : 'inet';
        const text = formatEntry(type, e);
        const back = parseEntry(type, family, text);
        expect(formatEntry(type, back)).toBe(text);
        const norm = (x: Entry) => ({ ...x, ip: x.ip instanceof Uint8Array ? Buffer.from(x.ip).toString('hex') : x.ip, ip2: x.ip2 instanceof Uint8Array ? Buffer.from(x.ip2).toString('hex') : x.ip2 });
        const expected = { ...e };
        if (type === 'hash:net' && expected.cidr === 128) delete expected.cidr;
        if (type === 'hash:ip,port,net' && expected.cidr2 === 32) delete expected.cidr2;
        const got = { ...back };
        if (type === 'hash:net' && got.cidr === 128) delete got.cidr;
        if (type === 'hash:ip,port,net' && got.cidr2 === 32) delete got.cidr2;
        expect(norm(got)).toEqual(norm(expected));
      }),
      { numRuns: 2000 },
    );
  });
});
