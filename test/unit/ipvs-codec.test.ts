// IPVS codec: golden request bytes, replies captured from a real kernel (UML 6.1.176,
// test/fixtures/capture-ipvs.sh), and fuzzing of every decoder.
import { readFileSync } from 'node:fs';

import { describe, expect, it } from 'vitest';

import { fuzzRandom, fuzzTruncations } from './lib/fuzz.js';
import * as codec from '../../src/kernel/ipvs/codec.js';
import { ipTo16 } from '../../src/model/ip.js';
import { native, type NlControl, type NlMessage } from '../../src/native/binding.js';
import { ipvsRequests } from '../fixtures/ipvs-requests.mjs';

interface Exchange {
  name: string;
  schema: string;
  request: string;
  replies: string[];
}
const fixture = JSON.parse(readFileSync(new URL('../fixtures/ipvs-replies.json', import.meta.url), 'utf8')) as {
  kernel: string;
  familyId: number;
  exchanges: Exchange[];
};
const byName = (n: string): Exchange => fixture.exchanges.find((e) => e.name === n)!;
const decodeAll = (e: Exchange): Array<NlMessage | NlControl> =>
  e.replies.flatMap((hex) => native.decode(e.schema, Buffer.from(hex, 'hex')));
const dataOf = (e: Exchange): NlMessage[] => decodeAll(e).filter((m): m is NlMessage => 'attrs' in m);
const controlOf = (e: Exchange): NlControl => decodeAll(e).find((m): m is NlControl => 'errno' in m)!;
/** A dump exchange's replies as the client reads them: one table decoded by the addon. */
const tableOf = (e: Exchange, omit?: string[]) => native.decodeTable(e.schema, Buffer.concat(e.replies.map((h) => Buffer.from(h, 'hex'))), omit);
const servicesOf = (e: Exchange, omit?: string[]) => {
  const t = tableOf(e, omit);
  return Array.from({ length: t.rows }, (_, i) => codec.serviceReader(t)(i));
};
const destinationsOf = (e: Exchange, family: 'ipv4' | 'ipv6', omit?: string[]) => {
  const t = tableOf(e, omit);
  return Array.from({ length: t.rows }, (_, i) => codec.destinationReader(t)(i, family));
};

describe('IPVS requests: golden bytes', () => {
  it('NEW_SERVICE matches the layout derived by hand from <linux/ip_vs.h>', () => {
    const req = ipvsRequests(fixture.familyId, codec, native.constants, ipTo16).find(([n]) => n === 'addService')!;
    const bytes = native.encode(req[1], [req[2]], 1007).toString('hex');
    const expected = [
      '68000000', '1c00', '0500', 'ef030000', '00000000', // nlmsghdr: len 104, IPVS family 28, REQUEST|ACK, seq 1007
      '01', '01', '0000', // genlmsghdr: IPVS_CMD_NEW_SERVICE, version 1
      '5400', '0100', // IPVS_CMD_ATTR_SERVICE nest, 84 bytes
      '0600', '0100', '0200', '0000', // AF = AF_INET (u16, padded)
      '0600', '0200', '0600', '0000', // PROTOCOL = IPPROTO_TCP
      '1400', '0300', '0a60000c', '000000000000000000000000', // ADDR: 16-byte nf_inet_addr, 10.96.0.12
      '0600', '0400', '01bb', '0000', // PORT 443, big-endian
      '0800', '0600', '77727200', // SCHED_NAME "wrr\0"
      '0c00', '0700', '00000000', 'ffffffff', // FLAGS {flags 0, mask ~0}
      '0800', '0800', '00000000', // TIMEOUT 0
      '0800', '0900', 'ffffffff', // NETMASK 255.255.255.255 (network order)
    ].join('');
    expect(bytes).toBe(expected);
  });

  it('every captured request is re-encoded byte for byte', () => {
    const reqs = ipvsRequests(fixture.familyId, codec, native.constants, ipTo16);
    expect(reqs.map(([n]) => n)).toEqual(fixture.exchanges.map((e) => e.name));
    reqs.forEach(([name, schema, request], i) => {
      expect(native.encode(schema, [request], 1000 + i).toString('hex'), name).toBe(byName(name).request);
    });
  });

  it('every request decodes back to what was encoded', () => {
    for (const e of fixture.exchanges) {
      const [msg] = native.decode(e.schema, Buffer.from(e.request, 'hex')) as NlMessage[];
      expect(native.encode(e.schema, [msg!], msg!.seq).toString('hex'), e.name).toBe(e.request);
    }
  });

  it('rejects bad input with the field named, before any I/O', () => {
    const bad = (attrs: object) => () => native.encode('ipvs', [{ type: 28, header: { cmd: 1, version: 1 }, attrs }]);
    expect(bad({ service: { port: 70000 } })).toThrow(/service\.port: expected an integer in \[0, 65535\]/);
    expect(bad({ service: { schedName: 'x'.repeat(16) } })).toThrow(/service\.schedName: longer than 15 bytes/);
    expect(bad({ service: { addr: Buffer.alloc(17) } })).toThrow(/service\.addr: wrong length 17/);
    expect(bad({ service: 'nope' })).toThrow(/service: expected an object/);
    expect(() => native.encode('nosuch', [])).toThrow(/unknown schema nosuch/);
  });
});

describe(`IPVS replies captured from kernel ${fixture.kernel}`, () => {
  it('resolves the IPVS family through the controller', () => {
    const [m] = dataOf(byName('getFamily'));
    expect(m!.attrs).toMatchObject({ familyName: 'IPVS', familyId: fixture.familyId, version: 1 });
  });

  it('decodes GET_INFO and GET_CONFIG', () => {
    expect(dataOf(byName('getInfo'))[0]!.attrs).toEqual({ version: 0x010201, connTabSize: 4096 });
    expect(dataOf(byName('getConfig'))[0]!.attrs).toEqual({ timeoutTcp: 900, timeoutTcpFin: 120, timeoutUdp: 300 });
  });

  it('decodes the service dump exactly as ipvsadm wrote it', () => {
    const services = servicesOf(byName('dumpServices')).map(({ stats, ...rest }) => {
      expect(stats).toMatchObject({ conns: 0, inBytes: 0 });
      return rest;
    });
    const base = { fwmark: null, timeout: 0, netmask: 32, pe: null, flags: [] };
    expect(services).toEqual(
      expect.arrayContaining([
        { ...base, family: 'ipv4', protocol: 'tcp', address: '10.96.0.10', port: 80, scheduler: 'rr', flags: ['persistent'], timeout: 10800 },
        { ...base, family: 'ipv6', protocol: 'udp', address: '2001:db8::10', port: 53, scheduler: 'sh', flags: ['persistent', 'sh-fallback', 'sh-port'], timeout: 60, netmask: 64 },
        { ...base, family: 'ipv4', protocol: null, address: null, port: null, fwmark: 7, scheduler: 'mh', flags: ['mh-port'] },
        { ...base, family: 'ipv4', protocol: 'sctp', address: '10.96.0.11', port: 9000, scheduler: 'wlc' },
        { ...base, family: 'ipv4', protocol: 'udp', address: '10.96.0.11', port: 9001, scheduler: 'nq', flags: ['ops'] },
      ]),
    );
    expect(services).toHaveLength(5);
  });

  it('decodes destination dumps with forwarding, weights and thresholds', () => {
    const tcp = destinationsOf(byName('dumpDestsTcp'), 'ipv4');
    const strip = ({ stats: _s, ...d }: { stats: unknown }) => d;
    expect(tcp.map(strip)).toEqual(
      expect.arrayContaining([
        { address: '10.255.255.2', port: 8080, forward: 'masq', weight: 1, upperThreshold: 0, lowerThreshold: 0, activeConns: 0, inactiveConns: 0, persistConns: 0 },
        { address: '10.255.255.3', port: 80, forward: 'route', weight: 5, upperThreshold: 100, lowerThreshold: 10, activeConns: 0, inactiveConns: 0, persistConns: 0 },
      ]),
    );
    const [v6] = destinationsOf(byName('dumpDestsV6'), 'ipv6');
    expect(v6).toMatchObject({ address: '2001:db8::2', port: 5353, forward: 'masq', weight: 2 });
    expect(controlOf(byName('dumpDestsV6'))).toMatchObject({ type: 3, errno: 0 });
  });

  it('reads the same fields from the table as the object decoder shows; counters only when not omitted', () => {
    const objects = dataOf(byName('dumpServices')).map((m) => (m.attrs as { service: Record<string, unknown> }).service);
    const services = servicesOf(byName('dumpServices'));
    expect(services.map((s) => s.scheduler)).toEqual(objects.map((o) => o.schedName));
    expect(services.map((s) => s.stats!.inPkts)).toEqual(objects.map((o) => Number((o.stats64 as { inPkts: bigint }).inPkts)));
    for (const omit of [['stats'], ['stats', 'stats64']]) {
      const without = servicesOf(byName('dumpServices'), omit);
      expect(without.map((s) => 'stats' in s), String(omit)).toEqual(without.map(() => omit.length === 1));
      expect(without.map(({ stats: _s, ...rest }) => rest)).toEqual(services.map(({ stats: _s, ...rest }) => rest));
    }
    expect(destinationsOf(byName('dumpDestsTcp'), 'ipv4', ['stats', 'stats64']).every((d) => !('stats' in d))).toBe(true);
    expect(tableOf(byName('dumpServices')).columns['header.cmd']).toMatchObject({ kind: 'number', numbers: Float64Array.from(Array(5).fill(native.constants.ipvs!.IPVS_CMD_NEW_SERVICE!)) });
  });

  it('decodes acks and errors: ok, EEXIST, ESRCH, ENOENT for an unknown scheduler', () => {
    const errno = (n: string) => native.errnoName(controlOf(byName(n)).errno);
    expect(['addService', 'addDest', 'setDest', 'delDest', 'delService', 'setTimeouts'].map(errno)).toEqual(Array(6).fill('OK'));
    expect(errno('addServiceExisting')).toBe('EEXIST');
    expect(errno('delServiceMissing')).toBe('ESRCH');
    expect(errno('addServiceBadScheduler')).toBe('ENOENT');
  });
});

describe('decoders never crash on malformed input', () => {
  const replies = fixture.exchanges.flatMap((e) => e.replies.map((hex) => ({ schema: e.schema, buf: Buffer.from(hex, 'hex') })));
  const schemas = native.schemaNames();

  function decodeSafely(schema: string, buf: Buffer): void {
    try {
      native.decode(schema, buf);
    } catch (e) {
      expect((e as { code?: string }).code).toBe('EBADMSG');
    }
    let t;
    try {
      t = native.decodeTable(schema, buf);
    } catch (e) {
      expect((e as { code?: string }).code).toBe('EBADMSG');
      return;
    }
    // The TS layer may reject a row (missing fields, a column of another kind), but only with an Error.
    for (const read of [() => codec.serviceReader(t), () => codec.destinationReader(t)]) {
      try {
        const row = read();
        for (let i = 0; i < t.rows; i++) {
          try {
            row(i, 'ipv4');
          } catch (e) {
            expect(e).toBeInstanceOf(Error);
          }
        }
      } catch (e) {
        expect(e).toBeInstanceOf(Error);
      }
    }
  }

  it('every truncation of every captured reply', () => {
    fuzzTruncations(replies, ({ schema, buf }) => decodeSafely(schema, buf));
  });

  it('random bytes and random corruption of captured replies', () => {
    fuzzRandom(schemas, replies, ({ schema, buf }) => decodeSafely(schema, buf), 3000);
  });
});
