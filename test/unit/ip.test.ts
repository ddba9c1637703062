// IP text <-> bytes and canonical forms (model/ip.ts).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

import { bytesToIp, canonicalIp, ipToBytes } from '../../src/model/ip.js';

describe('canonicalIp', () => {
  it('an IPv4 address is its own canonical form: the same string, as the byte round trip prints it', () => {
    fc.assert(fc.property(fc.ipV4(), (a) => {
      expect(canonicalIp(a)).toBe(bytesToIp(ipToBytes(a), 'ipv4'));
      expect(canonicalIp(a)).toBe(a);
    }), { numRuns: 2000 });
  });

  it('IPv6 is printed as inet_ntop does; what is not an address throws', () => {
    expect(canonicalIp('FD00:0:0:0:0:0:0:0001')).toBe('fd00::1');
    expect(canonicalIp('::FFFF:1.2.3.4')).toBe('::ffff:1.2.3.4');
    fc.assert(fc.property(fc.ipV6(), (a) => void expect(canonicalIp(a)).toBe(bytesToIp(ipToBytes(a), 'ipv6'))), { numRuns: 500 });
    for (const bad of ['010.1.1.1', '1.2.3.04', ' 1.2.3.4', '1.2.3.4\n', '256.1.1.1', 'fd00::1::2', '']) expect(() => canonicalIp(bad), bad).toThrow(/invalid IP address/);
  });
});
