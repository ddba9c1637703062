import { afterAll, describe, expect, it } from 'vitest';
import { assertIsolated, inFreshNetns } from '../lib/guard.js';
import { NetLab, connectMany, run, tally } from '../lib/netns.js';

assertIsolated();

describe('netns harness', () => {
  const lab = new NetLab();
  afterAll(() => lab.cleanup());

  it('runs in a fresh network namespace with only lo', async () => {
    expect(inFreshNetns()).toBe(true);
    const links = (await run('ip', ['-o', 'link', 'show'])).trim().split('\n');
    expect(links.map((l) => l.split(':')[1]?.trim())).toEqual(['lo']);
    expect(links[0]).toContain('UP');
  });

  it('has ipset on the host kernel', async () => {
    await run('ipset', ['create', 'kip-harness', 'hash:ip']);
    try {
      await run('ipset', ['add', 'kip-harness', '192.0.2.7']);
      expect(await run('ipset', ['list', 'kip-harness'])).toContain('192.0.2.7');
    } finally {
      await run('ipset', ['destroy', 'kip-harness']);
    }
  });

  it('has legacy iptables with a nat table', async () => {
    expect(await run('iptables-legacy', ['-w', '-t', 'nat', '-S'])).toContain('-P PREROUTING ACCEPT');
  });

  it('connects two named namespaces over veth', async () => {
    await lab.netns('kip-a');
    await lab.netns('kip-b');
    await lab.veth({ ns: 'kip-a', name: 'va', address: '192.0.2.1/24' }, { ns: 'kip-b', name: 'vb', address: '192.0.2.2/24' });
    await lab.echoServer({ ns: 'kip-b', name: 'b', host: '192.0.2.2', port: 8080 });
    await lab.echoServer({ ns: 'kip-b', name: 'bu', host: '192.0.2.2', port: 8080, proto: 'udp' });
    expect(tally(await connectMany({ ns: 'kip-a', host: '192.0.2.2', port: 8080, count: 3 }))).toEqual({ b: 3 });
    expect(await connectMany({ ns: 'kip-a', host: '192.0.2.2', port: 8080, proto: 'udp', count: 2 })).toEqual(['bu', 'bu']);
  });
});
