// Inside UML, whose nf_tables cannot serve iptables-nft: with no kubelet hint chain detection
// prefers nft, which cannot work here, so the daemon must use legacy, say why, and sync.
// Two kernels' worth of "cannot": nf_tables not loaded (iptables-nft-save itself fails), and
// nf_tables loaded without nft NAT (TABLE_ADD failed (Operation not supported): table nat).
import { execFileSync, spawn } from 'node:child_process';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { CLI, Manifests } from '../lib/daemon.js';
import { assertIsolated } from '../lib/guard.js';

assertIsolated();

const ARGS = ['--proxy-mode', 'iptables', '--once', '--hostname-override', 'kip-node', '--cluster-cidr', '10.244.0.0/16', '--logging-format', 'json'];
const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
/** Empties every legacy table this test can touch (no hint chain, no rules: nothing prefers legacy). */
const resetLegacy = () => sh('sh', '-c', "printf '*nat\\nCOMMIT\\n*filter\\nCOMMIT\\n*mangle\\nCOMMIT\\n' | iptables-legacy-restore -w 5");

/** Unloads nf_tables and the nft modules on it (an earlier file may have had them autoloaded). */
const unloadNft = () => sh('sh', '-c', "for i in 1 2 3; do for m in $(awk '$1 ~ /^(nft_|nf_tables)/ {print $1}' /proc/modules); do rmmod $m 2>/dev/null; done; done; true");

/** One `--once` run: exit code and its JSON log lines. */
function once(manifests: Manifests): Promise<{ code: number | null; lines: Array<Record<string, any>>; raw: string }> {
  return new Promise((resolve) => {
    const c = spawn(process.execPath, [CLI, '--manifests', manifests.dir, ...ARGS], { stdio: ['ignore', 'pipe', 'pipe'] });
    let raw = '';
    c.stdout.on('data', (d) => (raw += d));
    c.stderr.on('data', (d) => (raw += d));
    c.on('close', (code) => resolve({ code, raw, lines: raw.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l)) }));
  });
}

let manifests: Manifests;

beforeAll(() => {
  unloadNft();
  resetLegacy();
  manifests = new Manifests();
});
afterAll(() => {
  // The iptables mode wrote only iptables rules here (legacy's); later files expect nf_tables unloaded.
  unloadNft();
  resetLegacy();
  manifests?.remove();
});

describe('iptables backend detection where nft cannot work', () => {
  it('nf_tables absent: picks legacy with a warning naming the reason, and syncs', async () => {
    expect(sh('sh', '-c', 'iptables-nft-save 2>&1 || true')).toContain('Could not fetch rule set generation id');
    const r = await once(manifests);
    expect(r.code, r.raw).toBe(0);
    const warn = r.lines.find((l) => l.msg === 'iptables backend nft cannot program the nat and filter tables here: using legacy');
    expect(warn, r.raw).toMatchObject({ backend: 'legacy', preferred: 'nft', preferredBecause: 'default' });
    expect(warn!.reason).toContain('Could not fetch rule set generation id');
    expect(r.lines.find((l) => l.msg === 'starting')).toMatchObject({ mode: 'iptables' });
    expect(r.lines.find((l) => l.msg === 'iptables backend')).toMatchObject({ backend: 'legacy', reason: 'default' });
    expect(sh('iptables-legacy-save', '-t', 'nat')).toMatch(/^-A KUBE-SERVICES -d 10\.96\.0\.10\/32 .*-j KUBE-SVC-/m);
  });

  it('nf_tables loaded without nft NAT (TABLE_ADD failed): the probe rejects nft, legacy syncs', async () => {
    sh('sh', '-c', 'modprobe -d "$KIP_UML_MODULES" nf_tables && modprobe -d "$KIP_UML_MODULES" nft_compat');
    resetLegacy();
    expect(sh('iptables-nft-save')).not.toContain('*nat'); // nft reads fine: only a write can tell
    const r = await once(manifests);
    expect(r.code, r.raw).toBe(0);
    const warn = r.lines.find((l) => l.msg === 'iptables backend nft cannot program the nat and filter tables here: using legacy');
    expect(warn?.reason, r.raw).toContain('TABLE_ADD failed (Operation not supported): table nat');
    expect(sh('iptables-legacy-save', '-t', 'nat')).toMatch(/^-A KUBE-SERVICES -d 10\.96\.0\.10\/32 .*-j KUBE-SVC-/m);
    expect(sh('iptables-nft-save')).not.toContain('KUBE-');
  });
});
