import { assertIsolated } from '../lib/guard.js';
assertIsolated();

import { beforeEach, describe, expect, it } from 'vitest';
import {
  Iptables,
  IptablesError,
  comment,
  defaultBinaries,
  parseSave,
  spawnExec,
  type Backend,
  type Family,
  type Rule,
  type TableSpec,
} from '../../../src/kernel/iptables.js';

const BACKENDS: Backend[] = ['legacy', 'nft'];
const FAMILIES: Family[] = ['ipv4', 'ipv6'];

/** Runs a binary and insists on success (the independent cross-check path: no code under test). */
async function sh(file: string, args: string[], input?: string): Promise<string> {
  const r = await spawnExec(file, args, { input });
  if (r.code !== 0) throw new Error(`${file} ${args.join(' ')}: exit ${r.code}: ${r.stderr}`);
  return r.stdout;
}

async function available(backend: Backend, family: Family): Promise<boolean> {
  try {
    return (await spawnExec(defaultBinaries(backend, family).save, [])).code === 0;
  } catch {
    return false;
  }
}

const combos: [Backend, Family][] = [];
for (const b of BACKENDS) for (const f of FAMILIES) if (await available(b, f)) combos.push([b, f]);
if (combos.length === 0) throw new Error('no iptables backend available on this host');

describe.each(combos)('iptables %s %s in a fresh netns', (backend, family) => {
  const bin = defaultBinaries(backend, family);
  const addr = family === 'ipv4' ? (n: number) => `10.96.0.${n}/32` : (n: number) => `fd00::${n}/128`;
  const ipt = new Iptables(backend, { family });

  /** iptables-save lines (no comments) of one table, straight from the binary. */
  const saveLines = async (table: string): Promise<string[]> =>
    (await sh(bin.save, ['-t', table])).split('\n').filter((l) => l !== '' && !l.startsWith('#'));
  /** Lines of a table that are not ours: no owned chain declared, no rule in or to an owned chain. */
  const foreign = (lines: string[]): string[] => lines.filter((l) => !/(^:KUBE-|^-A KUBE-|-j KUBE-)/.test(l));
  /** Owned chains and their rule tokens as iptables-save prints them. */
  const owned = async (table: string): Promise<Record<string, string[][]>> => {
    const [t] = parseSave(await sh(bin.save, ['-t', table]));
    const out: Record<string, string[][]> = {};
    for (const c of t?.chains ?? []) if (c.name.startsWith('KUBE-')) out[c.name] = c.rules.map((r) => r.args);
    return out;
  };
  const count = (lines: string[], line: string): number => lines.filter((l) => l === line).length;

  const portal: Rule = [...comment('kubernetes service portals'), '-j', 'KUBE-SERVICES'];
  const spec = (svcRules: Rule[], extraChains = true): TableSpec[] => [
    {
      table: 'nat',
      chains: [
        { name: 'KUBE-SERVICES', rules: svcRules },
        { name: 'KUBE-MARK-MASQ', rules: [['-j', 'MARK', '--set-xmark', '0x4000/0x4000']] },
        ...(extraChains ? [{ name: 'KUBE-NODE-PORT', rules: [['-p', 'tcp', '-m', 'tcp', '--dport', '30080', '-j', 'KUBE-MARK-MASQ']] }] : []),
      ],
      jumps: [
        { chain: 'PREROUTING', rule: portal },
        { chain: 'OUTPUT', rule: portal },
        ...(extraChains ? [{ chain: 'PREROUTING', rule: ['-p', 'tcp', '--dport', '30080', '-j', 'KUBE-NODE-PORT'] }] : []),
      ],
    },
    {
      table: 'filter',
      chains: [{ name: 'KUBE-FORWARD', rules: [['-m', 'mark', '--mark', '0x4000/0x4000', '-j', 'ACCEPT']] }],
      jumps: [{ chain: 'FORWARD', rule: [...comment('kubernetes forwarding rules'), '-j', 'KUBE-FORWARD'] }],
    },
  ];
  const svc = (n: number): Rule => ['-d', addr(n), ...comment(`default/svc-${n}:http`), '-j', 'KUBE-MARK-MASQ'];

  beforeEach(async () => {
    // Start from empty nat and filter tables (full restore, no --noflush), then add foreign state.
    await sh(bin.restore, ['-w', '5'], '*nat\nCOMMIT\n*filter\nCOMMIT\n');
    await sh(bin.restore, ['-w', '5', '--noflush'], [
      '*filter',
      ':OTHER - [0:0]',
      '-A OTHER -s ' + addr(200) + ' -j ACCEPT',
      '-A INPUT -j OTHER',
      '-A FORWARD -m comment --comment "someone else\'s rule" -j ACCEPT',
      'COMMIT',
      '*nat',
      ':DOCKER - [0:0]',
      '-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER',
      '-A DOCKER -j RETURN',
      'COMMIT',
      '',
    ].join('\n'));
  });

  it('writes owned chains and jumps, leaves foreign rules alone, and is idempotent', async () => {
    const natBefore = await saveLines('nat');
    const filterBefore = await saveLines('filter');
    await ipt.sync(spec([svc(1), svc(2)]));
    const natAfter1 = await saveLines('nat');
    const filterAfter1 = await saveLines('filter');
    await ipt.sync(spec([svc(1), svc(2)]));
    expect(await saveLines('nat')).toEqual(natAfter1);
    expect(await saveLines('filter')).toEqual(filterAfter1);

    expect(foreign(natAfter1)).toEqual(foreign(natBefore));
    expect(foreign(filterAfter1)).toEqual(foreign(filterBefore));
    expect(await owned('nat')).toEqual({
      'KUBE-SERVICES': [svc(1), svc(2)],
      'KUBE-MARK-MASQ': [['-j', 'MARK', '--set-xmark', '0x4000/0x4000']],
      'KUBE-NODE-PORT': [['-p', 'tcp', '-m', 'tcp', '--dport', '30080', '-j', 'KUBE-MARK-MASQ']],
    });
    expect(await owned('filter')).toEqual({ 'KUBE-FORWARD': [['-m', 'mark', '--mark', '0x4000/0x4000', '-j', 'ACCEPT']] });
    const portalLine = '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES';
    expect(count(natAfter1, portalLine)).toBe(1);
    expect(count(natAfter1, '-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES')).toBe(1);
    // Printed as `-p tcp -m tcp --dport`, so found by iptables -C, not by text: still one copy.
    expect(count(natAfter1, '-A PREROUTING -p tcp -m tcp --dport 30080 -j KUBE-NODE-PORT')).toBe(1);
    // Jumps go first in the built-in chain, in the order given, ahead of DOCKER's.
    expect(natAfter1.filter((l) => l.startsWith('-A PREROUTING'))).toEqual([
      portalLine,
      '-A PREROUTING -p tcp -m tcp --dport 30080 -j KUBE-NODE-PORT',
      '-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER',
    ]);
  });

  it('in commits of one rule each, writes the same chains and jumps, and drops a chain with its jump', async () => {
    const batched = new Iptables(backend, { family, batchRules: 1 });
    await ipt.sync(spec([svc(1), svc(2)]));
    const whole = await saveLines('nat');
    await ipt.cleanup();
    await batched.sync(spec([svc(1), svc(2)]));
    expect(await saveLines('nat')).toEqual(whole);
    await batched.sync(spec([svc(3)], false));
    expect(await owned('nat')).toEqual({ 'KUBE-SERVICES': [svc(3)], 'KUBE-MARK-MASQ': [['-j', 'MARK', '--set-xmark', '0x4000/0x4000']] });
    expect((await saveLines('nat')).filter((l) => l.includes('KUBE-NODE-PORT'))).toEqual([]);
  });

  it('changes rules and drops a chain together with its jump', async () => {
    await ipt.sync(spec([svc(1), svc(2)]));
    const foreignNat = foreign(await saveLines('nat'));
    const [nat] = await ipt.sync(spec([svc(3)], false));
    expect(nat?.deletedChains).toEqual(['KUBE-NODE-PORT']);
    expect(nat?.removedRules).toEqual(['-A PREROUTING -p tcp -m tcp --dport 30080 -j KUBE-NODE-PORT']);
    expect(await owned('nat')).toEqual({
      'KUBE-SERVICES': [svc(3)],
      'KUBE-MARK-MASQ': [['-j', 'MARK', '--set-xmark', '0x4000/0x4000']],
    });
    const lines = await saveLines('nat');
    expect(lines.some((l) => l.includes('KUBE-NODE-PORT'))).toBe(false);
    expect(foreign(lines)).toEqual(foreignNat);
  });

  it('runs no restore when the rules read back as written; rewrites only a chain edited or flushed by hand', async () => {
    const inputs: string[] = [];
    const counted = new Iptables(backend, { family, exec: (file, args, opts) => (file.endsWith('-restore') && inputs.push(opts!.input!), spawnExec(file, args, opts)) });
    await counted.sync(spec([svc(1), svc(2)]));
    const written = await saveLines('nat');
    expect(inputs).toHaveLength(1);
    await counted.sync(spec([svc(1), svc(2)])); // reads back as written: learns how the tools print it
    await counted.sync(spec([svc(1), svc(2)]));
    expect(inputs).toHaveLength(1);

    // Same target, another address: the text differs from the print learned above.
    await sh(bin.iptables, ['-w', '5', '-t', 'nat', '-R', 'KUBE-SERVICES', '2', ...svc(9)]);
    await sh(bin.iptables, ['-w', '5', '-t', 'nat', '-F', 'KUBE-NODE-PORT']);
    await counted.sync(spec([svc(1), svc(2)]));
    expect(inputs).toHaveLength(2);
    const declared = inputs[1]!.split('\n').filter((l) => l.startsWith(':'));
    expect(declared.sort()).toEqual([':KUBE-NODE-PORT - [0:0]', ':KUBE-SERVICES - [0:0]']);
    expect(await saveLines('nat')).toEqual(written);

    // A deleted jump is restored without rewriting any chain.
    await sh(bin.iptables, ['-w', '5', '-t', 'nat', '-D', 'OUTPUT', ...portal]);
    await counted.sync(spec([svc(1), svc(2)]));
    expect(inputs).toHaveLength(3);
    expect(inputs[2]!.split('\n').filter((l) => l.startsWith(':') || l.startsWith('-A KUBE-'))).toEqual([]);
    expect(await saveLines('nat')).toEqual(written);
  });

  it('a broken rule fails with ERESTORE naming table and line, and changes nothing', async () => {
    await ipt.sync(spec([svc(1)]));
    const natBefore = await saveLines('nat');
    const filterBefore = await saveLines('filter');
    const broken = spec([svc(1), svc(2), ['-p', 'tcp', '--dport', '99999', '-j', 'ACCEPT']], false);
    const err = await ipt.sync(broken).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IptablesError);
    const e = err as IptablesError;
    expect(e.code).toBe('ERESTORE');
    expect(e.table).toBe('nat');
    expect(e.lineText).toBe('-A KUBE-SERVICES -p tcp --dport 99999 -j ACCEPT');
    expect(e.line).toBeGreaterThan(1);
    expect(e.message).toContain('99999');
    // Atomic per table: the chain that would have been deleted and the rules that would have changed are as before.
    expect(await saveLines('nat')).toEqual(natBefore);
    expect(await saveLines('filter')).toEqual(filterBefore);
  });

  it('a jump to a missing chain fails at its line and changes nothing', async () => {
    await ipt.sync(spec([svc(1)]));
    const natBefore = await saveLines('nat');
    const bad = spec([svc(1), ['-j', 'KUBE-NOWHERE']]);
    await expect(ipt.sync(bad)).rejects.toMatchObject({ code: 'ERESTORE', table: 'nat' });
    expect(await saveLines('nat')).toEqual(natBefore);
  });

  it('hostile names in comments produce no extra rule', async () => {
    const hostile = ['"\n-A INPUT -j DROP\n', '\\"\r\n-A INPUT -j DROP\n#', "--table=filter ' \" \\", 'x'.repeat(400)];
    const rules = hostile.map((h) => [...comment(h), '-j', 'RETURN']);
    const filterBefore = await saveLines('filter');
    await ipt.sync([{ table: 'filter', chains: [{ name: 'KUBE-HOSTILE', rules }] }]);
    const after = await saveLines('filter');
    expect(after.filter((l) => l.includes('DROP') && !l.includes('--comment'))).toEqual([]);
    expect(foreign(after)).toEqual(foreign(filterBefore));
    expect(await owned('filter')).toEqual({ 'KUBE-HOSTILE': rules.map((r) => [...r]) });
    expect(after.filter((l) => l.startsWith('-A KUBE-HOSTILE'))).toHaveLength(hostile.length);
  });

  it('saveOwned returns exactly our lines; cleanup removes them and nothing else', async () => {
    const natBefore = await saveLines('nat');
    const filterBefore = await saveLines('filter');
    await ipt.sync(spec([svc(1)]));
    const dump = await ipt.saveOwned();
    expect(dump.backend).toBe(backend);
    const natNow = await saveLines('nat');
    expect([...dump.nat].sort()).toEqual(natNow.filter((l) => !foreign([l]).length).map((l) => l.replace(/ \[\d+:\d+\]$/, ' [0:0]')).sort());
    expect(dump.filter).toContain('-A KUBE-FORWARD -m mark --mark 0x4000/0x4000 -j ACCEPT');

    await ipt.cleanup();
    expect(await saveLines('nat')).toEqual(natBefore);
    expect(await saveLines('filter')).toEqual(filterBefore);
    expect(await ipt.saveOwned()).toEqual({ backend, nat: [], filter: [] });
  });

  it('leaves chains outside the ownership predicate alone', async () => {
    await sh(bin.iptables, ['-w', '5', '-t', 'filter', '-N', 'KUBE-FIREWALL']); // kubelet's
    await sh(bin.iptables, ['-w', '5', '-t', 'filter', '-N', 'KUBE-STALE']);
    await ipt.sync(spec([svc(1)]));
    const names = (await saveLines('filter')).filter((l) => l.startsWith(':')).map((l) => l.split(' ')[0]);
    expect(names).toContain(':KUBE-FIREWALL');
    expect(names).not.toContain(':KUBE-STALE');
  });
});
