// Iptables.generation() against the real tables: a token that stays through reads, saves and
// traffic (counters), and moves with every rule, chain or policy change, in both backends and
// families; read without a process.
import { assertIsolated } from '../lib/guard.js';
assertIsolated();

import { execFileSync } from 'node:child_process';
import { connect } from 'node:net';

import { describe, expect, it } from 'vitest';

import { Iptables, defaultBinaries, spawnExec, type Backend, type Exec, type Family } from '../../../src/kernel/iptables.js';

const combos: [Backend, Family][] = [];
for (const b of ['legacy', 'nft'] as Backend[]) {
  for (const f of ['ipv4', 'ipv6'] as Family[]) {
    const ok = await spawnExec(defaultBinaries(b, f).save, []).then((r) => r.code === 0, () => false);
    if (ok) combos.push([b, f]);
  }
}
if (combos.length < 4) throw new Error(`iptables backends missing on this host: only ${combos.map((c) => c.join('/')).join(', ')}`);

/** A TCP connection attempt to a closed port on lo (refused): traffic through nat and filter OUTPUT. */
function knock(family: Family): Promise<void> {
  return new Promise((resolve) => {
    const s = connect({ host: family === 'ipv4' ? '127.0.0.1' : '::1', port: 9 });
    s.on('error', () => resolve());
    s.on('connect', () => (s.destroy(), resolve()));
  });
}

describe.each(combos)('generation() with %s %s', (backend, family) => {
  const bin = defaultBinaries(backend, family);
  const run = (...args: string[]): string => execFileSync(bin.iptables, ['-w', ...args], { encoding: 'utf8' });
  let execs = 0;
  const counting: Exec = (file, args, opts) => (execs++, spawnExec(file, args, opts));
  const ipt = new Iptables(backend, { family, exec: counting });
  const real = new Iptables(backend, { family });
  const token = (): Promise<string | null> => real.generation(['nat', 'filter']);

  it('stays through reads, iptables-save and counted traffic; no process reads it', async () => {
    run('-t', 'nat', '-N', 'KUBE-GEN-TEST');
    run('-t', 'nat', '-A', 'KUBE-GEN-TEST', '-p', 'tcp', '--dport', '9', '-j', 'RETURN');
    run('-t', 'nat', '-A', 'OUTPUT', '-j', 'KUBE-GEN-TEST');
    run('-t', 'filter', '-A', 'OUTPUT', '-p', 'tcp', '--dport', '9', '-j', 'ACCEPT');
    const t0 = await token();
    expect(t0).toMatch(backend === 'nft' ? /^nft:\d+$/ : /^legacy:/);
    expect(await token()).toBe(t0);
    await ipt.saveOwned(['nat', 'filter']);
    await knock(family);
    await knock(family);
    expect(run('-t', 'filter', '-L', 'OUTPUT', '-v', '-n', '-x')).toMatch(/^\s*[1-9]\d*\s+\d+\s+ACCEPT/m);
    expect(await token()).toBe(t0);
    execs = 0;
    await token();
    expect(execs).toBe(0);
  });

  it('moves with a rule replaced by one of the same size, a chain flushed, a policy changed (legacy: back when the rules are)', async () => {
    const changes: (() => void)[] = [
      () => run('-t', 'nat', '-R', 'KUBE-GEN-TEST', '1', '-p', 'tcp', '--dport', '8', '-j', 'RETURN'),
      () => run('-t', 'nat', '-F', 'KUBE-GEN-TEST'),
      () => run('-t', 'filter', '-P', 'FORWARD', 'DROP'),
    ];
    const seen = [await token()];
    for (const change of changes) {
      change();
      const t = await token();
      expect(seen, `after change ${seen.length}`).not.toContain(t);
      seen.push(t);
    }
    // Changed back: the same rules again. Legacy's token is their content; nft's generation only moves on.
    run('-t', 'filter', '-P', 'FORWARD', 'ACCEPT');
    if (backend === 'legacy') expect(await token()).toBe(seen.at(-2));
    else expect(seen).not.toContain(await token());
    run('-t', 'nat', '-D', 'OUTPUT', '-j', 'KUBE-GEN-TEST');
    run('-t', 'nat', '-X', 'KUBE-GEN-TEST');
    run('-t', 'filter', '-D', 'OUTPUT', '-p', 'tcp', '--dport', '9', '-j', 'ACCEPT');
  });

  it('a given command runner reads no token (the tables are not this kernel\'s)', async () => {
    expect(await new Iptables(backend, { family, exec: counting }).generation(['nat'])).toBeNull();
  });
});
