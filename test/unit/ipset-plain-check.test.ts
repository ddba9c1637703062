// The ipset client's zod-free check of a set spec (isPlainSetSpec) against setSpecSchema, which it
// stands in for: whatever it passes, the schema must accept; every set the daemon owns must pass
// it (the daemon creates them at every start, and zod is loaded only for what it does not pass).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

import { isPlainSetSpec, setSpecSchema } from '../../src/kernel/ipset/client.js';
import { MAX_TIMEOUT } from '../../src/kernel/ipset/entry.js';
import { SET_TYPES } from '../../src/kernel/ipset/types.js';
import { OWNED_SETS } from '../../src/proxy/ipvs/ipsets.js';

const junk = fc.oneof(fc.constant(null), fc.double(), fc.constantFrom(-1, 0, 1.5, 2 ** 53, 65536, 0x80000000, 0x80000001, 2 ** 32, MAX_TIMEOUT + 1, NaN), fc.string({ maxLength: 3 }), fc.boolean(), fc.constant([]), fc.constant({}));
/** `a` most of the time, else junk. */
const field = (a: fc.Arbitrary<unknown>) => fc.oneof({ weight: 5, arbitrary: a }, { weight: 1, arbitrary: junk });
const port = fc.integer({ min: 0, max: 65535 });
const name = fc.oneof(fc.stringMatching(/^[A-Z0-9-]{1,31}$/), fc.string({ minLength: 1, maxLength: 31 }).filter((n) => !n.includes('\0') && Buffer.byteLength(n) < 32));
const common = { name, comment: fc.boolean(), counters: fc.boolean(), timeout: fc.integer({ min: 0, max: MAX_TIMEOUT }) };
const optional = { requiredKeys: ['name', 'type'] as never[], noNullPrototype: true };
/** Valid specs: hash sets, and bitmap:port sets with a range. */
const valid = fc.oneof(
  fc.record({ ...common, type: fc.constantFrom(...SET_TYPES.filter((t) => t !== 'bitmap:port')), family: fc.constantFrom('inet', 'inet6'), hashSize: fc.integer({ min: 1, max: 0x80000000 }), maxElem: fc.integer({ min: 1, max: 0xffffffff }) }, optional),
  fc.record({ ...common, type: fc.constant('bitmap:port'), range: fc.tuple(port, port).map(([a, b]) => ({ from: Math.min(a, b), to: Math.max(a, b) })) }, { requiredKeys: ['name', 'type', 'range'] as never[], noNullPrototype: true }),
);
/** Valid specs with a field broken, added or taken away now and then. */
const broken = fc.tuple(valid, fc.constantFrom('name', 'type', 'family', 'hashSize', 'maxElem', 'range', 'timeout', 'comment', 'counters', 'other'), fc.oneof(junk, fc.constant(undefined), port, fc.record({ from: fc.oneof(port, junk), to: fc.oneof(port, junk) }))).map(([s, k, v]) => ({ ...s, [k]: v }));

describe('isPlainSetSpec', () => {
  it('passes every valid spec, as the schema does', () => {
    fc.assert(fc.property(valid, (s) => {
      expect(setSpecSchema.safeParse(s).success).toBe(true);
      expect(isPlainSetSpec(s)).toBe(true);
    }), { numRuns: 2000 });
  });

  it('passes nothing setSpecSchema rejects (a field broken, an unknown one, non-objects)', () => {
    let [passed, declined] = [0, 0];
    fc.assert(fc.property(fc.oneof({ weight: 9, arbitrary: broken }, { weight: 1, arbitrary: junk }), (s) => {
      if (isPlainSetSpec(s)) (passed++, expect(setSpecSchema.safeParse(s).success).toBe(true));
      else declined++;
    }), { numRuns: 6000 });
    expect(Math.min(passed, declined)).toBeGreaterThan(200);
  });

  it('passes every set the daemon owns, and the usual hash and bitmap specs', () => {
    for (const s of OWNED_SETS) expect(isPlainSetSpec(s.spec), s.spec.name).toBe(true);
    expect(isPlainSetSpec({ name: 'X', type: 'bitmap:port', range: { from: 30000, to: 32767 } })).toBe(true);
    expect(isPlainSetSpec({ name: 'X', type: 'hash:ip', family: 'inet6', hashSize: 1024, maxElem: 65536, timeout: 0, comment: true })).toBe(true);
    expect(isPlainSetSpec({ name: 'X', type: 'bitmap:port' })).toBe(false); // needs a range: the schema says so
    expect(setSpecSchema.safeParse({ name: 'X', type: 'bitmap:port' }).error?.issues[0]?.message).toBe('bitmap:port needs a range');
  });
});
