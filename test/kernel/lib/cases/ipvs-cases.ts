// The IPVS case table: each case a sequence of IpvsClient calls and what each must come to. It
// runs against FakeIpvsClient (test/unit/fake-ipvs.test.ts) and against the kernel through
// NetlinkIpvsClient (test/kernel/uml/ipvs.test.ts), so the fake cannot drift from the kernel.
// Each case starts from an empty IPVS table. Real servers are in 10.255.255.0/24 and
// fd00:255::/64 (UML's uml0 network). Dumps are compared sorted (services come in the order of the
// kernel's hash); a step with `ordered` holds the order of real servers.
import { expect } from 'vitest';

import type { IpvsClient, IpvsOp, ServiceWithDestinations } from '../../../../src/kernel/ipvs/client.js';
import {
  destinationId,
  serviceId,
  type Destination,
  type DestinationStatus,
  type IpvsInfo,
  type IpvsTimeouts,
  type ServiceKey,
  type ServiceStatus,
  type VirtualService,
} from '../../../../src/kernel/ipvs/types.js';
import { expectOutcomes, type Outcome } from './outcome.js';

/** One call and what it must come to. */
export type IpvsStep =
  /** apply(): one outcome per op. */
  | { apply: IpvsOp[]; results: Outcome[] }
  /** dumpAll(): service line -> its real servers' lines (see serviceLine, destinationLine). */
  | { dump: Record<string, string[]> }
  /** listServices(): the service lines. */
  | { services: string[] }
  /** listDestinations(service): the real servers' lines (in the kernel's order when `ordered`). */
  | { destinations: ServiceKey; are: string[]; ordered?: boolean }
  /** dumpAll({ stats }): every service and real server has zero counters (stats) or none. */
  | { counters: 'zero' | 'absent' }
  | { setTimeouts: IpvsTimeouts }
  | { timeouts: IpvsTimeouts }
  | { info: IpvsInfo }
  | { flush: true };

export interface IpvsCase {
  name: string;
  steps: IpvsStep[];
}

/** `tcp/10.96.1.1:80 rr [persistent] timeout 30 netmask 24`: every field of a service as read back. */
export function serviceLine(s: ServiceStatus): string {
  const flags = s.flags.length ? ` [${s.flags.join(',')}]` : '';
  return `${serviceId(s)} ${s.scheduler}${flags} timeout ${s.timeout} netmask ${s.netmask}${s.pe ? ` pe ${s.pe}` : ''}`;
}

/** `10.255.255.2:80 masq weight 1`, then ` thresholds L-U` and ` conns A/I/P` when not zero. */
export function destinationLine(d: DestinationStatus): string {
  const thresholds = d.lowerThreshold || d.upperThreshold ? ` thresholds ${d.lowerThreshold}-${d.upperThreshold}` : '';
  const conns = d.activeConns || d.inactiveConns || d.persistConns ? ` conns ${d.activeConns}/${d.inactiveConns}/${d.persistConns}` : '';
  return `${destinationId(d)} ${d.forward} weight ${d.weight}${thresholds}${conns}`;
}

const sorted = (a: string[]) => a.sort();

function dumpView(all: ServiceWithDestinations[]): Record<string, string[]> {
  return Object.fromEntries(all.map((s) => [serviceLine(s), sorted(s.destinations.map(destinationLine))]).sort(([a], [b]) => (a! < b! ? -1 : 1)));
}

/** Runs one case against `client` (its IPVS table empty), asserting every step. */
export async function runIpvsCase(client: IpvsClient, c: IpvsCase): Promise<void> {
  for (const [i, step] of c.steps.entries()) {
    const where = `${c.name}: step ${i + 1} (${Object.keys(step)[0]})`;
    if ('apply' in step) expectOutcomes(await client.apply(step.apply), step.results, where);
    else if ('dump' in step) expect(dumpView(await client.dumpAll()), where).toEqual(step.dump);
    else if ('services' in step) expect(sorted((await client.listServices()).map(serviceLine)), where).toEqual(sorted([...step.services]));
    else if ('destinations' in step) {
      const lines = (await client.listDestinations(step.destinations)).map(destinationLine);
      if (step.ordered) expect(lines, where).toEqual(step.are);
      else expect(sorted(lines), where).toEqual(sorted([...step.are]));
    }
    else if ('counters' in step) {
      const all = await client.dumpAll(step.counters === 'zero' ? { stats: true } : {});
      const objects = all.flatMap((s) => [s, ...s.destinations]);
      expect(objects.length, where).toBeGreaterThan(0);
      for (const o of objects) {
        if (step.counters === 'absent') expect(o.stats, where).toBeUndefined();
        else expect(o.stats, where).toEqual({ conns: 0, inPkts: 0, outPkts: 0, inBytes: 0, outBytes: 0, cps: 0, inPps: 0, outPps: 0, inBps: 0, outBps: 0 });
      }
    } else if ('setTimeouts' in step) await client.setTimeouts(step.setTimeouts);
    else if ('timeouts' in step) expect(await client.getTimeouts(), where).toEqual(step.timeouts);
    else if ('info' in step) expect(await client.info(), where).toEqual(step.info);
    else await client.flush();
  }
}

const v4 = (port: number, scheduler = 'rr', extra: Partial<VirtualService> = {}): VirtualService => ({
  family: 'ipv4', protocol: 'tcp', address: '10.96.1.1', port, fwmark: null, scheduler, flags: [], timeout: 0, netmask: 32, ...extra,
});
const v6 = (port: number, extra: Partial<VirtualService> = {}): VirtualService => v4(port, 'rr', { family: 'ipv6', address: 'fd00:96::1', netmask: 128, ...extra });
const mark = (fwmark: number, family: 'ipv4' | 'ipv6' = 'ipv4'): VirtualService =>
  v4(0, 'rr', { family, protocol: null, address: null, port: null, fwmark, netmask: family === 'ipv4' ? 32 : 128 });
const dst = (address: string, port: number, extra: Partial<Destination> = {}): Destination => ({
  address, port, forward: 'masq', weight: 1, upperThreshold: 0, lowerThreshold: 0, ...extra,
});
const key = (d: Destination) => ({ address: d.address, port: d.port });
const addService = (service: VirtualService): IpvsOp => ({ kind: 'addService', service });
const updateService = (service: VirtualService): IpvsOp => ({ kind: 'updateService', service });
const deleteService = (service: ServiceKey): IpvsOp => ({ kind: 'deleteService', service });
const addDest = (service: ServiceKey, destination: Destination): IpvsOp => ({ kind: 'addDestination', service, destination });
const updateDest = (service: ServiceKey, destination: Destination): IpvsOp => ({ kind: 'updateDestination', service, destination });
const deleteDest = (service: ServiceKey, destination: Destination): IpvsOp => ({ kind: 'deleteDestination', service, destination: key(destination) });

const A = v4(80);
const B = v4(81);
const MISSING = v4(99);
const D1 = dst('10.255.255.2', 8080);
const D2 = dst('10.255.255.3', 8080);
const D3 = dst('10.255.255.4', 8080);
const LINE_A = 'tcp/10.96.1.1:80 rr timeout 0 netmask 32';
const LINE_B = 'tcp/10.96.1.1:81 rr timeout 0 netmask 32';
const LINE_D1 = '10.255.255.2:8080 masq weight 1';
const LINE_D2 = '10.255.255.3:8080 masq weight 1';
const LINE_D3 = '10.255.255.4:8080 masq weight 1';

export const IPVS_CASES: IpvsCase[] = [
  {
    name: 'a service added twice: EEXIST, the first one stays',
    steps: [
      { apply: [addService(A), addService({ ...A, scheduler: 'wlc' })], results: ['ok', { code: 'EEXIST', errno: 17, op: 'ipvs.addService', object: 'tcp/10.96.1.1:80' }] },
      { dump: { [LINE_A]: [] } },
    ],
  },
  {
    name: 'a missing service: delete, update and every destination op are ESRCH',
    steps: [
      { apply: [deleteService(MISSING), updateService(MISSING), addDest(MISSING, D1), updateDest(MISSING, D1), deleteDest(MISSING, D1)], results: ['ESRCH', 'ESRCH', 'ESRCH', 'ESRCH', 'ESRCH'] },
      { dump: {} },
    ],
  },
  {
    name: 'a destination added twice is EEXIST; updating or deleting a missing one is ENOENT',
    steps: [
      {
        apply: [addService(A), addDest(A, D1), addDest(A, { ...D1, weight: 5 }), updateDest(A, D2), deleteDest(A, D2)],
        results: ['ok', 'ok', { code: 'EEXIST', object: 'tcp/10.96.1.1:80 -> 10.255.255.2:8080' }, 'ENOENT', { code: 'ENOENT', op: 'ipvs.deleteDestination', object: 'tcp/10.96.1.1:80 -> 10.255.255.3:8080' }],
      },
      { dump: { [LINE_A]: [LINE_D1] } },
    ],
  },
  {
    name: 'edits in place: scheduler, flags, timeout, netmask; weight, forwarding and thresholds',
    steps: [
      { apply: [addService(A), addDest(A, D1), addDest(A, D2)], results: ['ok', 'ok', 'ok'] },
      {
        apply: [updateService({ ...A, scheduler: 'wlc', flags: ['persistent'], timeout: 30, netmask: 24 }), updateDest(A, { ...D1, weight: 0, upperThreshold: 5, lowerThreshold: 2 }), updateDest(A, { ...D2, forward: 'tunnel', weight: 7 })],
        results: ['ok', 'ok', 'ok'],
      },
      { dump: { 'tcp/10.96.1.1:80 wlc [persistent] timeout 30 netmask 24': ['10.255.255.2:8080 masq weight 0 thresholds 2-5', '10.255.255.3:8080 tunnel weight 7'] } },
      { apply: [updateService(A)], results: ['ok'] },
      { dump: { [LINE_A]: ['10.255.255.2:8080 masq weight 0 thresholds 2-5', '10.255.255.3:8080 tunnel weight 7'] } },
    ],
  },
  {
    name: 'the dump after deletes: what was deleted is gone, the rest is untouched',
    steps: [
      { apply: [addService(A), addDest(A, D1), addDest(A, D2), addService(B), addDest(B, D1)], results: ['ok', 'ok', 'ok', 'ok', 'ok'] },
      { apply: [deleteDest(A, D1), deleteService(B)], results: ['ok', 'ok'] },
      { dump: { [LINE_A]: [LINE_D2] } },
      { services: [LINE_A] },
      { destinations: A, are: [LINE_D2] },
      { destinations: B, are: [] },
    ],
  },
  {
    name: 'deleted objects can be added again, with new values',
    steps: [
      { apply: [addService(A), addDest(A, D1), deleteDest(A, D1), addDest(A, { ...D1, weight: 3 })], results: ['ok', 'ok', 'ok', 'ok'] },
      { apply: [deleteService(A), addService({ ...A, scheduler: 'lc' }), addDest(A, D2)], results: ['ok', 'ok', 'ok'] },
      { dump: { 'tcp/10.96.1.1:80 lc timeout 0 netmask 32': [LINE_D2] } },
    ],
  },
  {
    name: 'real servers are listed newest first; an update keeps the place, a delete and add moves to the front',
    steps: [
      { apply: [addService(A), addDest(A, D1), addDest(A, D2), addDest(A, D3)], results: ['ok', 'ok', 'ok', 'ok'] },
      { destinations: A, are: [LINE_D3, LINE_D2, LINE_D1], ordered: true },
      { apply: [updateDest(A, { ...D1, weight: 2 }), deleteDest(A, D2), addDest(A, D2)], results: ['ok', 'ok', 'ok'] },
      { destinations: A, are: [LINE_D2, LINE_D3, '10.255.255.2:8080 masq weight 2'], ordered: true },
    ],
  },
  {
    name: 'the destinations of a missing service: an empty dump, not an error',
    steps: [{ destinations: v4(4242), are: [] }, { services: [] }, { dump: {} }],
  },
  {
    name: 'flags read back as set, named after the scheduler; HASHED never shows',
    steps: [
      {
        apply: [
          addService(v4(81, 'rr', { flags: ['sh-fallback'] })),
          addService(v4(82, 'sh', { flags: ['sh-fallback', 'sh-port'] })),
          addService(v4(83, 'mh', { flags: ['mh-fallback', 'mh-port'] })),
          addService(v4(84, 'rr', { flags: ['persistent'], timeout: 10800, netmask: 16 })),
          addService(v4(53, 'rr', { protocol: 'udp', flags: ['ops'] })),
          addService(v4(85, 'rr', { flags: [] })),
        ],
        results: ['ok', 'ok', 'ok', 'ok', 'ok', 'ok'],
      },
      {
        dump: {
          'tcp/10.96.1.1:81 rr [flag-1] timeout 0 netmask 32': [],
          'tcp/10.96.1.1:82 sh [sh-fallback,sh-port] timeout 0 netmask 32': [],
          'tcp/10.96.1.1:83 mh [mh-fallback,mh-port] timeout 0 netmask 32': [],
          'tcp/10.96.1.1:84 rr [persistent] timeout 10800 netmask 16': [],
          'tcp/10.96.1.1:85 rr timeout 0 netmask 32': [],
          'udp/10.96.1.1:53 rr [ops] timeout 0 netmask 32': [],
        },
      },
      { apply: [updateService(v4(81, 'sh', { flags: ['flag-1', 'sh-port'] })), updateService(v4(82, 'sh'))], results: ['ok', 'ok'] },
      { services: ['tcp/10.96.1.1:81 sh [sh-fallback,sh-port] timeout 0 netmask 32', 'tcp/10.96.1.1:82 sh timeout 0 netmask 32', 'tcp/10.96.1.1:83 mh [mh-fallback,mh-port] timeout 0 netmask 32', 'tcp/10.96.1.1:84 rr [persistent] timeout 10800 netmask 16', 'tcp/10.96.1.1:85 rr timeout 0 netmask 32', 'udp/10.96.1.1:53 rr [ops] timeout 0 netmask 32'] },
    ],
  },
  {
    name: 'an unknown scheduler or persistence engine: ENOENT, nothing added',
    steps: [
      {
        apply: [addService(v4(82, 'nosuch')), addService(v4(83, 'rr', { pe: 'nope' })), addService(A), updateService({ ...A, scheduler: 'nosuch' })],
        results: [{ code: 'ENOENT', message: /scheduler "nosuch" is not available in the kernel/ }, 'ENOENT', 'ok', { code: 'ENOENT', message: /scheduler "nosuch" is not available/ }],
      },
      { dump: { [LINE_A]: [] } },
    ],
  },
  {
    name: 'IPv6: addresses read back canonical; netmask 0 is EINVAL',
    steps: [
      {
        apply: [
          addService(v6(443, { address: 'FD00:96:0::1', flags: ['persistent'], timeout: 600, netmask: 64 })),
          addDest(v6(443), dst('FD00:255::0:2', 8443)),
          addService(v6(444, { netmask: 0 })),
        ],
        results: ['ok', 'ok', 'EINVAL'],
      },
      { dump: { 'tcp/[fd00:96::1]:443 rr [persistent] timeout 600 netmask 64': ['[fd00:255::2]:8443 masq weight 1'] } },
    ],
  },
  {
    name: 'a real server of the other family: only tunnelled',
    steps: [
      {
        apply: [addService(A), addDest(A, dst('fd00:255::2', 80)), addDest(A, dst('fd00:255::3', 80, { forward: 'tunnel' })), addService(v6(443)), addDest(v6(443), dst('10.255.255.2', 443))],
        results: ['ok', 'EINVAL', 'ok', 'ok', 'EINVAL'],
      },
      { dump: { [LINE_A]: ['[fd00:255::3]:80 tunnel weight 1'], 'tcp/[fd00:96::1]:443 rr timeout 0 netmask 128': [] } },
    ],
  },
  {
    name: 'a real server the kernel cannot forward to: unspecified, broadcast, multicast, link-local, v4-mapped are EINVAL',
    steps: [
      {
        apply: [
          addService(A),
          ...['0.0.0.0', '255.255.255.255', '224.0.0.1', '239.1.1.1', '0.1.2.3', '240.0.0.1', '127.0.0.1'].map((a) => addDest(A, dst(a, 80))),
          ...['::', 'ff02::1', '2001:db8::2'].map((a) => addDest(A, dst(a, 80, { forward: 'tunnel' }))),
          addService(v6(443)),
          ...['::', 'ff02::1', 'fe80::1', '::ffff:10.0.0.1', '::1', '::10.0.0.1', '2001:db8::1'].map((a) => addDest(v6(443), dst(a, 443))),
        ],
        results: ['ok', 'EINVAL', 'EINVAL', 'EINVAL', 'EINVAL', 'ok', 'ok', 'ok', 'EINVAL', 'EINVAL', 'ok', 'ok', 'EINVAL', 'EINVAL', 'EINVAL', 'EINVAL', 'ok', 'ok', 'ok'],
      },
      {
        dump: {
          [LINE_A]: ['0.1.2.3:80 masq weight 1', '127.0.0.1:80 masq weight 1', '240.0.0.1:80 masq weight 1', '[2001:db8::2]:80 tunnel weight 1'],
          'tcp/[fd00:96::1]:443 rr timeout 0 netmask 128': ['[2001:db8::1]:443 masq weight 1', '[::10.0.0.1]:443 masq weight 1', '[::1]:443 masq weight 1'],
        },
      },
    ],
  },
  {
    name: 'a lower threshold above the upper one: ERANGE, on add and on update',
    steps: [
      { apply: [addService(A), addDest(A, { ...D1, lowerThreshold: 5, upperThreshold: 2 }), addDest(A, D2), updateDest(A, { ...D2, lowerThreshold: 9, upperThreshold: 1 })], results: ['ok', 'ERANGE', 'ok', 'ERANGE'] },
      { dump: { [LINE_A]: [LINE_D2] } },
    ],
  },
  {
    name: 'protocol, family and firewall mark are part of the key',
    steps: [
      {
        apply: [addService(A), addService({ ...A, protocol: 'udp' }), addService({ ...A, protocol: 'sctp' }), addService(mark(7)), addService(mark(7, 'ipv6')), addService(mark(7))],
        results: ['ok', 'ok', 'ok', 'ok', 'ok', 'EEXIST'],
      },
      { apply: [deleteService({ ...A, protocol: 'udp' }), deleteService({ ...A, protocol: 'udp' }), addDest(mark(7), dst('10.255.255.2', 0, { forward: 'route' }))], results: ['ok', 'ESRCH', 'ok'] },
      {
        dump: {
          'fwmark/7/ipv4 rr timeout 0 netmask 32': ['10.255.255.2:0 route weight 1'],
          'fwmark/7/ipv6 rr timeout 0 netmask 128': [],
          [LINE_A]: [],
          'sctp/10.96.1.1:80 rr timeout 0 netmask 32': [],
        },
      },
    ],
  },
  {
    name: 'a batch: each op reported, the failing ones named, the rest applied',
    steps: [
      {
        apply: [
          addService(A),
          addService(A),
          addService(v4(82, 'nosuch')),
          addService({ ...B, address: '10.96.1.300' }),
          deleteService(MISSING),
          deleteDest(A, dst('10.255.255.2', 80)),
          addService(B),
          addDest(B, dst('10.255.255.2', 80)),
          addDest(B, dst('10.255.255.3', 80, { weight: -1 })),
        ],
        results: [
          'ok',
          { code: 'EEXIST', errno: 17, op: 'ipvs.addService', object: 'tcp/10.96.1.1:80' },
          'ENOENT',
          { code: 'ERR_INVALID_INPUT', message: /service\.address: not an IP address/ },
          'ESRCH',
          { code: 'ENOENT', op: 'ipvs.deleteDestination', object: 'tcp/10.96.1.1:80 -> 10.255.255.2:80' },
          'ok',
          'ok',
          { code: 'ERR_INVALID_INPUT', message: /destination\.weight/ },
        ],
      },
      { dump: { [LINE_A]: [], [LINE_B]: ['10.255.255.2:80 masq weight 1'] } },
    ],
  },
  {
    name: 'flush empties the table',
    steps: [
      { apply: [addService(A), addDest(A, D1), addService(mark(9))], results: ['ok', 'ok', 'ok'] },
      { flush: true },
      { dump: {} },
      { apply: [deleteService(A)], results: ['ESRCH'] },
    ],
  },
  {
    name: 'counters: only when asked for, zero without traffic',
    steps: [
      { apply: [addService(A), addDest(A, D1)], results: ['ok', 'ok'] },
      { counters: 'absent' },
      { counters: 'zero' },
    ],
  },
  {
    name: 'timeouts: set and read back; 0 leaves a value unchanged',
    steps: [
      { setTimeouts: { tcp: 901, tcpFin: 121, udp: 301 } },
      { timeouts: { tcp: 901, tcpFin: 121, udp: 301 } },
      { setTimeouts: { tcp: 902, tcpFin: 0, udp: 0 } },
      { timeouts: { tcp: 902, tcpFin: 121, udp: 301 } },
      { setTimeouts: { tcp: 900, tcpFin: 120, udp: 300 } }, // the kernel's defaults
      { timeouts: { tcp: 900, tcpFin: 120, udp: 300 } },
    ],
  },
  {
    name: 'info: version and connection table size',
    steps: [{ info: { version: '1.2.1', connTableSize: 4096 } }],
  },
];
