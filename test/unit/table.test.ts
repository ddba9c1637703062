// Dump tables: the addon's columnar decoding of replies (DumpOptions.table), and reading rows back.
import { describe, expect, it } from 'vitest';

import { dumpRows, rowReader } from '../../src/kernel/table.js';
import { native } from '../../src/native/binding.js';

const msg = (attrs: object, cmd = 1) => ({ type: 28, header: { cmd, version: 1 }, attrs });

describe('dump tables', () => {
  it('one row per message, columns by attribute path; absent values marked, strings shared, bytes concatenated', () => {
    const buf = native.encode('ipvs', [
      msg({ service: { af: 2, schedName: 'rr', addr: Buffer.from([10, 0, 0, 1]) } }),
      msg({ service: { af: 10, fwmark: 7, schedName: 'wrr' } }, 2),
      msg({ service: { af: 2, schedName: 'rr', addr: Buffer.alloc(16, 1) }, timeoutTcp: 900 }),
    ]);
    const t = native.decodeTable('ipvs', buf);
    expect(t.rows).toBe(3);
    expect(t.starts).toBeUndefined();
    expect(t.columns['header.cmd']).toMatchObject({ kind: 'number', numbers: Float64Array.of(1, 2, 1) });
    expect(t.columns['service.af']).toMatchObject({ kind: 'number', present: Uint8Array.of(1, 1, 1), numbers: Float64Array.of(2, 10, 2) });
    expect(t.columns['service.fwmark']).toMatchObject({ present: Uint8Array.of(0, 1, 0), numbers: Float64Array.of(0, 7, 0) });
    expect(t.columns['service.schedName']).toMatchObject({ kind: 'string', codes: Uint32Array.of(0, 1, 0), dict: ['rr', 'wrr'] });
    expect(t.columns['service.addr']).toMatchObject({ kind: 'bytes', present: Uint8Array.of(1, 0, 1), offsets: Uint32Array.of(0, 4, 4, 20) });
    expect(t.columns.timeoutTcp).toMatchObject({ present: Uint8Array.of(0, 0, 1) });

    const row = rowReader(t, 'service');
    expect(row(0)).toEqual({ af: 2, schedName: 'rr', addr: Uint8Array.of(10, 0, 0, 1) });
    expect(row(1)).toEqual({ af: 10, fwmark: 7, schedName: 'wrr' });
    expect(row(2).addr).toEqual(new Uint8Array(16).fill(1));
    expect(rowReader(t, 'dest')(0)).toEqual({});
  });

  it('nests inside the row prefix become objects, present only when one of their attributes is', () => {
    const t = native.decodeTable('ipvs', native.encode('ipvs', [msg({ dest: { port: 80, stats: { conns: 3, inBytes: 10n } } }), msg({ dest: { port: 81 } })]));
    const row = rowReader(t, 'dest');
    expect(row(0)).toEqual({ port: 80, stats: { conns: 3, inBytes: 10 } });
    expect(row(1)).toEqual({ port: 81 });
    expect(rowReader(native.decodeTable('ipvs', native.encode('ipvs', [msg({ dest: { port: 80, stats: { conns: 3 } } })]), ['stats']), 'dest')(0)).toEqual({ port: 80 });
  });

  it('a list attribute is a table of its own: one row per element, with the row it belongs to', () => {
    const m = (name: string, adt?: object[]) => ({ type: 0x609, attrs: { protocol: 7, name, ...(adt ? { adt } : {}) } });
    const t = native.decodeTable('ipset.adt', native.encode('ipset.adt', [m('a', [{ port: 80 }, { port: 81, proto: 6 }]), m('b'), m('c', [{ port: 82 }])]));
    expect(t.rows).toBe(3);
    expect(rowReader(t)(1)).toEqual({ protocol: 7, name: 'b' });
    const adt = t.lists!.adt!;
    expect(adt.rows).toBe(3);
    expect(adt.parent).toEqual(Uint32Array.of(0, 0, 2));
    expect([0, 1, 2].map(rowReader(adt))).toEqual([{ port: 80 }, { port: 81, proto: 6 }, { port: 82 }]);
    expect(native.decodeTable('ipset.adt', native.encode('ipset.adt', [m('a')])).lists).toBeUndefined();
  });

  it('dumpRows: the rows of one dump of a dumpMany table', () => {
    const t = { rows: 5, starts: Uint32Array.of(0, 2, 2, 5), columns: {} };
    expect([0, 1, 2].map((k) => dumpRows(t, k))).toEqual([[0, 1], [], [2, 3, 4]]);
    expect(dumpRows({ rows: 2, columns: {} }, 0)).toEqual([0, 1]);
  });

  it('malformed replies fail as EBADMSG naming the row and the attribute', () => {
    const ok = native.encode('ipvs', [msg({ service: { af: 2 } }), msg({ service: { af: 2, port: 80 } })]);
    const bad = Buffer.from(ok);
    // the second message's port attribute (BE16, 2 bytes): claim 3 bytes of payload
    const at = bad.indexOf(Buffer.from([0x06, 0x00, 0x04, 0x00]), ok.readUInt32LE(0));
    bad.writeUInt16LE(7, at);
    expect(() => native.decodeTable('ipvs', bad)).toThrow(/row 1: service\.port: expected 2 bytes, got 3/);
    const addr = native.encode('ipvs', [msg({ service: { addr: Buffer.alloc(4), af: 2 } })]);
    addr.writeUInt16LE(7, addr.indexOf(Buffer.from([0x08, 0x00, 0x03, 0x00]))); // ADDR: 3 bytes
    expect(() => native.decodeTable('ipvs', addr)).toThrow(/row 0: service\.addr: wrong length 3/);
    const list = native.encode('ipset.adt', [{ type: 0x609, attrs: { protocol: 7, name: 's', adt: [{ port: 80 }, { port: 81 }] } }]);
    list.writeUInt16LE(7, list.lastIndexOf(Buffer.from([0x06, 0x00, 0x04, 0x40]))); // the second element's port: 3 bytes
    expect(() => native.decodeTable('ipset.adt', list)).toThrow(/row 0: adt\[1\]\.port: expected 2 bytes, got 3/);
  });
});
