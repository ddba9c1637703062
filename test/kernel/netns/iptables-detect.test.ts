import { assertIsolated } from '../lib/guard.js';
assertIsolated();

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Iptables, detectBackendWithReason, spawnExec, type Backend, type Detection } from '../../../src/kernel/iptables.js';

async function sh(file: string, args: string[], input?: string): Promise<void> {
  const r = await spawnExec(file, args, { input });
  if (r.code !== 0) throw new Error(`${file} ${args.join(' ')}: exit ${r.code}: ${r.stderr}`);
}

async function works(file: string): Promise<boolean> {
  try {
    return (await spawnExec(file, [])).code === 0;
  } catch {
    return false;
  }
}

const haveBoth = (await works('iptables-legacy-save')) && (await works('iptables-nft-save'));
const EMPTY = '*filter\nCOMMIT\n*nat\nCOMMIT\n*mangle\nCOMMIT\n';

/** Empties filter, nat and mangle of every backend and family in this netns. */
async function resetAll(): Promise<void> {
  for (const b of ['legacy', 'nft'] as Backend[]) {
    for (const base of ['iptables', 'ip6tables']) await sh(`${base}-${b}-restore`, ['-w', '5'], EMPTY);
  }
}

describe.skipIf(!haveBoth)('backend detection on the real tools', () => {
  afterAll(resetAll);

  it('follows kubelet hint chains, then rule counts, else nft', async () => {
    await resetAll();
    expect(await detectBackendWithReason()).toMatchObject({ backend: 'nft', reason: 'default', nftRules: 0, legacyRules: 0, unusable: {} });

    await sh('iptables-legacy', ['-w', '5', '-t', 'mangle', '-N', 'KUBE-IPTABLES-HINT']);
    expect(await detectBackendWithReason()).toMatchObject({ backend: 'legacy', reason: 'hint-legacy' });
    expect((await Iptables.create()).binaries.restore).toBe('iptables-legacy-restore');
    expect((await Iptables.create({ backend: 'nft' })).backend).toBe('nft');

    await sh('ip6tables-nft', ['-t', 'mangle', '-N', 'KUBE-KUBELET-CANARY']);
    expect(await detectBackendWithReason()).toMatchObject({ backend: 'nft', reason: 'hint-nft' });

    await resetAll();
    for (const n of [1, 2, 3]) await sh('iptables-legacy', ['-w', '5', '-A', 'INPUT', '-s', `10.0.0.${n}`, '-j', 'ACCEPT']);
    await sh('iptables-nft', ['-A', 'INPUT', '-s', '10.0.1.1', '-j', 'ACCEPT']);
    expect(await detectBackendWithReason()).toMatchObject({ backend: 'legacy', reason: 'more-rules', nftRules: 1, legacyRules: 3, unusable: {} });
    for (const n of [2, 3, 4]) await sh('ip6tables-nft', ['-A', 'INPUT', '-s', `fd00::${n}`, '-j', 'ACCEPT']);
    expect(await detectBackendWithReason()).toMatchObject({ backend: 'nft', reason: 'more-rules', nftRules: 4, legacyRules: 3, unusable: {} });
  });
});

const DIST_IPTABLES = new URL('../../../dist/src/kernel/iptables.js', import.meta.url).pathname;

/**
 * In a network namespace of its own (where no table exists yet, so the probe must run): `setup`
 * (shell), then the built detectBackendWithReason({ probe: true, binaries }), then both backends'
 * IPv4 iptables-save.
 */
async function probeInFreshNetns(setup: string, binaries: Record<string, string> = {}): Promise<{ d: Detection; nft: string; legacy: string }> {
  const js = `const m = await import(${JSON.stringify(DIST_IPTABLES)});
const d = await m.detectBackendWithReason({ probe: true, binaries: ${JSON.stringify(binaries)} });
const save = async (f) => (await m.spawnExec(f, [])).stdout;
console.log(JSON.stringify({ d, nft: await save('iptables-nft-save'), legacy: await save('iptables-legacy-save') }));`;
  const r = await spawnExec('unshare', ['-n', 'sh', '-c', `${setup}\nexec "$0" --input-type=module -e "$1"`, process.execPath, js]);
  if (r.code !== 0) throw new Error(`probe in a fresh netns: exit ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout) as { d: Detection; nft: string; legacy: string };
}

describe.skipIf(!haveBoth)('backend probe on the real tools (each in a fresh netns)', () => {
  it('both backends pass here, so the preference holds; the probe leaves nothing but the tables', async () => {
    const plain = await probeInFreshNetns('true');
    expect(plain.d).toMatchObject({ backend: 'nft', reason: 'default', nftRules: 0, legacyRules: 0, unusable: {} });
    expect(plain.nft).toMatch(/^\*nat$/m); // the probe did create the nat table
    expect(plain.legacy).not.toMatch(/^\*nat$/m); // and touched only the chosen backend
    const hinted = await probeInFreshNetns('iptables-legacy -w 5 -t mangle -N KUBE-IPTABLES-HINT');
    expect(hinted.d).toMatchObject({ backend: 'legacy', reason: 'hint-legacy', unusable: {} });
    expect(hinted.legacy).toMatch(/^\*nat$/m);
    for (const saved of [plain.nft, hinted.legacy]) {
      expect(saved).not.toContain('KUBE-PROXY-PROBE');
      expect(saved.split('\n').filter((l) => l.startsWith('-A'))).toEqual([]);
    }
  });

  it('a preferred backend whose restore fails is replaced by the other one, naming the reason', async () => {
    // Only the nft restore is replaced (by one failing as nf_tables without NAT does); the legacy probe is real.
    const dir = mkdtempSync(join(tmpdir(), 'kip-probe-'));
    try {
      const stub = join(dir, 'iptables-nft-restore');
      writeFileSync(stub, '#!/bin/sh\ncat >/dev/null\necho "line 2: TABLE_ADD failed (Operation not supported): table nat" >&2\nexit 4\n', { mode: 0o755 });
      const { d, legacy } = await probeInFreshNetns('true', { nftRestore: stub });
      expect(d).toMatchObject({ backend: 'legacy', reason: 'default' });
      expect(d.unusable.nft).toContain('TABLE_ADD failed (Operation not supported): table nat');
      expect(legacy).toMatch(/^\*nat$/m);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe.skipIf(!(await works('iptables-legacy-save')))('xtables lock (legacy)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kip-xtables-'));
  const lockFile = join(dir, 'xtables.lock');
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('waits -w seconds for the lock, then fails; succeeds once it is free', async () => {
    const ipt = new Iptables('legacy', { lockFile, waitSeconds: 1 });
    const spec = [{ table: 'filter' as const, chains: [{ name: 'KUBE-LOCKED', rules: [['-j', 'RETURN']] }] }];
    await sh('touch', [lockFile]);
    // Its own process group, so that killing the group also ends the `sleep` that holds the lock.
    const holder = spawn('flock', [lockFile, 'sleep', '30'], { stdio: 'ignore', detached: true });
    const exited = new Promise((r) => holder.once('exit', r));
    try {
      // Wait until the holder has the lock.
      for (let i = 0; i < 100 && (await spawnExec('flock', ['-n', lockFile, 'true'])).code === 0; i++) {
        await new Promise((r) => setTimeout(r, 20));
      }
      const started = Date.now();
      await expect(ipt.sync(spec)).rejects.toMatchObject({ code: 'ERESTORE', table: 'filter', exitCode: 4 });
      expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    } finally {
      process.kill(-holder.pid!, 'SIGKILL');
      await exited;
    }
    await ipt.sync(spec);
    expect((await ipt.saveOwned(['filter'])).filter).toEqual([':KUBE-LOCKED - [0:0]', '-A KUBE-LOCKED -j RETURN']);
    await ipt.cleanup(['filter']);
  });
});
