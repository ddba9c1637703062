// IptablesKeeper: a verification runs iptables-save only when the kernel's token of the tables
// moved since the owned lines were last found right, and still repairs every change it hides.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import type { TableSpec } from '../../src/kernel/iptables.js';
import { IptablesKeeper, type FamilyRules } from '../../src/proxy/ipvs/iptables-keeper.js';
import { fakeIptables, type FakeIptables } from './lib/fake-iptables.js';

const SPEC: TableSpec[] = [{ table: 'nat', chains: [{ name: 'KUBE-SERVICES', rules: [] }], jumps: [] }] as unknown as TableSpec[];
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function kernel(generation: number | null = 0): { f: FakeIptables; rules: FamilyRules[] } {
  const f = fakeIptables();
  f.generation = generation;
  return { f, rules: [{ family: 'ipv4', ipt: f.ipt, spec: SPEC }] };
}

describe('IptablesKeeper with the kernel token', () => {
  it('a no-change verification reads no iptables-save while the token stays', async () => {
    const { f, rules } = kernel();
    const k = new IptablesKeeper();
    expect(await k.sync(rules, false)).toEqual({ restores: 1, saves: 1 });
    const saves = f.saves;
    for (let i = 0; i < 3; i++) expect(await k.sync(rules, true)).toEqual({ restores: 0, saves: 0 });
    expect(await k.read(rules)).toEqual(new Map([['ipv4', expect.objectContaining({ saved: false })]]));
    expect(f.saves).toBe(saves);
  });

  it('a moved token reads the rules: unchanged owned lines are adopted at the new token, changed ones restored', async () => {
    const { f, rules } = kernel();
    const k = new IptablesKeeper();
    await k.sync(rules, false);
    f.generation!++; // someone else's rule: our lines unchanged
    expect(await k.sync(rules, true)).toEqual({ restores: 0, saves: 1 });
    expect(await k.sync(rules, true)).toEqual({ restores: 0, saves: 0 });
    f.rules = '';
    f.generation!++; // our chain flushed
    expect(await k.sync(rules, true)).toEqual({ restores: 1, saves: 2 });
    expect(f.rules).toBe(JSON.stringify(SPEC));
    expect(await k.sync(rules, true)).toEqual({ restores: 0, saves: 0 });
  });

  it('a token that moved during the save is not kept: the next verification reads again', async () => {
    const { f, rules } = kernel();
    const k = new IptablesKeeper();
    await k.sync(rules, false);
    f.generation!++;
    const save = f.ipt.saveOwned.bind(f.ipt);
    f.ipt.saveOwned = (async (...a: Parameters<typeof save>) => {
      const out = await save(...a);
      f.generation!++; // a commit between the save and the second token read
      return out;
    }) as typeof save;
    expect(await k.sync(rules, true)).toEqual({ restores: 0, saves: 1 });
    f.ipt.saveOwned = save;
    expect(await k.sync(rules, true)).toEqual({ restores: 0, saves: 1 });
    expect(await k.sync(rules, true)).toEqual({ restores: 0, saves: 0 });
  });

  it('without a token every verification reads the rules', async () => {
    const { rules } = kernel(null);
    const k = new IptablesKeeper();
    await k.sync(rules, false);
    expect(await k.sync(rules, true)).toEqual({ restores: 0, saves: 1 });
    expect(await k.sync(rules, true)).toEqual({ restores: 0, saves: 1 });
  });

  it('the token survives a restart in the state directory', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kip-keeper-'));
    dirs.push(dir);
    const { f, rules } = kernel();
    await new IptablesKeeper(dir).sync(rules, false);
    const restarted = new IptablesKeeper(dir);
    expect(await restarted.sync(rules, true)).toEqual({ restores: 0, saves: 0 });
    f.generation!++;
    f.rules = '';
    expect(await new IptablesKeeper(dir).sync(rules, true)).toEqual({ restores: 1, saves: 2 });
  });
});
