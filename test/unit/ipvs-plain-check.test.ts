// The IPVS client's zod-free checks of real servers, service keys and virtual services (types.ts
// isPlainDestination/-Key, isPlainServiceKey, isPlainVirtualService) against
// the schemas it stands in for: whatever it passes, the schema must accept; valid real servers
// must pass it (else the shortcut is never taken).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

import {
  destinationKeySchema,
  destinationSchema,
  FORWARD_METHODS,
  isPlainDestination,
  isPlainDestinationKey,
  isPlainServiceKey,
  isPlainVirtualService,
  KNOWN_SCHEDULERS,
  PROTOCOLS,
  SERVICE_FLAGS,
  serviceKeySchema,
  virtualServiceSchema,
} from '../../src/kernel/ipvs/types.js';

const junk = fc.oneof(fc.constant(null), fc.constant(undefined), fc.double(), fc.constantFrom(-1, 1.5, 2 ** 53, 65536, 0x80000000, 2 ** 32, NaN, Infinity), fc.string({ maxLength: 4 }), fc.boolean(), fc.constant([]));
const valid = {
  address: fc.oneof(fc.ipV4(), fc.ipV6()),
  port: fc.integer({ min: 0, max: 65535 }),
  forward: fc.constantFrom(...FORWARD_METHODS),
  weight: fc.integer({ min: 0, max: 0x7fffffff }),
  upperThreshold: fc.integer({ min: 0, max: 0xffffffff }),
  lowerThreshold: fc.integer({ min: 0, max: 0xffffffff }),
};
/** `a` most of the time, else junk. */
const field = (a: fc.Arbitrary<unknown>, weight = 6) => fc.oneof({ weight, arbitrary: a }, { weight: 1, arbitrary: junk });
const mixed = Object.fromEntries(Object.entries(valid).map(([k, a]) => [k, field(a as fc.Arbitrary<unknown>)]));
/** The fields of a valid service key of `family` by protocol, address and port. */
const keyFields = (family: 'ipv4' | 'ipv6') => ({
  family: fc.constant(family),
  protocol: fc.constantFrom(...PROTOCOLS),
  address: family === 'ipv4' ? fc.ipV4() : fc.ipV6(),
  port: fc.integer({ min: 0, max: 65535 }),
  fwmark: fc.constant(null),
});

describe('isPlainDestination / isPlainDestinationKey', () => {
  it('pass every valid real server, as the schemas do', () => {
    fc.assert(fc.property(fc.record(valid), (d) => {
      expect(isPlainDestination(d)).toBe(true);
      expect(isPlainDestinationKey(d)).toBe(true);
      expect(destinationSchema.safeParse(d).success).toBe(true);
    }), { numRuns: 2000 });
  });

  it('pass nothing the schemas reject (broken fields, missing ones, non-objects)', () => {
    let passed = 0;
    fc.assert(fc.property(fc.oneof({ weight: 9, arbitrary: fc.record(mixed, { requiredKeys: [] }) }, { weight: 1, arbitrary: junk }), (d) => {
      if (isPlainDestination(d)) (passed++, expect(destinationSchema.safeParse(d).success).toBe(true));
      if (isPlainDestinationKey(d)) expect(destinationKeySchema.safeParse(d).success).toBe(true);
    }), { numRuns: 4000 });
    expect(passed).toBeGreaterThan(100);
    expect(isPlainDestination({ ...{ address: '10.0.0.1', port: 80, forward: 'masq', weight: 1, upperThreshold: 0, lowerThreshold: 0 }, weight: -1 })).toBe(false);
    expect(isPlainDestinationKey({ address: '10.0.0.300', port: 80 })).toBe(false);
  });
});

describe('isPlainServiceKey', () => {
  const v4 = fc.record(keyFields('ipv4'));
  const v6 = fc.record(keyFields('ipv6'));

  it('passes every valid key by protocol, address and port, as the schema does', () => {
    fc.assert(fc.property(fc.oneof(v4, v6), (k) => {
      expect(isPlainServiceKey(k)).toBe(true);
      expect(serviceKeySchema.safeParse(k).success).toBe(true);
    }), { numRuns: 2000 });
  });

  it('passes nothing the schema rejects (wrong family, fwmark keys, broken or missing fields)', () => {
    const mixedKey = fc.record({
      family: field(fc.constantFrom('ipv4', 'ipv6')),
      protocol: field(fc.constantFrom(...PROTOCOLS, null)),
      address: field(fc.oneof(fc.ipV4(), fc.ipV6(), fc.constant(null))),
      port: field(fc.oneof(fc.integer({ min: 0, max: 65535 }), fc.constant(null))),
      fwmark: field(fc.oneof(fc.constant(null), fc.integer({ min: 1, max: 0xffffffff }))),
    }, { requiredKeys: [] });
    let passed = 0;
    fc.assert(fc.property(fc.oneof({ weight: 9, arbitrary: mixedKey }, { weight: 1, arbitrary: junk }), (k) => {
      if (isPlainServiceKey(k)) (passed++, expect(serviceKeySchema.safeParse(k).success).toBe(true));
    }), { numRuns: 12000 }); // ~1 % of the keys are valid: 6,000 runs gave 50 or fewer now and then
    expect(passed).toBeGreaterThan(50);
    expect(isPlainServiceKey({ family: 'ipv6', protocol: 'tcp', address: '10.0.0.1', port: 80, fwmark: null })).toBe(false);
    expect(isPlainServiceKey({ family: 'ipv4', protocol: null, address: null, port: null, fwmark: 6 })).toBe(false);
  });
});

describe('isPlainVirtualService', () => {
  const common = {
    scheduler: fc.oneof(fc.constantFrom(...KNOWN_SCHEDULERS), fc.stringMatching(/^[a-z0-9_-]{1,15}$/)),
    flags: fc.uniqueArray(fc.constantFrom(...SERVICE_FLAGS), { maxLength: 3 }),
    timeout: fc.integer({ min: 0, max: 0xffffffff }),
  };
  const v4 = fc.record({ ...keyFields('ipv4'), ...common, netmask: fc.integer({ min: 0, max: 32 }) });
  const v6 = fc.record({ ...keyFields('ipv6'), ...common, netmask: fc.integer({ min: 0, max: 128 }) });
  const pe = fc.oneof(fc.constant(undefined), fc.constant(null), fc.constantFrom('sip', ''));

  it('passes every valid virtual service keyed by protocol, address and port, as the schema does', () => {
    fc.assert(fc.property(fc.oneof(v4, v6), pe, (s, p) => {
      const svc = p === undefined ? s : { ...s, pe: p };
      expect(isPlainVirtualService(svc)).toBe(true);
      expect(virtualServiceSchema.safeParse(svc).success).toBe(true);
    }), { numRuns: 2000 });
  });

  it('passes nothing the schema rejects (bad scheduler, flags, timeout, netmask or pe, broken keys)', () => {
    const often = (a: fc.Arbitrary<unknown>) => field(a, 8);
    const mixedService = fc.record({
      family: often(fc.constantFrom('ipv4', 'ipv6')),
      protocol: often(fc.constantFrom(...PROTOCOLS)),
      address: often(fc.oneof(fc.ipV4(), fc.ipV6())),
      port: often(fc.integer({ min: 0, max: 65535 })),
      fwmark: often(fc.constant(null)),
      scheduler: often(fc.oneof(fc.constantFrom(...KNOWN_SCHEDULERS), fc.constantFrom('', 'RR', 'a'.repeat(16), 'w r', 'lc\n'))),
      flags: often(fc.oneof(fc.uniqueArray(fc.constantFrom(...SERVICE_FLAGS), { maxLength: 3 }), fc.constant(['nope']), fc.constant('persistent'))),
      timeout: often(fc.integer({ min: 0, max: 0xffffffff })),
      netmask: often(fc.integer({ min: 0, max: 129 })),
      pe: fc.oneof(fc.constant(undefined), fc.constant(null), fc.constantFrom('sip', 'x'.repeat(16), 7)),
    }, { requiredKeys: ['family', 'protocol', 'address', 'port', 'fwmark', 'scheduler', 'flags', 'timeout', 'netmask'] });
    let passed = 0;
    fc.assert(fc.property(fc.oneof({ weight: 9, arbitrary: mixedService }, { weight: 1, arbitrary: junk }), (s) => {
      if (isPlainVirtualService(s)) (passed++, expect(virtualServiceSchema.safeParse(s).success).toBe(true));
    }), { numRuns: 12000 });
    expect(passed).toBeGreaterThan(50);
    const ok = { family: 'ipv4', protocol: 'tcp', address: '10.0.0.1', port: 80, fwmark: null, scheduler: 'rr', flags: [], timeout: 0, netmask: 32 };
    expect(isPlainVirtualService(ok)).toBe(true);
    expect(isPlainVirtualService({ ...ok, netmask: 33 })).toBe(false);
    expect(isPlainVirtualService({ ...ok, scheduler: 'Round-Robin' })).toBe(false);
    expect(isPlainVirtualService({ ...ok, flags: ['persistent', 'bogus'] })).toBe(false);
    expect(isPlainVirtualService({ ...ok, pe: 'a'.repeat(16) })).toBe(false);
    for (const k of Object.keys(ok)) {
      const missing: Record<string, unknown> = { ...ok };
      delete missing[k];
      expect(isPlainVirtualService(missing)).toBe(false);
    }
  });
});
