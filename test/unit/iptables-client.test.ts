import { describe, expect, it } from 'vitest';
import {
  Iptables,
  IptablesError,
  comment,
  detectBackend,
  detectBackendWithReason,
  PROBE_INPUT,
  spawnExec,
  type Exec,
  type ExecOptions,
  type ExecResult,
} from '../../src/kernel/iptables.js';

interface Call {
  file: string;
  args: readonly string[];
  opts?: ExecOptions;
}

/** A fake runner: `handler` answers each command (stdout string, full result, or a throw). */
function fakeExec(handler: (file: string, args: readonly string[], input?: string) => string | Partial<ExecResult>): {
  exec: Exec;
  calls: Call[];
} {
  const calls: Call[] = [];
  const exec: Exec = async (file, args, opts) => {
    calls.push({ file, args, opts });
    const r = handler(file, args, opts?.input);
    return typeof r === 'string'
      ? { code: 0, signal: null, stdout: r, stderr: '' }
      : { code: 0, signal: null, stdout: '', stderr: '', ...r };
  };
  return { exec, calls };
}

const MANGLE_WITH_HINT = '*mangle\n:PREROUTING ACCEPT [0:0]\n:KUBE-IPTABLES-HINT - [0:0]\n:KUBE-KUBELET-CANARY - [0:0]\nCOMMIT\n';
const FILTER_RULES = (n: number): string =>
  `*filter\n:INPUT ACCEPT [0:0]\n${Array.from({ length: n }, (_, i) => `-A INPUT -s 10.0.0.${i}/32 -j ACCEPT`).join('\n')}\nCOMMIT\n`;

describe('detectBackend', () => {
  it('picks nft when an iptables-nft-save shows kubelet hint chains', async () => {
    const { exec, calls } = fakeExec((file) => (file === 'iptables-nft-save' ? MANGLE_WITH_HINT : FILTER_RULES(50)));
    expect(await detectBackendWithReason({ exec })).toMatchObject({ backend: 'nft', reason: 'hint-nft', unusable: {} });
    expect(calls.map((c) => c.file).sort()).toEqual(['ip6tables-legacy-save', 'ip6tables-nft-save', 'iptables-legacy-save', 'iptables-nft-save']);
  });

  it('checks ip6tables-nft-save too', async () => {
    const { exec } = fakeExec((file) => (file === 'ip6tables-nft-save' ? MANGLE_WITH_HINT : ''));
    expect(await detectBackend({ exec })).toBe('nft');
    // An nft hint in IPv6 beats a legacy one in IPv4.
    const both = fakeExec((file) => (file === 'ip6tables-nft-save' || file === 'iptables-legacy-save' ? MANGLE_WITH_HINT : ''));
    expect(await detectBackendWithReason({ exec: both.exec })).toMatchObject({ backend: 'nft', reason: 'hint-nft' });
  });

  it('keeps the chosen backend\'s saves of both families (the leftover check reads them)', async () => {
    const { exec } = fakeExec((file) => (file === 'iptables-legacy-save' ? MANGLE_WITH_HINT : file.includes('legacy') ? FILTER_RULES(1) : ''));
    expect(await detectBackendWithReason({ exec })).toMatchObject({ backend: 'legacy', reason: 'hint-legacy', saved: { ipv4: MANGLE_WITH_HINT, ipv6: FILTER_RULES(1) } });
  });

  it('picks legacy when a full legacy save shows the hint (never asking for one table)', async () => {
    const { exec, calls } = fakeExec((file) => (file === 'iptables-legacy-save' ? FILTER_RULES(1) + MANGLE_WITH_HINT : FILTER_RULES(99)));
    expect(await detectBackendWithReason({ exec })).toMatchObject({ backend: 'legacy', reason: 'hint-legacy' });
    for (const c of calls) expect(c.args).toEqual([]);
  });

  it('falls back to the backend with more rules', async () => {
    const legacy = fakeExec((file) => (file.includes('legacy') ? FILTER_RULES(7) : FILTER_RULES(3)));
    expect(await detectBackendWithReason({ exec: legacy.exec })).toEqual({ backend: 'legacy', reason: 'more-rules', nftRules: 6, legacyRules: 14, unusable: {}, saved: { ipv4: FILTER_RULES(7), ipv6: FILTER_RULES(7) } });
    const nft = fakeExec((file) => (file.includes('legacy') ? FILTER_RULES(2) : FILTER_RULES(5)));
    expect(await detectBackendWithReason({ exec: nft.exec })).toMatchObject({ backend: 'nft', reason: 'more-rules', nftRules: 10, legacyRules: 4, unusable: {} });
  });

  it('defaults to nft when nothing has rules, and treats failing or missing binaries as empty', async () => {
    const { exec } = fakeExec((file) => {
      if (file.startsWith('ip6')) throw Object.assign(new Error('spawn ENOENT'), { code: 'ENOENT' });
      return { code: 1, stdout: FILTER_RULES(9), stderr: 'boom' };
    });
    expect(await detectBackendWithReason({ exec })).toEqual({
      backend: 'nft',
      reason: 'default',
      nftRules: 0,
      legacyRules: 0,
      unusable: { nft: 'iptables-nft-save: boom', legacy: 'iptables-legacy-save: boom' },
      saved: {},
    });
  });

  it('runs both backends\' saves of both families at once, in one round', async () => {
    const rounds: string[][] = [];
    let current: string[] | null = null;
    const exec: Exec = async (file) => {
      if (current === null) rounds.push((current = []));
      current.push(file);
      await new Promise((r) => setTimeout(r, 20));
      current = null;
      return { code: 0, signal: null, stdout: '', stderr: '' };
    };
    await detectBackend({ exec });
    expect(rounds).toEqual([['iptables-nft-save', 'iptables-legacy-save', 'ip6tables-nft-save', 'ip6tables-legacy-save']]);
  });

  it('probe: skipped when the preferred backend already holds nat and filter tables', async () => {
    const { exec, calls } = fakeExec((file) => (file === 'iptables-nft-save' ? `${MANGLE_WITH_HINT}*nat\nCOMMIT\n*filter\nCOMMIT\n` : ''));
    expect(await detectBackendWithReason({ exec, probe: true })).toMatchObject({ backend: 'nft', unusable: {} });
    expect(calls.some((c) => c.file.endsWith('-restore'))).toBe(false);
  });

  it('uses the other backend when the preferred one cannot even save', async () => {
    const { exec } = fakeExec((file) =>
      file.includes('nft') ? { code: 4, stderr: 'iptables-nft-save v1.8.9 (nf_tables): Could not fetch rule set generation id: Invalid argument\n' } : '',
    );
    expect(await detectBackendWithReason({ exec })).toEqual({
      backend: 'legacy',
      reason: 'default',
      nftRules: 0,
      legacyRules: 0,
      unusable: { nft: 'iptables-nft-save: iptables-nft-save v1.8.9 (nf_tables): Could not fetch rule set generation id: Invalid argument' },
      saved: { ipv4: '', ipv6: '' },
    });
  });

  it('probe: a preferred backend that cannot program nat is replaced by the other, with the reason', async () => {
    const NAT_FAILS = 'iptables-nft-restore v1.8.9 (nf_tables): \nline 2: TABLE_ADD failed (Operation not supported): table nat\n';
    const { exec, calls } = fakeExec((file) => (file === 'iptables-nft-restore' ? { code: 4, stderr: NAT_FAILS } : ''));
    const d = await detectBackendWithReason({ exec, probe: true });
    expect(d).toMatchObject({ backend: 'legacy', reason: 'default' });
    expect(d.unusable.nft).toContain('TABLE_ADD failed (Operation not supported): table nat');
    const restores = calls.filter((c) => c.file.endsWith('-restore'));
    expect(restores.map((c) => c.file)).toEqual(['iptables-nft-restore', 'iptables-legacy-restore']);
    for (const r of restores) expect(r).toMatchObject({ args: ['-w', '5', '--noflush'], opts: { input: PROBE_INPUT } });
  });

  it('probe: one restore when the preferred backend passes; no restore without probe', async () => {
    const hinted = fakeExec((file) => (file === 'iptables-legacy-save' ? MANGLE_WITH_HINT : ''));
    expect(await detectBackendWithReason({ exec: hinted.exec, probe: true })).toMatchObject({ backend: 'legacy', reason: 'hint-legacy', unusable: {} });
    expect(hinted.calls.filter((c) => c.file.endsWith('-restore')).map((c) => c.file)).toEqual(['iptables-legacy-restore']);
    const plain = fakeExec(() => '');
    await detectBackend({ exec: plain.exec });
    expect(plain.calls.some((c) => c.file.endsWith('-restore'))).toBe(false);
  });

  it('probe: when neither passes, keeps the preferred backend and reports both', async () => {
    const { exec } = fakeExec((file) => (file.endsWith('-restore') ? { code: 1, stderr: `${file}: nope\n` } : ''));
    const d = await detectBackendWithReason({ exec, probe: true });
    expect(d.backend).toBe('nft');
    expect(Object.keys(d.unusable).sort()).toEqual(['legacy', 'nft']);
  });

  it('uses overridden binaries', async () => {
    const { exec, calls } = fakeExec(() => '');
    await detectBackend({ exec, binaries: { nftSave: '/opt/nft-save' } });
    expect(calls[0]?.file).toBe('/opt/nft-save');
  });

  it('Iptables.create: an explicit backend wins over detection', async () => {
    const { exec, calls } = fakeExec((file) => (file === 'iptables-nft-save' ? MANGLE_WITH_HINT : ''));
    const ipt = await Iptables.create({ exec, backend: 'legacy', family: 'ipv6' });
    expect(calls).toHaveLength(0);
    expect(ipt.binaries).toEqual({ save: 'ip6tables-legacy-save', restore: 'ip6tables-legacy-restore', iptables: 'ip6tables-legacy' });
    expect((await Iptables.create({ exec })).backend).toBe('nft');
  });
});

const NAT_NOW = `*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-OLD - [0:0]
:KUBE-SERVICES - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -j KUBE-SERVICES
COMMIT
`;

describe('Iptables (fake exec)', () => {
  it('syncs with one full save, -C only for jumps not found by text, and one restore with -w and --noflush', async () => {
    let restored = '';
    const { exec, calls } = fakeExec((file, args, input) => {
      if (file === 'iptables-legacy-save') return NAT_NOW;
      if (file === 'iptables-legacy') return { code: args.includes('OUTPUT') ? 0 : 1 };
      restored = input ?? '';
      return '';
    });
    const ipt = new Iptables('legacy', { exec, waitSeconds: 7, lockFile: '/tmp/test.lock' });
    const portal = [...comment('kubernetes service portals'), '-j', 'KUBE-SERVICES'];
    const [plan] = await ipt.sync([
      {
        table: 'nat',
        chains: [{ name: 'KUBE-SERVICES', rules: [['-j', 'RETURN']] }, { name: 'KUBE-NEW', rules: [] }],
        jumps: [
          { chain: 'PREROUTING', rule: portal }, // found by text
          { chain: 'OUTPUT', rule: portal }, // printed differently: -C says present
          { chain: 'POSTROUTING', rule: ['-j', 'KUBE-SERVICES'] }, // chain not in the table: no -C, added
          { chain: 'OUTPUT', rule: ['-j', 'KUBE-NEW'] }, // target not created yet: no -C, added
        ],
      },
    ]);
    expect(calls.map((c) => [c.file, ...c.args])).toEqual([
      ['iptables-legacy-save'],
      ['iptables-legacy', '-w', '7', '-t', 'nat', '-C', 'OUTPUT', '-m', 'comment', '--comment', 'kubernetes service portals', '-j', 'KUBE-SERVICES'],
      ['iptables-legacy-restore', '-w', '7', '--noflush'],
    ]);
    expect(calls.every((c) => c.opts?.env?.XTABLES_LOCKFILE === '/tmp/test.lock')).toBe(true);
    expect(restored).toBe(plan?.text);
    expect(restored).toBe(`*nat
:KUBE-SERVICES - [0:0]
:KUBE-NEW - [0:0]
:KUBE-OLD - [0:0]
-I OUTPUT -j KUBE-NEW
-I POSTROUTING -j KUBE-SERVICES
-A KUBE-SERVICES -j RETURN
-X KUBE-OLD
COMMIT
`);
  });

  it('turns a failed restore into ERESTORE with table and line, and stops there', async () => {
    const { exec, calls } = fakeExec((file) => {
      if (file.endsWith('-save')) return '';
      return {
        code: 2,
        stderr: "iptables-nft-restore v1.8.9 (nf_tables): invalid port/service `99999' specified\nError occurred at line: 3\nTry `iptables-nft-restore -h' or 'iptables-nft-restore --help' for more information.\n",
      };
    });
    const ipt = new Iptables('nft', { exec });
    const err = await ipt
      .sync([
        { table: 'filter', chains: [{ name: 'KUBE-X', rules: [['-p', 'tcp', '--dport', '99999', '-j', 'ACCEPT']] }] },
        { table: 'nat', chains: [] },
      ])
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IptablesError);
    expect(err).toMatchObject({ code: 'ERESTORE', table: 'filter', line: 3, lineText: '-A KUBE-X -p tcp --dport 99999 -j ACCEPT', exitCode: 2 });
    expect((err as Error).message).toMatch(/table filter failed at line 3 .*invalid port\/service/);
    expect(calls.map((c) => c.file)).toEqual(['iptables-nft-save', 'iptables-nft-restore']);
  });

  it('reports save failures and unstartable binaries with typed errors', async () => {
    const failing = new Iptables('nft', { exec: fakeExec(() => ({ code: 4, stderr: 'no lock' })).exec });
    await expect(failing.save('nat')).rejects.toMatchObject({ code: 'ESAVE', table: 'nat', exitCode: 4 });
    const missing = new Iptables('nft', {
      exec: fakeExec(() => {
        throw Object.assign(new Error('spawn iptables-nft-save ENOENT'), { code: 'ENOENT' });
      }).exec,
    });
    await expect(missing.save('nat')).rejects.toMatchObject({ code: 'EEXEC' });
    const killed = new Iptables('nft', { exec: fakeExec(() => ({ code: null, signal: 'SIGKILL' })).exec });
    await expect(killed.save('nat')).rejects.toMatchObject({ code: 'EEXEC' });
  });

  it('saveOwned reads one full save and returns owned lines per table', async () => {
    const { exec, calls } = fakeExec(() => NAT_NOW);
    const ipt = new Iptables('nft', { exec });
    expect(await ipt.saveOwned()).toEqual({
      backend: 'nft',
      nat: [
        ':KUBE-OLD - [0:0]',
        ':KUBE-SERVICES - [0:0]',
        '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
        '-A OUTPUT -j KUBE-SERVICES',
      ],
      filter: [],
    });
    expect(calls).toEqual([expect.objectContaining({ file: 'iptables-nft-save', args: [] })]);
    // Given output read just before (by backend detection), it runs nothing.
    expect((await ipt.saveOwned(['nat'], NAT_NOW)).nat).toHaveLength(4);
    expect(calls).toHaveLength(1);
  });

  it('serialises concurrent syncs (save and restore never interleave)', async () => {
    const log: string[] = [];
    const exec: Exec = async (file) => {
      log.push(`start ${file}`);
      await new Promise((r) => setTimeout(r, 5));
      log.push(`end ${file}`);
      return { code: 0, signal: null, stdout: '', stderr: '' };
    };
    const ipt = new Iptables('nft', { exec });
    await Promise.all([ipt.sync([{ table: 'nat', chains: [] }]), ipt.sync([{ table: 'nat', chains: [] }])]);
    for (let i = 0; i < log.length; i += 2) expect(log[i + 1]).toBe(log[i]?.replace('start', 'end'));
  });
});

describe('spawnExec', () => {
  it('passes stdin, collects output and exit status, without a shell', async () => {
    const r = await spawnExec(process.execPath, ['-e', 'process.stdin.pipe(process.stdout); process.stdin.on("end", () => { console.error("e"); process.exitCode = 3; })'], {
      input: '$(echo no-shell) "x"\n',
    });
    expect(r).toEqual({ code: 3, signal: null, stdout: '$(echo no-shell) "x"\n', stderr: 'e\n' });
  });

  it('rejects when the binary is missing', async () => {
    await expect(spawnExec('/nonexistent/iptables-nft-save', [])).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('kills on timeout', async () => {
    const r = await spawnExec(process.execPath, ['-e', 'setTimeout(() => {}, 10000)'], { timeoutMs: 100 });
    expect(r.code).toBeNull();
    expect(r.signal).toBe('SIGKILL');
  });
});
