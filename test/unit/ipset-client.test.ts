// The client's batch policy against a scripted kernel: per-entry results from LINENO echoes,
// rounds for the entries after a failing one, singles when a message fails without LINENO.
import { describe, expect, it } from 'vitest';

import { NetlinkError, ValidationError, isExist, isNotFound } from '../../src/kernel/errors.js';
import { NetlinkIpsetClient } from '../../src/kernel/ipset/client.js';
import type { IpsetAttrs } from '../../src/kernel/ipset/codec.js';
import type { NetlinkConnection, OpOutcome } from '../../src/kernel/netlink.js';
import { native, type NlMessage, type NlRequest } from '../../src/native/binding.js';

const C = native.constants.ipset!;
const N = native.constants.netlink!;

/**
 * A fake kernel behind the connection, with ip_set_ad()'s semantics: entries in order, stop at
 * the first failure, echo its LINENO (or, for a "malformed" entry, fail with no echo after the
 * entries before it were applied). Requests go through the real codec (encode then decode).
 */
class FakeKernel {
  readonly members = new Set<string>();
  batches = 0;
  messages = 0;
  constructor(
    private readonly type: string,
    private readonly reject: (e: Record<string, unknown>) => number = () => 0,
    private readonly malformed: (e: Record<string, unknown>) => boolean = () => false,
  ) {}

  private decode(schema: string, req: NlRequest): NlMessage {
    return native.decode(schema, native.encode(schema, [req]))[0] as NlMessage;
  }

  private apply(req: NlRequest): { errno: number; echo?: NlMessage } {
    const msg = this.decode('ipset.adt', req);
    const a = msg.attrs as IpsetAttrs;
    const add = (msg.type & 0xff) === C.IPSET_CMD_ADD;
    const exist = (msg.flags & N.NLM_F_EXCL!) === 0;
    for (const d of a.adt ?? []) {
      const { lineno, ...elem } = d as Record<string, unknown>;
      if (this.malformed(elem)) return { errno: C.IPSET_ERR_PROTOCOL! };
      const key = JSON.stringify(elem, (_k, v) => (v instanceof Uint8Array ? Buffer.from(v).toString('hex') : v));
      let errno = this.reject(elem);
      if (!errno && add === this.members.has(key) && !exist) errno = C.IPSET_ERR_EXIST!;
      if (errno) return { errno, echo: { ...msg, attrs: { ...a, lineno } } };
      if (add) this.members.add(key);
      else this.members.delete(key);
    }
    return { errno: 0 };
  }

  connection(): NetlinkConnection {
    const outcome = (errno: number, op: string, echo?: NlMessage): OpOutcome => {
      if (!errno) return { ok: true, replies: [] };
      const error = new NetlinkError({ op, code: native.errnoName(errno), errno });
      return echo ? { ok: false, error, echo } : { ok: false, error };
    };
    const header = { type: 0, flags: 0, seq: 0, pid: 0, header: {}, attrs: { name: 's', typeName: this.type, family: 2, revision: 1 } };
    const fake = {
      batch: async (_schema: string, reqs: NlRequest[], label: (i: number) => { op: string }) => {
        this.batches++;
        this.messages += reqs.length;
        return reqs.map((r, i) => {
          const { errno, echo } = this.apply(r);
          return outcome(errno, label(i).op, echo);
        });
      },
      request: async () => [header],
      dump: async () => [],
      close: () => undefined,
    };
    return fake as unknown as NetlinkConnection;
  }
}

const ips = (n: number, from = 0) => Array.from({ length: n }, (_, i) => `10.${((i + from) >> 16) & 255}.${((i + from) >> 8) & 255}.${(i + from) & 255},tcp:80`);
const failures = (r: Array<{ ok: boolean }>) => r.flatMap((x, i) => (x.ok ? [] : [i]));

describe('NetlinkIpsetClient batch policy', () => {
  it('one result per entry: the duplicates fail with IPSET_ERR_EXIST naming the entry, the others are applied', async () => {
    const kernel = new FakeKernel('hash:ip,port');
    const client = NetlinkIpsetClient.fromConnection(kernel.connection(), 7);
    expect((await client.add('s', ips(3, 100))).every((r) => r.ok)).toBe(true);
    const entries = ips(5000);
    const results = await client.add('s', entries);
    expect(failures(results)).toEqual([100, 101, 102]);
    const r = results[101] as { ok: false; error: NetlinkError };
    expect(r.error).toMatchObject({ code: 'IPSET_ERR_EXIST', op: 'ipset.add', object: `s ${entries[101]}` });
    expect(isExist(r.error)).toBe(true);
    expect(kernel.members.size).toBe(5000);
    expect(kernel.batches).toBeLessThanOrEqual(1 + 4);
  });

  it('a batch where every entry fails settles in a bounded number of rounds', async () => {
    const kernel = new FakeKernel('hash:ip,port');
    const client = NetlinkIpsetClient.fromConnection(kernel.connection(), 7);
    await client.add('s', ips(2000));
    kernel.batches = 0;
    kernel.messages = 0;
    const again = await client.add('s', ips(2000));
    expect(failures(again)).toHaveLength(2000);
    expect(kernel.batches).toBeLessThanOrEqual(6);
    expect(kernel.messages).toBeLessThan(2 * 2000);
    expect((await client.add('s', ips(2000), { exist: true })).every((x) => x.ok)).toBe(true);
  });

  it('del reports entries that are not in the set as not found', async () => {
    const kernel = new FakeKernel('hash:ip,port');
    const client = NetlinkIpsetClient.fromConnection(kernel.connection(), 7);
    await client.add('s', ips(10));
    const results = await client.del('s', [...ips(10), ...ips(1, 50)]);
    expect(failures(results)).toEqual([10]);
    expect(isNotFound((results[10] as { error: unknown }).error)).toBe(true);
    expect(isExist((results[10] as { error: unknown }).error)).toBe(false);
    expect(kernel.members.size).toBe(0);
  });

  it('invalid entries fail alone with a ValidationError naming set and entry, and are never sent', async () => {
    const kernel = new FakeKernel('hash:ip,port');
    const client = NetlinkIpsetClient.fromConnection(kernel.connection(), 7);
    const results = await client.add('s', ['10.0.0.1,tcp:80', '10.0.0.300,tcp:80', '10.0.0.2,gre:1', '10.0.0.3,udp:53']);
    expect(failures(results)).toEqual([1, 2]);
    const e = (results[1] as { error: ValidationError }).error;
    expect(e).toBeInstanceOf(ValidationError);
    expect(e.message).toBe('ipset.add: s entry "10.0.0.300,tcp:80": address: "10.0.0.300" is not an IPv4 address');
    expect(kernel.members.size).toBe(2);
  });

  it('names type-specific codes after the set type', async () => {
    const kernel = new FakeKernel('bitmap:port', (e) => ((e.port as number) > 1024 ? C.IPSET_ERR_TYPE_SPECIFIC! : 0));
    const client = NetlinkIpsetClient.fromConnection(kernel.connection(), 7);
    const results = await client.add('s', ['80', '2000', '443']);
    expect(failures(results)).toEqual([1]);
    expect((results[1] as { error: NetlinkError }).error).toMatchObject({ code: 'IPSET_ERR_BITMAP_RANGE', object: 's 2000' });
  });

  it('a message rejected without LINENO is retried one entry per message', async () => {
    const kernel = new FakeKernel('hash:ip,port', undefined, (e) => (e.ip as { v4: number }).v4 === 0x0a000007);
    const client = NetlinkIpsetClient.fromConnection(kernel.connection(), 7);
    const results = await client.add('s', ips(20), { exist: true });
    expect(failures(results)).toEqual([7]);
    expect((results[7] as { error: NetlinkError }).error).toMatchObject({ code: 'IPSET_ERR_PROTOCOL', object: 's 10.0.0.7,tcp:80' });
    expect(kernel.members.size).toBe(19);
  });

  it('mixes columnar entries and entries with comments or counters', async () => {
    const kernel = new FakeKernel('hash:net');
    const client = NetlinkIpsetClient.fromConnection(kernel.connection(), 7);
    const results = await client.add('s', ['10.0.0.0/8 comment "a"', '10.1.0.0/16', '10.2.0.0/16 packets 1 bytes 2', '10.1.0.0/16']);
    expect(failures(results)).toEqual([3]);
    expect(kernel.members.size).toBe(3);
  });
});
