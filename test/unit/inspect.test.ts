// inspect: formatting, partial failures, and the CLI around it (no kernel: injected sources).
import { describe, expect, it } from 'vitest';

import { main } from '../../src/cli.js';
import { formatInspect, gatherInspect, type InspectReport, type InspectSources } from '../../src/inspect.js';
import type { IpvsClient } from '../../src/kernel/ipvs/client.js';
import { FakeLinkClient } from '../../src/kernel/link.js';

const service = {
  family: 'ipv4' as const, protocol: 'tcp' as const, address: '10.96.0.10', port: 80, fwmark: null,
  scheduler: 'rr', flags: ['persistent' as const], timeout: 10800, netmask: 32, pe: null,
  destinations: [{ address: '10.244.1.2', port: 8080, forward: 'masq' as const, weight: 1, upperThreshold: 0, lowerThreshold: 0, activeConns: 2, inactiveConns: 1, persistConns: 0 }],
};

function sources(overrides: Partial<InspectSources> = {}): InspectSources {
  const ipvs = {
    info: async () => ({ version: '1.2.1', connTableSize: 4096 }),
    dumpAll: async () => [service],
    close: () => {},
  } as unknown as IpvsClient;
  return {
    ipvs: async () => ({ available: true, client: ipvs }),
    ipset: async () => ({ list: async () => [
      { name: 'KUBE-CLUSTER-IP', type: 'hash:ip,port', family: 'inet', entries: ['10.96.0.10,tcp:80'] },
      { name: 'other-software', type: 'hash:ip', family: 'inet', entries: ['1.2.3.4'] },
    ], close: () => {} }) as never,
    link: () => new FakeLinkClient(),
    iptables: async () => ({ backend: 'legacy', nat: ['-N KUBE-SERVICES'], filter: [] }),
    ...overrides,
  };
}

describe('inspect', () => {
  it('prints the JSON shape of the issue, owned objects only', async () => {
    const out: string[] = [];
    const code = await main(['inspect', '--json'], { stdout: (t) => out.push(t), stderr: () => {}, inspectSources: sources() });
    expect(code).toBe(0);
    const report = JSON.parse(out.join('')) as InspectReport;
    expect(report.ipvs).toEqual({
      available: true, version: '1.2.1', connTableSize: 4096,
      services: [{
        family: 'ipv4', protocol: 'tcp', address: '10.96.0.10', port: 80, fwmark: null, scheduler: 'rr',
        flags: ['persistent'], timeout: 10800, netmask: 32,
        destinations: [{ address: '10.244.1.2', port: 8080, forward: 'masq', weight: 1, upperThreshold: 0, lowerThreshold: 0, activeConns: 2, inactiveConns: 1 }],
      }],
    });
    expect(report.ipsets).toEqual([{ name: 'KUBE-CLUSTER-IP', type: 'hash:ip,port', family: 'inet', entries: ['10.96.0.10,tcp:80'] }]);
    expect(report.dummy).toEqual({ name: 'kube-ipvs0', exists: false, addresses: [], routes: [] });
    expect(report.iptables).toEqual({ backend: 'legacy', nat: ['-N KUBE-SERVICES'], filter: [] });
    expect(report.errors).toBeUndefined();
  });

  it('formats like ipvsadm -Ln', async () => {
    const text = formatInspect(await gatherInspect(sources()));
    expect(text).toContain('IP Virtual Server version 1.2.1 (size=4096)\n');
    expect(text).toContain('TCP  10.96.0.10:80 rr persistent 10800\n  -> 10.244.1.2:8080              Masq    1      2          1\n');
    expect(text).toContain('  KUBE-CLUSTER-IP hash:ip,port family inet (1 entries)\n    10.96.0.10,tcp:80\n');
  });

  it('says IPVS is unavailable and exits 0', async () => {
    const out: string[] = [];
    const code = await main(['inspect', '--json'], {
      stdout: (t) => out.push(t), stderr: () => {},
      inspectSources: sources({ ipvs: async () => ({ available: false, reason: 'no ip_vs' }) }),
    });
    expect(code).toBe(0);
    expect(JSON.parse(out.join('')).ipvs).toEqual({ available: false, reason: 'no ip_vs' });
  });

  it('a section that fails is named; the others are still read', async () => {
    const report = await gatherInspect(sources({ ipset: async () => { throw new Error('ipset protocol mismatch'); } }));
    expect(report.errors).toEqual([{ section: 'ipsets', message: 'ipset protocol mismatch' }]);
    expect(report.ipvs.available).toBe(true);
    expect(report.iptables.backend).toBe('legacy');
  });

  it('rejects bad flags with the flag named, exit 2', async () => {
    const err: string[] = [];
    expect(await main(['inspect', '--ipvs-scheduler=nope'], { stdout: () => {}, stderr: (t) => err.push(t) })).toBe(2);
    expect(err.join('')).toMatch(/--ipvs-scheduler: unknown scheduler "nope"/);
  });
});
