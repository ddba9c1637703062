import fc from 'fast-check';
import { isIPv4, isIPv6 } from 'node:net';
import { describe, expect, it } from 'vitest';
import {
  ConfigSchema, cidrFamily, defaultConfig, formatDuration, ipFamily, isUnspecified, parseDuration, parseHostPort,
} from '../../src/config.js';

describe('parseDuration (Go syntax → ms)', () => {
  it.each([
    ['0', 0], ['0s', 0], ['30s', 30_000], ['1m30s', 90_000], ['500ms', 500], ['2h', 7_200_000],
    ['1.5h', 5_400_000], ['1h2m3s4ms', 3_723_004], ['300us', 0.3], ['300µs', 0.3], ['250000ns', 0.25],
    ['+5s', 5_000], ['.5s', 500], ['1.s', 1_000], ['15m', 900_000],
  ])('%s = %d ms', (text, ms) => {
    expect(parseDuration(text)).toBeCloseTo(ms, 9);
  });

  it.each(['', ' ', '5', 's', '1x', '1.2.3s', 'abc', '1s2', '1 s', '1S', 'ms', '1e3s', '0x10s'])('refuses %j', (text) => {
    expect(() => parseDuration(text)).toThrow(/invalid duration .* \(use Go syntax/);
  });

  it('refuses negative durations', () => {
    expect(() => parseDuration('-1s')).toThrow('duration "-1s" must not be negative');
  });
});

describe('formatDuration', () => {
  it.each([[0, '0s'], [500, '500ms'], [30_000, '30s'], [90_000, '1m30s'], [900_000, '15m'], [7_200_000, '2h'], [3_723_004, '1h2m3s4ms'], [0.3, '0.3ms']])(
    '%d ms = %s, and parses back',
    (ms, text) => {
      expect(formatDuration(ms)).toBe(text);
      expect(parseDuration(text)).toBeCloseTo(ms, 9);
    },
  );
});

describe('addresses', () => {
  it.each([
    ['10.0.0.1', 4], ['255.255.255.255', 4], ['::', 6], ['fd00::1', 6], ['::ffff:10.0.0.1', 6],
    ['10.0.0.256', 0], ['10.0.0', 0], ['010.0.0.1', 0], ['fe80::1%eth0', 0], ['[::1]', 0], ['', 0], ['host', 0],
  ])('ipFamily(%j) = %d', (text, family) => {
    expect(ipFamily(text)).toBe(family);
  });

  it('agrees with net.isIPv4 / net.isIPv6 on anything without a zone id', () => {
    const node = (s: string) => (isIPv4(s) ? 4 : isIPv6(s) ? 6 : 0);
    const token = fc.constantFrom('0', '1', '9', 'a', 'F', 'ffff', 'FFFFF', '12345', '255', '256', '01', '00', ':', ':', '::', '.', '1.2.3.4', '255.255.255.255', 'g', ' ', '');
    const pieces = fc.array(token, { maxLength: 20 }).map((t) => t.join(''));
    // Well-formed shapes too: n groups around one `::`, with or without an IPv4 tail.
    const group = fc.stringMatching(/^[0-9a-fA-F]{1,5}$/);
    const shaped = fc.tuple(fc.array(group, { maxLength: 9 }), fc.array(group, { maxLength: 9 }), fc.boolean(), fc.constantFrom('', '1.2.3.4', '1.2.3', '01.2.3.4')).map(([a, b, gap, v4]) => {
      const text = gap ? `${a.join(':')}::${b.join(':')}` : [...a, ...b].join(':');
      return v4 ? `${text}${text && !text.endsWith(':') ? ':' : ''}${v4}` : text;
    });
    fc.assert(fc.property(fc.oneof(pieces, shaped, fc.string({ unit: fc.constantFrom('0', '1', 'f', ':', '.') , maxLength: 24 })), (s) => {
      expect(ipFamily(s)).toBe(node(s));
    }), { numRuns: 20_000 });
  });

  it.each([
    ['10.0.0.0/8', 4], ['0.0.0.0/0', 4], ['10.1.2.3/32', 4], ['10.1.2.3/24', 4], ['fd00::/64', 6], ['::/0', 6], ['fd00::1/128', 6],
    ['10.0.0.0/33', 0], ['fd00::/129', 0], ['10.0.0.0', 0], ['10.0.0.0/', 0], ['10.0.0.0/-1', 0], ['10.0.0.0/8/8', 0], ['x/8', 0], ['10.0.0.0/+8', 0],
  ])('cidrFamily(%j) = %d', (text, family) => {
    expect(cidrFamily(text)).toBe(family);
  });

  it('recognises unspecified addresses', () => {
    expect(['0.0.0.0', '::', '0:0::0'].map(isUnspecified)).toEqual([true, true, true]);
    expect(['127.0.0.1', '::1'].map(isUnspecified)).toEqual([false, false]);
  });

  it.each([
    ['0.0.0.0:10256', { host: '0.0.0.0', port: 10256 }],
    ['127.0.0.1', { host: '127.0.0.1', port: 99 }],
    ['[::]:10256', { host: '::', port: 10256 }],
    ['[::1]:0', { host: '::1', port: 0 }],
    ['fd00::1', { host: 'fd00::1', port: 99 }],
  ])('parseHostPort(%j)', (text, expected) => {
    expect(parseHostPort(text, 99)).toEqual(expected);
  });

  it.each([
    ['localhost:10256', /"localhost" is not an IP address/],
    ['[10.0.0.1]:80', /is not an IP address/],
    ['1.2.3.4:65536', /port 65536 out of range/],
    ['1.2.3.4:', /expected IP or IP:port/],
    [':10256', /"" is not an IP address/],
    ['::1:10249x', /expected IP or IP:port/],
  ])('parseHostPort refuses %j', (text, reason) => {
    expect(() => parseHostPort(text, 99)).toThrow(reason);
  });
});

describe('ConfigSchema', () => {
  it('gives kube-proxy defaults, with ipvs mode and a 1s minimum sync period', () => {
    expect(defaultConfig()).toEqual({
      mode: 'ipvs',
      fallback: true,
      syncPeriodMs: 30_000,
      minSyncPeriodMs: 1_000,
      ipvs: { scheduler: 'rr', excludeCIDRs: [], strictARP: false, addressBinding: 'route', tcpTimeoutMs: 0, tcpFinTimeoutMs: 0, udpTimeoutMs: 0 },
      conntrack: { maxPerCore: 32768, min: 131072, tcpEstablishedTimeoutMs: 86_400_000, tcpCloseWaitTimeoutMs: 3_600_000, tcpBeLiberal: false, udpTimeoutMs: 0, udpStreamTimeoutMs: 0 },
      clusterCIDRs: [],
      masqueradeAll: false,
      masqueradeBit: 14,
      nodePortAddresses: [],
      healthzBindAddress: { host: '0.0.0.0', port: 10256 },
      metricsBindAddress: { host: '127.0.0.1', port: 10249 },
      once: false,
      dryRun: false,
      gracefulTerminationTimeoutMs: 900_000,
      log: { format: 'text', verbosity: 0 },
      serviceStats: { enabled: false, maxServices: 500, periodMs: 15_000 },
      events: true,
    });
    expect(defaultConfig()).not.toBe(defaultConfig());
  });

  const problems = (input: unknown) => {
    const r = ConfigSchema.safeParse(input);
    return r.success ? [] : r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
  };

  it('validates values for programmatic callers too', () => {
    expect(problems({ ipvs: { scheduler: 'foo' } })).toEqual([
      'ipvs.scheduler: unknown scheduler "foo" (valid: rr, wrr, lc, wlc, lblc, lblcr, dh, sh, sed, nq, mh, fo, ovf, twos)',
    ]);
    expect(problems({ masqueradeBit: 32 })).toEqual(['masqueradeBit: must be within [0, 31]']);
    expect(problems({ masqueradeBit: 1.5 })).toHaveLength(1);
    expect(problems({ syncPeriodMs: 0 })).toEqual(['syncPeriodMs: must be greater than 0']);
    expect(problems({ ipvs: { tcpTimeoutMs: -1 } })).toEqual(['ipvs.tcpTimeoutMs: must not be negative']);
    expect(problems({ clusterCIDRs: ['10.0.0.0/8', 'fd00::/48'] })).toEqual([]);
    expect(problems({ clusterCIDRs: ['10.0.0.0/8', '10.1.0.0/16'] })).toEqual(['clusterCIDRs: at most one CIDR per IP family (a dual-stack pair)']);
    expect(problems({ clusterCIDRs: ['10.0.0.0/8', 'fd00::/48', '10.1.0.0/16'] })).toHaveLength(1);
    expect(problems({ nodePortAddresses: ['primary'] })).toEqual([]);
    expect(problems({ nodePortAddresses: ['10.0.0.0/8', 'primary'] })).toEqual(['nodePortAddresses.1: "primary" must be the only value']);
    expect(problems({ nodePortAddresses: ['10.0.0.1'] })).toEqual(['nodePortAddresses.0: invalid CIDR "10.0.0.1" (or use "primary")']);
    expect(problems({ bindAddress: 'node1' })).toEqual(['bindAddress: invalid IP address "node1"']);
    expect(problems({ healthzBindAddress: { host: '0.0.0.0', port: 70_000 } })).toEqual(['healthzBindAddress.port: port out of range']);
    expect(problems({ metricsBindAddress: null })).toEqual([]);
    expect(problems({ hostnameOverride: '  ' })).toEqual(['hostnameOverride: must not be empty']);
    expect(problems({ log: { format: 'xml' } })).toEqual(['log.format: unknown log format "xml" (valid: json, text)']);
    expect(problems({ mode: 'nftables' })).toEqual(['mode: unknown proxy mode "nftables" (valid: ipvs, iptables)']);
  });

  it('checks fields against each other', () => {
    expect(problems({ syncPeriodMs: 500 })).toEqual(['minSyncPeriodMs: 1s must not exceed the sync period (500ms)']);
    expect(problems({ syncPeriodMs: 500, minSyncPeriodMs: 500 })).toEqual([]);
    expect(problems({ manifests: '/m', kubeconfig: '/k' })).toEqual(['manifests: standalone mode cannot be combined with a kubeconfig or master']);
  });
});
