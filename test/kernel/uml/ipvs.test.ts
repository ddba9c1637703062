// The IPVS client against a real IPVS kernel (UML): the case table the fake runs too, and
// cross-checks both ways with ipvsadm.
import { execFileSync } from 'node:child_process';

import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';

import { INLINE_MAX_OPS, inlineBatch, NetlinkIpvsClient, throwFirstFailure, type IpvsClient, type IpvsOp } from '../../../src/kernel/ipvs/client.js';
import type { Destination, VirtualService } from '../../../src/kernel/ipvs/types.js';
import { IPVS_CASES, runIpvsCase } from '../lib/cases/ipvs-cases.js';
import { assertIsolated } from '../lib/guard.js';
import { normalize, parseSave, toRestoreLines, withThresholds, type SavedService } from '../lib/ipvsadm.js';

assertIsolated();

const sh = (cmd: string, args: string[], input?: string): string =>
  execFileSync(cmd, args, { encoding: 'utf8', ...(input !== undefined ? { input } : {}) });
/** What ipvsadm reads: `-Sn` for the objects, `-Ln --thresholds` for what -S leaves out. */
const ipvsadmSave = (): SavedService[] => withThresholds(parseSave(sh('ipvsadm', ['-Sn'])), sh('ipvsadm', ['-Ln', '--thresholds', '--exact']));

const v4 = (port: number, scheduler: string, extra: Partial<VirtualService> = {}): VirtualService => ({
  family: 'ipv4', protocol: 'tcp', address: '10.96.1.1', port, fwmark: null, scheduler, flags: [], timeout: 0, netmask: 32, ...extra,
});
const dst = (address: string, port: number, extra: Partial<Destination> = {}): Destination => ({
  address, port, forward: 'masq', weight: 1, upperThreshold: 0, lowerThreshold: 0, ...extra,
});
const SCHEDULERS = ['rr', 'wrr', 'lc', 'wlc', 'lblc', 'lblcr', 'dh', 'sh', 'sed', 'nq', 'mh', 'fo', 'ovf'];

/** Every feature the client must round-trip: schedulers, flags, persistence, families, protocols, fwmarks, forwarding. */
const MATRIX: SavedService[] = [
  ...SCHEDULERS.map((s, i) => ({ ...v4(1000 + i, s), destinations: [dst('10.255.255.2', 8080), dst('10.255.255.3', 8080, { weight: 3 })] })),
  { ...v4(80, 'rr', { flags: ['persistent'], timeout: 10800, netmask: 24 }), destinations: [dst('10.255.255.4', 80, { upperThreshold: 100, lowerThreshold: 10 })] },
  { ...v4(81, 'sh', { flags: ['sh-fallback', 'sh-port'] }), destinations: [dst('10.255.255.5', 81, { forward: 'route' })] /* ipvsadm: DR keeps the service port */ },
  { ...v4(82, 'mh', { flags: ['mh-fallback', 'mh-port'] }), destinations: [dst('10.255.255.6', 82, { forward: 'tunnel', weight: 0 })] },
  { ...v4(53, 'rr', { protocol: 'udp', flags: ['ops'] }), destinations: [dst('10.255.255.7', 5353)] },
  { ...v4(9000, 'wlc', { protocol: 'sctp' }), destinations: [dst('10.255.255.8', 9000)] },
  { ...v4(443, 'rr', { family: 'ipv6', address: 'fd00:96::1', flags: ['persistent'], timeout: 600, netmask: 64 }), destinations: [dst('fd00:255::2', 8443)] },
  { ...v4(0, 'rr', { protocol: null, address: null, port: null, fwmark: 7 }), destinations: [dst('10.255.255.9', 0, { forward: 'route' })] },
  { ...v4(0, 'lc', { family: 'ipv6', protocol: null, address: null, port: null, fwmark: 8 }), destinations: [dst('fd00:255::3', 0, { forward: 'route' })] },
];

let client: IpvsClient;

beforeAll(async () => {
  sh('ip', ['-6', 'addr', 'add', 'fd00:255::1/64', 'dev', 'uml0', 'nodad']);
  const a = await NetlinkIpvsClient.open();
  if (!a.available) throw new Error(a.reason);
  client = a.client;
});
afterAll(() => {
  client?.close();
  sh('ipvsadm', ['-C']);
  sh('ip', ['-6', 'addr', 'del', 'fd00:255::1/64', 'dev', 'uml0']);
});
beforeEach(() => void sh('ipvsadm', ['-C']));

function opsFor(services: readonly SavedService[]): IpvsOp[] {
  return services.flatMap(({ destinations, ...service }) => [
    { kind: 'addService' as const, service },
    ...destinations.map((destination) => ({ kind: 'addDestination' as const, service, destination })),
  ]);
}

describe('the IPVS case table (the fake runs it too: test/unit/fake-ipvs.test.ts)', () => {
  it.each(IPVS_CASES.map((c) => [c.name, c] as const))('%s', (_name, c) => runIpvsCase(client, c));
});

describe('IPVS client against the kernel', () => {
  it('reports version and connection table size like ipvsadm', async () => {
    const info = await client.info();
    expect(sh('ipvsadm', ['-Ln'])).toContain(`IP Virtual Server version ${info.version} (size=${info.connTableSize})`);
  });

  it('what the client writes, ipvsadm reads exactly', async () => {
    throwFirstFailure(await client.apply(opsFor(MATRIX)));
    expect(normalize(ipvsadmSave())).toEqual(normalize(MATRIX));
    // --exact: the same objects in ipvsadm's list format, one line per service and real server.
    const listed = sh('ipvsadm', ['-Ln', '--exact']).split('\n').filter((l) => /^(TCP|UDP|SCTP|FWM)|->/.test(l.trim()));
    expect(listed.length).toBe(MATRIX.length + MATRIX.reduce((n, s) => n + s.destinations.length, 0) + 1);
  });

  it('what ipvsadm writes, the client reads exactly', async () => {
    sh('ipvsadm-restore', [], MATRIX.flatMap(toRestoreLines).join('\n') + '\n');
    const dumped = await client.dumpAll();
    expect(normalize(dumped)).toEqual(normalize(MATRIX));
    for (const s of dumped) for (const d of s.destinations) expect(d).toMatchObject({ activeConns: 0, inactiveConns: 0, persistConns: 0 });
    expect(dumped[0]!.stats).toBeUndefined(); // counters are decoded only on request
    const withStats = await client.dumpAll({ stats: true });
    expect(withStats[0]!.stats).toMatchObject({ conns: 0, inBytes: 0 });
    expect(withStats[0]!.destinations[0]!.stats).toMatchObject({ conns: 0, outPkts: 0 });
  });

  it('a batch of several sendmsg chunks: only failures are answered, each named, however the chunks fall', async () => {
    // The kernel acks only the last message of each chunk (1,024 messages); every other message
    // is answered only when it fails. Failures here: the last message of the first chunk, the
    // first of the second, one in the middle of the third, and the very last message.
    const a = v4(83, 'rr');
    const ops: IpvsOp[] = [{ kind: 'addService', service: a }];
    for (let j = 0; j < 2500; j++) ops.push({ kind: 'addDestination', service: a, destination: dst('10.255.255.2', 1000 + j) });
    const dup: IpvsOp = { kind: 'addDestination', service: a, destination: dst('10.255.255.2', 1000) };
    const failing = [1023, 1024, 2100];
    for (const k of failing) ops[k] = dup;
    ops.push(dup);
    failing.push(ops.length - 1);
    const results = await client.apply(ops);
    const codes = results.map((r, i) => [i, r.ok ? 'ok' : r.error.code]).filter(([, c]) => c !== 'ok');
    expect(codes).toEqual(failing.map((i) => [i, 'EEXIST']));
    for (const i of failing) expect(results[i]).toMatchObject({ ok: false, error: { op: 'ipvs.addDestination', object: 'tcp/10.96.1.1:83 -> 10.255.255.2:1000' } });
    expect(await client.listDestinations(a)).toHaveLength(2500 - 3);
    expect(results[1]).toBe(results[2]); // every success is one shared object, not one per op
    // A batch whose every message fails: each answered.
    const again = await client.apply(ops.slice(1, 1500));
    expect(again.every((r) => !r.ok && r.error.code === 'EEXIST')).toBe(true);
  });

  it('a few real-server ops are sent on the JS thread (settled before the event loop turns), service ops on the addon\'s thread', async () => {
    const a = v4(80, 'rr');
    /** Runs `ops`; true when the event loop turned before the results came back. */
    const turned = async (ops: IpvsOp[]) => {
      let t = false;
      setImmediate(() => (t = true));
      const results = await client.apply(ops);
      return { turned: t, codes: results.map((r) => (r.ok ? 'ok' : r.error.code)) };
    };
    expect(inlineBatch([{ kind: 'addService', service: a }])).toBe(false);
    expect(await turned([{ kind: 'addService', service: a }])).toEqual({ turned: true, codes: ['ok'] }); // may load a module: not inline
    const ops: IpvsOp[] = [
      { kind: 'addDestination', service: a, destination: dst('10.255.255.2', 80) },
      { kind: 'addDestination', service: a, destination: dst('10.255.255.2', 80) },
      { kind: 'addDestination', service: v4(99, 'rr'), destination: dst('10.255.255.2', 80) },
      { kind: 'updateDestination', service: a, destination: dst('10.255.255.3', 80) },
      { kind: 'addDestination', service: a, destination: dst('10.255.255.3', 80, { weight: 5 }) },
      { kind: 'updateDestination', service: a, destination: dst('10.255.255.2', 80, { weight: 0 }) },
      { kind: 'addDestination', service: a, destination: { ...dst('10.255.255.4', 80), address: '10.255.255.300' } },
    ];
    expect(inlineBatch(ops)).toBe(true);
    expect(await turned(ops)).toEqual({ turned: false, codes: ['ok', 'EEXIST', 'ESRCH', 'ENOENT', 'ok', 'ok', 'ERR_INVALID_INPUT'] });
    expect(normalize(ipvsadmSave())).toEqual(normalize([{ ...a, destinations: [dst('10.255.255.2', 80, { weight: 0 }), dst('10.255.255.3', 80, { weight: 5 })] }]));
    // Past INLINE_MAX_OPS: the addon's thread.
    const many = Array.from({ length: INLINE_MAX_OPS + 1 }, (_, i): IpvsOp => ({ kind: 'addDestination', service: a, destination: dst(`10.255.254.${i + 1}`, 80) }));
    expect(await turned(many)).toMatchObject({ turned: true });
    expect(await client.listDestinations(a)).toHaveLength(2 + INLINE_MAX_OPS + 1);
  });

  it('sets and reads timeouts like ipvsadm --set', async () => {
    const before = await client.getTimeouts();
    await client.setTimeouts({ tcp: 901, tcpFin: 121, udp: 301 });
    expect(sh('ipvsadm', ['-L', '--timeout'])).toContain('Timeout (tcp tcpfin udp): 901 121 301');
    sh('ipvsadm', ['--set', '902', '0', '0']);
    expect(await client.getTimeouts()).toEqual({ tcp: 902, tcpFin: 121, udp: 301 });
    await client.setTimeouts(before);
  });

  it('dumps large tables completely (multipart dumps) and flushes', async () => {
    const big: SavedService[] = Array.from({ length: 300 }, (_, i) => ({
      ...v4(10000 + i, 'rr'),
      destinations: Array.from({ length: 10 }, (_, j) => dst(`10.255.${1 + Math.floor(j / 250)}.${(j % 250) + 2}`, 8000 + i)),
    }));
    sh('ip', ['addr', 'add', '10.255.1.1/24', 'dev', 'uml0']);
    try {
      throwFirstFailure(await client.apply(opsFor(big)));
      const dumped = await client.dumpAll();
      expect(dumped).toHaveLength(300);
      expect(normalize(dumped)).toEqual(normalize(big));
      expect(normalize(ipvsadmSave())).toEqual(normalize(big));
      await client.flush();
      expect(await client.listServices()).toEqual([]);
    } finally {
      sh('ip', ['addr', 'del', '10.255.1.1/24', 'dev', 'uml0']);
    }
  });
});
