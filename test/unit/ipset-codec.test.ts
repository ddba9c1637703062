// ipset codec: golden request bytes (derived from <linux/netfilter/ipset/ip_set.h> and compared
// with what ipset(8) sends), replies captured from a real kernel (test/fixtures/capture-ipset.mjs;
// kernel version in the fixture), and fuzzing of the decoders.
import { readFileSync } from 'node:fs';

import { describe, expect, it } from 'vitest';

import { fuzzRandom, fuzzTruncations } from './lib/fuzz.js';
import * as codec from '../../src/kernel/ipset/codec.js';
import * as entry from '../../src/kernel/ipset/entry.js';
import { NetlinkError } from '../../src/kernel/errors.js';
import { native, type NlControl, type NlMessage, type NlRequest } from '../../src/native/binding.js';
import { ipsetRequests } from '../fixtures/ipset-requests.mjs';

interface Exchange {
  name: string;
  schema: string;
  request: string;
  replies: string[];
}
const fixture = JSON.parse(readFileSync(new URL('../fixtures/ipset-replies.json', import.meta.url), 'utf8')) as {
  kernel: string;
  ipsetVersion: string;
  ipsetSave: string;
  ipsetSent: Record<string, string>;
  exchanges: Exchange[];
};
const C = native.constants.ipset!;
const byName = (n: string): Exchange => fixture.exchanges.find((e) => e.name === n)!;
const decodeAll = (e: Exchange): Array<NlMessage | NlControl> => e.replies.flatMap((hex) => native.decode(e.schema, Buffer.from(hex, 'hex')));
const dataOf = (e: Exchange): NlMessage[] => decodeAll(e).filter((m): m is NlMessage => 'attrs' in m);
/** A LIST exchange's replies as the client reads them: one table decoded by the addon. */
const listed = (e: Exchange) => codec.listedSets(native.decodeTable(e.schema, Buffer.concat(e.replies.map((hex) => Buffer.from(hex, 'hex')))));
const controlOf = (n: string): NlControl => decodeAll(byName(n)).find((m): m is NlControl => 'errno' in m)!;
const requests = ipsetRequests(codec, entry, native.constants) as Array<[string, string, NlRequest]>;

/** Zeroes the alignment padding of every attribute (ipset(8) leaves stale bytes there). */
function zeroPadding(buf: Buffer, start: number, end: number): void {
  for (let p = start; p + 4 <= end; ) {
    const len = buf.readUInt16LE(p);
    if (len < 4 || p + len > end) return;
    if (buf.readUInt16LE(p + 2) & 0x8000) zeroPadding(buf, p + 4, p + len);
    const next = Math.min(end, p + ((len + 3) & ~3));
    buf.fill(0, p + len, next);
    p = next;
  }
}
/** A message's type and payload (nfgenmsg + attributes), padding zeroed: seq, pid and flags aside. */
function body(hex: string): { type: number; payload: string } {
  const buf = Buffer.from(hex, 'hex');
  zeroPadding(buf, 20, buf.readUInt32LE(0));
  return { type: buf.readUInt16LE(4), payload: buf.subarray(16, buf.readUInt32LE(0)).toString('hex') };
}

describe('ipset requests: golden bytes', () => {
  it('PROTOCOL matches the layout derived by hand from the UAPI headers', () => {
    const req = requests.find(([n]) => n === 'protocol')!;
    expect(native.encode(req[1], [req[2]], 1000).toString('hex')).toBe(
      [
        '1c000000', '0106', '0500', 'e8030000', '00000000', // nlmsghdr: 28 bytes, NFNL_SUBSYS_IPSET<<8 | IPSET_CMD_PROTOCOL, REQUEST|ACK, seq 1000
        '02', '00', '0000', // nfgenmsg: AF_INET, NFNETLINK_V0, res_id 0
        '0500', '0100', '07000000', // IPSET_ATTR_PROTOCOL 7
      ].join(''),
    );
  });

  it('a batched ADD (columnar) matches the layout derived by hand', () => {
    const req = requests.find(([n]) => n === 'addBatch')!;
    const entryHex = (ip: string, port: string, proto: string, lineno: string) =>
      ['2800', '0780', '0c00', '0180', '0800', '0140', ip, '0600', '0440', port, '0000', '0500', '0700', proto, '000000', '0800', '0940', lineno].join('');
    expect(native.encode(req[1], [req[2]], 1012).toString('hex')).toBe(
      [
        'b0000000', '0906', '0502', 'f4030000', '00000000', // 176 bytes, IPSET_CMD_ADD, REQUEST|ACK|EXCL (no -exist), seq 1012
        '02000000', // nfgenmsg
        '0500', '0100', '07000000', // PROTOCOL 7
        '0f00', '0200', '6b69702d6970706f727400', '00', // SETNAME "kip-ipport", padded
        '0800', '0940', '00000001', // LINENO (NLA_F_NET_BYTEORDER, big-endian), before ADT as ipset(8) puts it
        '7c00', '0880', // IPSET_ATTR_ADT | NLA_F_NESTED, 124 bytes
        entryHex('0a000004', '1f90', '06', '00000001'), // DATA|NESTED: IP|NESTED{IPV4|NBO 10.0.0.4}, PORT|NBO 8080, PROTO tcp, LINENO 1
        entryHex('0a000001', '0050', '06', '00000002'),
        entryHex('0a000005', '14e9', '11', '00000003'),
      ].join(''),
    );
  });

  it('every captured request is re-encoded byte for byte', () => {
    expect(requests.map(([n]) => n)).toEqual(fixture.exchanges.map((e) => e.name));
    requests.forEach(([name, schema, request], i) => {
      expect(native.encode(schema, [request], 1000 + i).toString('hex'), name).toBe(byName(name).request);
    });
  });

  it(`equals what ${fixture.ipsetVersion} sends for the same commands (payload; padding zeroed)`, () => {
    const names = Object.keys(fixture.ipsetSent);
    expect(names.length).toBeGreaterThanOrEqual(14);
    for (const name of names) expect(body(byName(name).request), name).toEqual(body(fixture.ipsetSent[name]!));
  });

  it('sends the flags ipset(8) sends: EXCL unless -exist, CREATE on create', () => {
    const flags = (hex: string) => Buffer.from(hex, 'hex').readUInt16LE(6);
    for (const name of ['createIpPort', 'createBitmap', 'addBatch', 'destroy', 'testHit', 'rename', 'swap', 'flush'])
      expect(flags(byName(name).request), name).toBe(flags(fixture.ipsetSent[name]!));
  });

  it('columnar and object entries encode to the same bytes', () => {
    const cases: Array<[string, 'inet' | 'inet6', string[]]> = [
      ['hash:ip,port', 'inet', ['10.0.0.1,tcp:80', '10.0.0.2,udp:53 timeout 5', '10.0.0.3,sctp:9']],
      ['hash:ip,port,ip', 'inet6', ['fd00::1,tcp:80,fd00::2', '::ffff:1.2.3.4,udp:53,::1']],
      ['hash:ip,port,net', 'inet', ['10.0.0.1,udp:53,10.0.0.0/8 nomatch', '10.0.0.1,tcp:1,10.0.0.2']],
      ['hash:net', 'inet6', ['fd00::/64', 'fd00::1 timeout 0']],
      ['hash:ip', 'inet', ['1.2.3.4']],
      ['bitmap:port', 'inet', ['0', '65535']],
    ];
    for (const [type, family, texts] of cases) {
      const parsed = texts.map((t) => entry.parseEntry(type as never, family, t));
      const msg = (adt: unknown) => [{ type: codec.msgType(C.IPSET_CMD_ADD!), header: codec.NFGEN_HEADER, attrs: { protocol: 7, name: 's', lineno: 1, adt } }];
      const linenos = texts.map((_, i) => i + 1);
      const objects = native.encode('ipset.adt', msg(parsed.map((e, i) => codec.entryAttrs(e, linenos[i]))));
      expect(native.encode('ipset.adt', msg(codec.entryColumns(parsed, linenos))).toString('hex'), type).toBe(objects.toString('hex'));
    }
  });

  it('rejects malformed columns and oversized messages before any I/O', () => {
    const enc = (adt: unknown) => () => native.encode('ipset.adt', [{ type: 0x609, attrs: { adt } }]);
    expect(enc({ rows: 2, columns: { port: new Uint16Array(1) } })).toThrow(/adt\.columns\.port: expected 2 values/);
    expect(enc({ rows: 1, columns: { nosuch: new Uint8Array(1) } })).toThrow(/adt\.columns: unknown column/);
    expect(enc({ rows: 1, columns: { 'ip.v6': new Uint8Array(15) } })).toThrow(/expected 16 bytes/);
    expect(enc({ rows: 1, columns: { comment: new Uint8Array(1) } })).toThrow(/cannot be a column/);
    expect(enc({ rows: 1, columns: { port: new Float64Array([70000]) } })).toThrow(/adt\[0\]\.port: expected an integer in \[0, 65535\]/);
    expect(enc({ rows: 1, columns: { port: new Int32Array(1) } })).toThrow(/unsigned integer/);
    expect(enc({ rows: 5000, columns: { port: new Uint16Array(5000), lineno: new Uint32Array(5000) } })).toThrow(/message too large/);
    expect(() => native.encode('ipset', [{ type: 0x602, attrs: { name: 'x'.repeat(32) } }])).toThrow(/name: longer than 31 bytes/);
  });
});

describe(`ipset replies captured from kernel ${fixture.kernel}`, () => {
  const save = fixture.ipsetSave.trim().split('\n');
  const savedEntries = (set: string) => save.filter((l) => l.startsWith(`add ${set} `)).map((l) => l.slice(`add ${set} `.length));

  it('negotiates protocol 7 (kernel min 6) and reads type revisions', () => {
    expect(dataOf(byName('protocol'))[0]!.attrs).toEqual({ protocol: 7, protocolMin: 6 });
    expect(dataOf(byName('typeIpPort'))[0]!.attrs).toMatchObject({ typeName: 'hash:ip,port', family: 2, revision: 7, protocolMin: 0 });
    expect(dataOf(byName('typeBitmap'))[0]!.attrs).toMatchObject({ typeName: 'bitmap:port', revision: 3 });
  });

  it('decodes HEADER, and ENOENT for a missing set', () => {
    expect(codec.headerOf(dataOf(byName('header'))[0]!.attrs)).toEqual({ name: 'kip-ipport', type: 'hash:ip,port', family: 'inet', revision: 7 });
    expect(native.errnoName(controlOf('headerMissing').errno)).toBe('ENOENT');
  });

  it('lists every set exactly as `ipset save` printed it', () => {
    const sets = listed(byName('listAll'));
    expect(sets.map((s) => `create ${s.name} ${s.type}`)).toEqual(save.filter((l) => l.startsWith('create ')).map((l) => l.split(' ').slice(0, 3).join(' ')));
    for (const s of sets) expect(s.entries, s.name).toEqual(savedEntries(s.name));
    const byN = new Map(sets.map((s) => [s.name, s]));
    expect(byN.get('kip-ipport')).toMatchObject({ family: 'inet', revision: 7, hashSize: 1024, maxElem: 65536, references: 0, range: null, timeout: null });
    expect(byN.get('kip-net')).toMatchObject({ timeout: 600, comment: true, counters: true });
    expect(byN.get('kip-ports')).toMatchObject({ family: null, range: { from: 1, to: 1024 }, hashSize: null, entries: ['80', '443'] });
    expect(byN.get('kip-ipportip6')!.entries).toContain('::ffff:1.2.3.4,udp:53,2001:db8::1:0:0:1');
    expect(byN.get('kip-big')!.memSize).toBeGreaterThan(0);
  });

  it('merges a set that arrives in several messages', () => {
    const msgs = dataOf(byName('listBig'));
    expect(msgs.length).toBeGreaterThanOrEqual(2);
    expect(msgs.slice(1).every((m) => (m.attrs as codec.IpsetAttrs).typeName === undefined)).toBe(true);
    const [big] = listed(byName('listBig'));
    expect(big!.entries).toHaveLength(600);
    expect(big!.entries).toEqual(savedEntries('kip-big'));
  });

  it('lists names only with IPSET_FLAG_LIST_SETNAME; a dump of a missing set fails with ENOENT', () => {
    expect(dataOf(byName('listNames')).map((m) => (m.attrs as codec.IpsetAttrs).name)).toEqual(
      save.filter((l) => l.startsWith('create ')).map((l) => l.split(' ')[1]),
    );
    expect(native.errnoName(controlOf('listMissing').errno)).toBe('ENOENT');
  });

  it('TEST: in set = ack, not in set = IPSET_ERR_EXIST', () => {
    expect(controlOf('testHit').errno).toBe(0);
    expect(native.errnoName(controlOf('testMiss').errno)).toBe('IPSET_ERR_EXIST');
  });

  it('a failing entry of a batch comes back with its LINENO in the echoed request', () => {
    const add = controlOf('addBatch');
    expect(native.errnoName(add.errno)).toBe('IPSET_ERR_EXIST');
    expect(add.echo!.attrs).toMatchObject({ name: 'kip-ipport', lineno: 2 });
    expect((add.echo!.attrs as codec.IpsetAttrs).adt).toHaveLength(3);
    expect(controlOf('delBatch').echo!.attrs).toMatchObject({ lineno: 2 });
    const range = controlOf('addBitmapRange');
    expect(range.echo!.attrs).toMatchObject({ lineno: 1 });
    const named = codec.nameTypeSpecific(new NetlinkError({ op: 'ipset.add', code: native.errnoName(range.errno), errno: range.errno }), 'bitmap:port');
    expect(named.code).toBe('IPSET_ERR_BITMAP_RANGE');
    expect(codec.nameTypeSpecific(new NetlinkError({ op: 'ipset.add', code: 'x', errno: C.IPSET_ERR_TYPE_SPECIFIC! }), 'hash:ip').code).toBe('IPSET_ERR_HASH_FULL');
  });

  it('acks: -exist add, comments, creates, rename, swap, flush, destroy; EEXIST and ENOENT', () => {
    const ok = ['addBatchExist', 'addComment', 'createIpPort', 'createIpPortIp6', 'createIpPortNet', 'createNet6', 'createIp', 'createBitmap', 'rename', 'swap', 'flush', 'destroy'];
    expect(ok.map((n) => native.errnoName(controlOf(n).errno))).toEqual(ok.map(() => 'OK'));
    expect(native.errnoName(controlOf('createExisting').errno)).toBe('EEXIST');
    expect(native.errnoName(controlOf('destroyMissing').errno)).toBe('ENOENT');
  });
});

describe('ipset decoders never crash on malformed input', () => {
  const replies = fixture.exchanges.flatMap((e) => e.replies.map((hex) => ({ schema: e.schema, buf: Buffer.from(hex, 'hex') })));

  function decodeSafely(schema: string, buf: Buffer): void {
    try {
      native.decode(schema, buf);
    } catch (e) {
      expect((e as { code?: string }).code).toBe('EBADMSG');
    }
    let table;
    try {
      table = native.decodeTable(schema, buf);
    } catch (e) {
      expect((e as { code?: string }).code).toBe('EBADMSG');
      return;
    }
    // The TS layer may reject odd values, but only with an Error.
    try {
      codec.listedSets(table);
    } catch (e) {
      expect(e).toBeInstanceOf(Error);
    }
  }

  it('every truncation of every captured reply', () => {
    fuzzTruncations(replies, ({ schema, buf }) => decodeSafely(schema, buf));
  });

  it('random bytes and random corruption of captured replies', () => {
    fuzzRandom(['ipset', 'ipset.adt'], replies, ({ schema, buf }) => decodeSafely(schema, buf), 2000);
  });
});
