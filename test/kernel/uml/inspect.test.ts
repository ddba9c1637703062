// `inspect --json` against a real kernel: state written by ipvsadm, ipset, ip and iptables-legacy.
import { execFileSync } from 'node:child_process';

import { afterAll, describe, expect, it } from 'vitest';

import { main } from '../../../src/cli.js';
import type { InspectReport } from '../../../src/inspect.js';
import { LOCAL_ROUTE_PROTOCOL } from '../../../src/kernel/link/codec.js';
import { assertIsolated } from '../lib/guard.js';

assertIsolated();

const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8' });

async function inspectJson(): Promise<InspectReport> {
  const out: string[] = [];
  expect(await main(['inspect', '--json'], { stdout: (t) => out.push(t), stderr: () => {} })).toBe(0);
  return JSON.parse(out.join('')) as InspectReport;
}

afterAll(() => {
  sh('ipvsadm', '-C');
  execFileSync('sh', ['-c', 'ip link del kube-ipvs0; ipset destroy KUBE-CLUSTER-IP; ipset destroy not-ours; iptables-legacy -t nat -F KUBE-SERVICES; iptables-legacy -t nat -X KUBE-SERVICES; true']);
});

describe('inspect on a real kernel', () => {
  it('reports exactly what the kernel holds for this proxy', async () => {
    sh('ipvsadm', '-C');
    sh('ipvsadm', '-A', '-t', '10.96.0.10:80', '-s', 'rr', '-p', '10800');
    sh('ipvsadm', '-a', '-t', '10.96.0.10:80', '-r', '10.244.1.2:8080', '-m', '-w', '1');
    sh('ipvsadm', '-A', '-f', '6', '-s', 'sh', '-b', 'sh-port');
    sh('ipset', 'create', 'KUBE-CLUSTER-IP', 'hash:ip,port');
    sh('ipset', 'add', 'KUBE-CLUSTER-IP', '10.96.0.10,tcp:80');
    sh('ipset', 'create', 'not-ours', 'hash:ip');
    sh('ip', 'link', 'add', 'kube-ipvs0', 'type', 'dummy');
    sh('ip', 'addr', 'add', '10.96.0.10/32', 'dev', 'kube-ipvs0');
    sh('ip', 'link', 'set', 'kube-ipvs0', 'up');
    sh('ip', 'route', 'add', 'local', '10.96.0.11/32', 'dev', 'kube-ipvs0', 'table', 'local', 'proto', String(LOCAL_ROUTE_PROTOCOL), 'scope', 'host');
    sh('ip', '-6', 'route', 'add', 'local', 'fd00::11/128', 'dev', 'kube-ipvs0', 'table', 'local', 'proto', String(LOCAL_ROUTE_PROTOCOL));
    sh('ip', 'route', 'add', 'local', '10.96.0.12/32', 'dev', 'kube-ipvs0', 'table', 'local', 'proto', 'static'); // an operator's: not ours
    sh('iptables-legacy', '-t', 'nat', '-N', 'KUBE-SERVICES');
    sh('iptables-legacy', '-t', 'nat', '-A', 'KUBE-SERVICES', '-d', '10.96.0.10/32', '-j', 'ACCEPT');

    const r = await inspectJson();
    expect(r.ipvs).toEqual({
      available: true, version: '1.2.1', connTableSize: 4096,
      services: expect.arrayContaining([
        { family: 'ipv4', protocol: 'tcp', address: '10.96.0.10', port: 80, fwmark: null, scheduler: 'rr', flags: ['persistent'], timeout: 10800, netmask: 32,
          destinations: [{ address: '10.244.1.2', port: 8080, forward: 'masq', weight: 1, upperThreshold: 0, lowerThreshold: 0, activeConns: 0, inactiveConns: 0 }] },
        { family: 'ipv4', protocol: null, address: null, port: null, fwmark: 6, scheduler: 'sh', flags: ['sh-port'], timeout: 0, netmask: 32, destinations: [] },
      ]),
    });
    expect(r.ipsets).toEqual([{ name: 'KUBE-CLUSTER-IP', type: 'hash:ip,port', family: 'inet', entries: ['10.96.0.10,tcp:80'] }]);
    // the link is up: the kernel gave it an IPv6 link-local address of its own
    expect(r.dummy).toEqual({ name: 'kube-ipvs0', exists: true, addresses: ['10.96.0.10', expect.stringMatching(/^fe80:/)], routes: ['10.96.0.11', 'fd00::11'] });
    expect(r.iptables.backend).toBe('legacy');
    expect(r.iptables.nat).toEqual(expect.arrayContaining(['-A KUBE-SERVICES -d 10.96.0.10/32 -j ACCEPT']));
    expect(r.errors).toBeUndefined();
  });
});
