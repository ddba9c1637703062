import { existsSync, readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { assertIsolated, inUml } from '../lib/guard.js';
import { NetLab, connectMany, run } from '../lib/netns.js';

assertIsolated();

describe('uml harness', () => {
  const lab = new NetLab();
  afterAll(() => lab.cleanup());

  it('runs inside User-Mode Linux with IPVS', async () => {
    expect(inUml()).toBe(true);
    expect(existsSync('/proc/net/ip_vs')).toBe(true);
    expect(readFileSync('/proc/net/ip_vs', 'utf8')).toContain('IP Virtual Server');
    expect(await run('ipvsadm', ['-Ln'])).toContain('IP Virtual Server');
  });

  it('accepts a virtual server with a real server', async () => {
    await run('ipvsadm', ['-A', '-t', '198.51.100.10:80', '-s', 'rr']);
    try {
      await run('ipvsadm', ['-a', '-t', '198.51.100.10:80', '-r', '198.51.100.20:8080', '-m', '-w', '3']);
      expect(await run('ipvsadm', ['-Ln', '--exact'])).toMatch(/198\.51\.100\.20:8080\s+Masq\s+3/);
    } finally {
      await run('ipvsadm', ['-D', '-t', '198.51.100.10:80']);
    }
  });

  it('creates a dummy link', async () => {
    await run('ip', ['link', 'add', 'kip-dummy', 'type', 'dummy']);
    try {
      await run('ip', ['addr', 'add', '198.51.100.1/32', 'dev', 'kip-dummy']);
      expect(await run('ip', ['-o', 'addr', 'show', 'dev', 'kip-dummy'])).toContain('198.51.100.1/32');
    } finally {
      await run('ip', ['link', 'del', 'kip-dummy']);
    }
  });

  it('has ipset, legacy iptables and conntrack', async () => {
    await run('ipset', ['create', 'kip-harness', 'hash:ip,port']);
    await run('ipset', ['destroy', 'kip-harness']);
    expect(await run('iptables-legacy', ['-w', '-t', 'nat', '-S'])).toContain('-P PREROUTING ACCEPT');
    await run('conntrack', ['-L']);
  });

  it('carries TCP and UDP over a veth into a netns', async () => {
    await lab.netns('kip-backend');
    await lab.veth({ name: 'kip-h', address: '192.0.2.1/24' }, { ns: 'kip-backend', name: 'kip-b', address: '192.0.2.2/24', gateway: '192.0.2.1' });
    await lab.echoServer({ ns: 'kip-backend', name: 'backend', host: '192.0.2.2', port: 8080, withPeer: true });
    await lab.echoServer({ ns: 'kip-backend', name: 'backend-udp', host: '192.0.2.2', port: 8080, proto: 'udp' });
    const tcp = await connectMany({ host: '192.0.2.2', port: 8080, count: 2 });
    expect(tcp).toHaveLength(2);
    for (const r of tcp) expect(r).toMatch(/^backend 192\.0\.2\.1:\d+$/);
    expect(await connectMany({ host: '192.0.2.2', port: 8080, proto: 'udp', count: 2 })).toEqual(['backend-udp', 'backend-udp']);
  });
});
