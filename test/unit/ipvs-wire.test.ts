// The IPVS ops' own encoder (src/kernel/ipvs/wire.ts) against the addon's schema encoder fed the
// attribute objects of test/fixtures/ipvs-requests.mjs (whose bytes ipvs-codec.test.ts checks
// against requests captured from a real kernel): byte for byte, for every op kind and random
// values, and the addon's checks of messages handed in already laid out.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

import * as codec from '../../src/kernel/ipvs/codec.js';
import type { Destination, DestinationKey, ServiceFlag, ServiceKey, VirtualService } from '../../src/kernel/ipvs/types.js';
import { IpvsWire } from '../../src/kernel/ipvs/wire.js';
import { ipTo16 } from '../../src/model/ip.js';
import { native } from '../../src/native/binding.js';
import { dest, fresh, ipvsAttrs } from '../fixtures/ipvs-requests.mjs';

const FAMILY_ID = 28;
const C = native.constants.ipvs!;
const attrs = ipvsAttrs(codec, ipTo16);

type Op =
  | { cmd: number; service: VirtualService }
  | { cmd: number; key: ServiceKey; dest?: { d: Destination | DestinationKey; full: boolean } };

/** The request object the addon's schema encoder takes for `op`. */
function objectRequest(op: Op) {
  const header = { cmd: op.cmd, version: C.IPVS_GENL_VERSION };
  if ('service' in op) return { type: FAMILY_ID, header, attrs: { service: attrs.serviceAttrs(op.service) } };
  const d = op.dest && (op.dest.full ? attrs.destinationAttrs(op.dest.d) : attrs.destinationKeyAttrs(op.dest.d));
  return { type: FAMILY_ID, header, attrs: { service: attrs.serviceKeyAttrs(op.key), ...(d ? { dest: d } : {}) } };
}

function wireOf(ops: Op[], size?: number): IpvsWire {
  const w = new IpvsWire(FAMILY_ID, size);
  for (const op of ops) {
    if ('service' in op) w.service(op.cmd, op.service);
    else w.serviceKeyed(op.cmd, op.key, op.dest);
  }
  return w;
}

const hex = (b: Buffer) => b.toString('hex');

describe('IpvsWire', () => {
  it('lays out every op kind as the schema encoder does', () => {
    const key: ServiceKey = { family: fresh.family, protocol: fresh.protocol, address: fresh.address, port: fresh.port, fwmark: null } as ServiceKey;
    const ops: Op[] = [
      { cmd: C.IPVS_CMD_NEW_SERVICE!, service: fresh as VirtualService },
      { cmd: C.IPVS_CMD_SET_SERVICE!, service: { ...(fresh as VirtualService), scheduler: 'sh', flags: ['sh-port', 'persistent'], timeout: 10800, pe: 'sip' } },
      { cmd: C.IPVS_CMD_NEW_DEST!, key, dest: { d: dest as Destination, full: true } },
      { cmd: C.IPVS_CMD_SET_DEST!, key, dest: { d: { ...(dest as Destination), weight: 0 }, full: true } },
      { cmd: C.IPVS_CMD_DEL_DEST!, key, dest: { d: dest as Destination, full: false } },
      { cmd: C.IPVS_CMD_DEL_SERVICE!, key },
      { cmd: C.IPVS_CMD_DEL_SERVICE!, key: { family: 'ipv6', protocol: null, address: null, port: null, fwmark: 7 } as unknown as ServiceKey },
    ];
    const w = wireOf(ops);
    expect(w.count).toBe(ops.length);
    expect(hex(native.encode('ipvs', [w.bytes()], 1))).toBe(hex(native.encode('ipvs', ops.map(objectRequest), 1)));
  });

  it('matches the schema encoder on random ops, services shared between ops, and a buffer that has to grow', () => {
    const v4 = fc.ipV4();
    const v6 = fc.ipV6();
    const key = fc.oneof(
      fc.record({ family: fc.constant('ipv4' as const), protocol: fc.constantFrom('tcp', 'udp', 'sctp'), address: v4, port: fc.nat(65535), fwmark: fc.constant(null) }),
      fc.record({ family: fc.constant('ipv6' as const), protocol: fc.constantFrom('tcp', 'udp', 'sctp'), address: v6, port: fc.nat(65535), fwmark: fc.constant(null) }),
      fc.record({ family: fc.constantFrom('ipv4' as const, 'ipv6' as const), protocol: fc.constant(null), address: fc.constant(null), port: fc.constant(null), fwmark: fc.integer({ min: 1, max: 0xffffffff }) }),
    ) as fc.Arbitrary<ServiceKey>;
    const service = fc
      .tuple(
        key,
        fc.constantFrom('rr', 'wrr', 'lc', 'wlc', 'lblc', 'lblcr', 'dh', 'sh', 'sed', 'nq', 'mh', 'fo', 'ovf', 'twos'),
        fc.subarray<ServiceFlag>(['persistent', 'ops', 'flag-1', 'flag-2', 'flag-3']),
        fc.nat(0xffffffff),
        fc.nat(128),
        fc.option(fc.constant('sip'), { nil: null }),
      )
      .map(([k, scheduler, flags, timeout, prefix, pe]): VirtualService => ({ ...k, scheduler, flags, timeout, netmask: k.family === 'ipv4' ? prefix % 33 : prefix, pe }) as VirtualService);
    const destination = fc.record({
      address: fc.oneof(v4, v6),
      port: fc.nat(65535),
      forward: fc.constantFrom('masq', 'local', 'tunnel', 'route'),
      weight: fc.nat(0x7fffffff),
      upperThreshold: fc.nat(0xffffffff),
      lowerThreshold: fc.nat(0xffffffff),
    }) as fc.Arbitrary<Destination>;
    fc.assert(
      fc.property(fc.array(service, { minLength: 1, maxLength: 4 }), fc.array(fc.tuple(fc.nat(), fc.nat(5), destination), { maxLength: 30 }), fc.nat(300), (services, picks, size) => {
        const cmds = [C.IPVS_CMD_NEW_SERVICE!, C.IPVS_CMD_SET_SERVICE!, C.IPVS_CMD_DEL_SERVICE!, C.IPVS_CMD_NEW_DEST!, C.IPVS_CMD_SET_DEST!, C.IPVS_CMD_DEL_DEST!];
        const ops = picks.map(([s, k, d]): Op => {
          const svc = services[s % services.length]!; // the same object in several ops, as a sync's
          const cmd = cmds[k]!;
          if (k < 2) return { cmd, service: svc };
          if (k === 2) return { cmd, key: svc };
          return { cmd, key: svc, dest: { d, full: k < 5 } };
        });
        const w = wireOf(ops, size + 1);
        expect(w.count).toBe(ops.length);
        expect(hex(native.encode('ipvs', [w.bytes()], 1))).toBe(hex(native.encode('ipvs', ops.map(objectRequest), 1)));
      }),
      { numRuns: 500 },
    );
  });

  it('the addon takes laid-out messages only whole, beside request objects', () => {
    const w = wireOf([{ cmd: C.IPVS_CMD_NEW_SERVICE!, service: fresh as VirtualService }]);
    const b = Buffer.from(w.bytes());
    expect(() => native.encode('ipvs', [b.subarray(0, 10)])).toThrow(/request 0: truncated message header/);
    expect(() => native.encode('ipvs', [b.subarray(0, b.length - 4)])).toThrow(/request 0: message length \d+ out of bounds/);
    const tooShort = Buffer.from(b);
    tooShort.writeUInt32LE(8, 0);
    expect(() => native.encode('ipvs', [tooShort])).toThrow(/out of bounds/);
    // mixed with an object request: one message each, in order
    const mixed = native.encode('ipvs', [objectRequest({ cmd: C.IPVS_CMD_DEL_SERVICE!, key: fresh as ServiceKey }), b], 5);
    expect(mixed.length).toBe(native.encode('ipvs', [objectRequest({ cmd: C.IPVS_CMD_DEL_SERVICE!, key: fresh as ServiceKey })]).length + b.length);
    expect(mixed.readUInt32LE(mixed.readUInt32LE(0) + 8)).toBe(6); // the second message's seq
  });
});
