// FakeIpvsClient: the IPVS case table the kernel runs too (test/kernel/uml/ipvs.test.ts), then
// what only the fake has (connection counters set by hand, fault injection, counters of calls).
import { describe, expect, it } from 'vitest';

import type { NetlinkError } from '../../src/kernel/errors.js';
import type { IpvsOp, IpvsResult } from '../../src/kernel/ipvs/client.js';
import { FakeIpvsClient } from '../../src/kernel/ipvs/fake.js';
import type { Destination, VirtualService } from '../../src/kernel/ipvs/types.js';
import { IPVS_CASES, runIpvsCase } from '../kernel/lib/cases/ipvs-cases.js';

const v4 = (port: number, scheduler = 'rr', extra: Partial<VirtualService> = {}): VirtualService => ({
  family: 'ipv4', protocol: 'tcp', address: '10.96.1.1', port, fwmark: null, scheduler, flags: [], timeout: 0, netmask: 32, ...extra,
});
const dst = (address: string, port: number, extra: Partial<Destination> = {}): Destination => ({
  address, port, forward: 'masq', weight: 1, upperThreshold: 0, lowerThreshold: 0, ...extra,
});
const codes = (rs: IpvsResult[]) => rs.map((r) => (r.ok ? 'ok' : r.error.code));

describe('FakeIpvsClient: the IPVS case table', () => {
  it.each(IPVS_CASES.map((c) => [c.name, c] as const))('%s', (_name, c) => runIpvsCase(new FakeIpvsClient(), c));
});

describe('FakeIpvsClient', () => {
  it('updates keep connection counters; setConnections sets them', async () => {
    const c = new FakeIpvsClient();
    await c.apply([{ kind: 'addService', service: v4(80) }, { kind: 'addDestination', service: v4(80), destination: dst('10.0.0.1', 8080) }]);
    c.setConnections(v4(80), { address: '10.0.0.1', port: 8080 }, 3, 2);
    await c.apply([{ kind: 'updateDestination', service: v4(80), destination: dst('10.0.0.1', 8080, { weight: 0 }) }]);
    expect(await c.listDestinations(v4(80))).toEqual([{ ...dst('10.0.0.1', 8080, { weight: 0 }), activeConns: 3, inactiveConns: 2, persistConns: 0 }]);
    expect(() => c.setConnections('tcp/10.96.1.1:80', '10.0.0.9:1', 1)).toThrow(/no destination/);
  });

  it('injects op faults (next N matching ops) and whole-call faults; counts calls and ops', async () => {
    const c = new FakeIpvsClient();
    c.failOps('ENOMEM', (op) => op.kind === 'addDestination', 2);
    const ops: IpvsOp[] = [
      { kind: 'addService', service: v4(80) },
      ...[1, 2, 3].map((i): IpvsOp => ({ kind: 'addDestination', service: v4(80), destination: dst(`10.0.0.${i}`, 80) })),
    ];
    const r = await c.apply(ops);
    expect(codes(r)).toEqual(['ok', 'ENOMEM', 'ENOMEM', 'ok']);
    expect((r[1] as { error: NetlinkError }).error).toMatchObject({ errno: 12, object: 'tcp/10.96.1.1:80 -> 10.0.0.1:80' });
    expect(c.weights()).toEqual({ 'tcp/10.96.1.1:80': { '10.0.0.3:80': 1 } });
    c.failCall('apply', new Error('socket gone'));
    await expect(c.apply(ops)).rejects.toThrow('socket gone');
    expect(c.calls.apply).toBe(2);
    expect(c.ops).toMatchObject({ addService: 1, addDestination: 3 });
    expect(c.opCount).toBe(4);
    await c.dumpAll();
    await c.listDestinations(v4(80));
    expect(c.dumpCount).toBe(2);
    c.resetCounters();
    expect([c.opCount, c.dumpCount, c.log.length]).toEqual([0, 0, 0]);
  });

  it('rejects invalid timeouts', async () => {
    await expect(new FakeIpvsClient().setTimeouts({ tcp: -1, tcpFin: 0, udp: 0 })).rejects.toThrow(/expected seconds/);
  });
});
