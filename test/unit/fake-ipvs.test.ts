// The in-memory IpvsClient answers as the kernel does in test/kernel/uml/ipvs.test.ts.
import { describe, expect, it } from 'vitest';

import { NetlinkError, isExist, isNotFound } from '../../src/kernel/errors.js';
import type { IpvsOp, IpvsResult } from '../../src/kernel/ipvs/client.js';
import { FakeIpvsClient } from '../../src/kernel/ipvs/fake.js';
import type { Destination, VirtualService } from '../../src/kernel/ipvs/types.js';

const v4 = (port: number, scheduler = 'rr', extra: Partial<VirtualService> = {}): VirtualService => ({
  family: 'ipv4', protocol: 'tcp', address: '10.96.1.1', port, fwmark: null, scheduler, flags: [], timeout: 0, netmask: 32, ...extra,
});
const dst = (address: string, port: number, extra: Partial<Destination> = {}): Destination => ({
  address, port, forward: 'masq', weight: 1, upperThreshold: 0, lowerThreshold: 0, ...extra,
});
const codes = (rs: IpvsResult[]) => rs.map((r) => (r.ok ? 'ok' : r.error.code));

describe('FakeIpvsClient', () => {
  it('a batch reports each op like the kernel: EEXIST, ENOENT (scheduler), validation, ESRCH, ENOENT (dest)', async () => {
    const c = new FakeIpvsClient();
    const a = v4(80);
    const b = v4(81);
    const results = await c.apply([
      { kind: 'addService', service: a },
      { kind: 'addService', service: a },
      { kind: 'addService', service: v4(82, 'nosuch') },
      { kind: 'addService', service: { ...b, address: '10.96.1.300' } },
      { kind: 'deleteService', service: v4(99) },
      { kind: 'deleteDestination', service: a, destination: { address: '10.255.255.2', port: 80 } },
      { kind: 'addService', service: b },
      { kind: 'addDestination', service: b, destination: dst('10.255.255.2', 80) },
    ]);
    expect(codes(results)).toEqual(['ok', 'EEXIST', 'ENOENT', 'ERR_INVALID_INPUT', 'ESRCH', 'ENOENT', 'ok', 'ok']);
    const errors = results.flatMap((r) => (r.ok ? [] : [r.error]));
    expect(errors[0]).toMatchObject({ op: 'ipvs.addService', errno: 17, object: 'tcp/10.96.1.1:80' });
    expect(isExist(errors[0])).toBe(true);
    expect(errors[1]!.message).toMatch(/scheduler "nosuch" is not available in the kernel/);
    expect(errors[2]!.message).toMatch(/service\.address: not an IP address/);
    expect(isNotFound(errors[3])).toBe(true);
    expect(errors[4]).toMatchObject({ op: 'ipvs.deleteDestination', object: 'tcp/10.96.1.1:80 -> 10.255.255.2:80' });
    expect(c.weights()).toEqual({ 'tcp/10.96.1.1:80': {}, 'tcp/10.96.1.1:81': { '10.255.255.2:80': 1 } });
  });

  it.each<[string, IpvsOp, string]>([
    ['update of a missing service', { kind: 'updateService', service: v4(9) }, 'ESRCH'],
    ['destination added to a missing service', { kind: 'addDestination', service: v4(9), destination: dst('10.0.0.1', 1) }, 'ESRCH'],
    ['destination updated in a missing service', { kind: 'updateDestination', service: v4(9), destination: dst('10.0.0.1', 1) }, 'ESRCH'],
    ['destination deleted from a missing service', { kind: 'deleteDestination', service: v4(9), destination: { address: '10.0.0.1', port: 1 } }, 'ESRCH'],
    ['update of a missing destination', { kind: 'updateDestination', service: v4(80), destination: dst('10.0.0.9', 1) }, 'ENOENT'],
    ['duplicate destination', { kind: 'addDestination', service: v4(80), destination: dst('10.0.0.1', 8080) }, 'EEXIST'],
    ['lower threshold above upper', { kind: 'addDestination', service: v4(80), destination: dst('10.0.0.2', 1, { lowerThreshold: 5, upperThreshold: 2 }) }, 'ERANGE'],
    ['IPv6 destination in an IPv4 service (masq)', { kind: 'addDestination', service: v4(80), destination: dst('fd00::1', 1) }, 'EINVAL'],
    ['IPv6 netmask 0', { kind: 'addService', service: v4(443, 'rr', { family: 'ipv6', address: 'fd00::1', netmask: 0 }) }, 'EINVAL'],
    ['unknown persistence engine', { kind: 'addService', service: v4(444, 'rr', { pe: 'nope' }) }, 'ENOENT'],
    ['protocol is part of the key', { kind: 'deleteService', service: v4(80, 'rr', { protocol: 'udp' }) }, 'ESRCH'],
    ['negative weight (validation)', { kind: 'addDestination', service: v4(80), destination: dst('10.0.0.3', 1, { weight: -1 }) }, 'ERR_INVALID_INPUT'],
  ])('%s -> %s', async (_name, op, code) => {
    const c = new FakeIpvsClient();
    await c.apply([{ kind: 'addService', service: v4(80) }, { kind: 'addDestination', service: v4(80), destination: dst('10.0.0.1', 8080) }]);
    const [r] = await c.apply([op]);
    expect(r!.ok ? 'ok' : r!.error.code).toBe(code);
    expect(c.weights()).toEqual({ 'tcp/10.96.1.1:80': { '10.0.0.1:8080': 1 } });
  });

  it('tunnelled destinations of the other family are accepted, as the kernel does', async () => {
    const c = new FakeIpvsClient();
    const r = await c.apply([{ kind: 'addService', service: v4(80) }, { kind: 'addDestination', service: v4(80), destination: dst('fd00::1', 80, { forward: 'tunnel' }) }]);
    expect(codes(r)).toEqual(['ok', 'ok']);
  });

  it('reads back as the kernel reports: canonical addresses, scheduler flags named after the scheduler, empty dump for a missing service', async () => {
    const c = new FakeIpvsClient();
    const v6 = v4(443, 'rr', { family: 'ipv6', address: 'FD00:0:0::1', flags: ['persistent'], timeout: 600, netmask: 64 });
    await c.apply([
      { kind: 'addService', service: v6 },
      { kind: 'addDestination', service: v6, destination: dst('FD00::0:2', 8443) },
      { kind: 'addService', service: v4(81, 'rr', { flags: ['sh-fallback'] }) },
      { kind: 'updateService', service: v4(81, 'sh', { flags: ['flag-1', 'sh-port'] }) },
    ]);
    const all = await c.dumpAll();
    expect(all.map((s) => [s.address, s.flags, s.scheduler])).toEqual([
      ['fd00::1', ['persistent'], 'rr'],
      ['10.96.1.1', ['sh-fallback', 'sh-port'], 'sh'],
    ]);
    expect(all[0]!.destinations).toEqual([{ ...dst('fd00::2', 8443), activeConns: 0, inactiveConns: 0, persistConns: 0 }]);
    expect(all[0]!.stats).toBeUndefined();
    expect((await c.dumpAll({ stats: true }))[0]!.stats).toMatchObject({ conns: 0 });
    expect(await c.listDestinations(v4(4242))).toEqual([]);
    expect((await c.listServices()).map((s) => s.port)).toEqual([443, 81]);
    await c.flush();
    expect(await c.dumpAll()).toEqual([]);
  });

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

  it('timeouts: 0 leaves a value unchanged; invalid values are rejected', async () => {
    const c = new FakeIpvsClient();
    await c.setTimeouts({ tcp: 901, tcpFin: 0, udp: 301 });
    expect(await c.getTimeouts()).toEqual({ tcp: 901, tcpFin: 120, udp: 301 });
    await expect(c.setTimeouts({ tcp: -1, tcpFin: 0, udp: 0 })).rejects.toThrow(/expected seconds/);
    expect(await c.info()).toEqual({ version: '1.2.1', connTableSize: 4096 });
  });
});
