import { spawnExec, type Exec } from './exec.js';
import type { Backend, Family, Table } from './types.js';

/** The lock file legacy iptables uses unless XTABLES_LOCKFILE says otherwise. */
export const DEFAULT_XTABLES_LOCK = '/run/xtables.lock';

/** Chains kubelet (1.17+) creates in mangle so that others can tell which backend it uses. */
export const KUBELET_HINT_CHAINS: readonly string[] = ['KUBE-IPTABLES-HINT', 'KUBE-KUBELET-CANARY'];

/** The three binaries of one backend and family. */
export interface Binaries {
  save: string;
  restore: string;
  iptables: string;
}

/** The binaries of a backend, e.g. `ip6tables-nft-restore`. */
export function defaultBinaries(backend: Backend, family: Family): Binaries {
  const base = family === 'ipv6' ? 'ip6tables' : 'iptables';
  return { save: `${base}-${backend}-save`, restore: `${base}-${backend}-restore`, iptables: `${base}-${backend}` };
}

/** The save binaries that backend detection reads. */
export interface DetectBinaries {
  nftSave: string;
  nftSave6: string;
  legacySave: string;
  legacySave6: string;
}

const DETECT_DEFAULTS: DetectBinaries = {
  nftSave: 'iptables-nft-save',
  nftSave6: 'ip6tables-nft-save',
  legacySave: 'iptables-legacy-save',
  legacySave6: 'ip6tables-legacy-save',
};

/** Options of {@link detectBackend}. */
export interface DetectOptions {
  exec?: Exec;
  binaries?: Partial<DetectBinaries>;
  /** Per-command time limit (iptables-nft 1.8.3 could loop forever). Default 5 s. */
  timeoutMs?: number;
}

/** Why {@link detectBackend} chose what it chose. */
export interface Detection {
  backend: Backend;
  reason: 'hint-nft' | 'hint-legacy' | 'more-rules' | 'default';
  nftRules: number;
  legacyRules: number;
}

function hasHint(saveOutput: string): boolean {
  return saveOutput.split('\n').some((l) => KUBELET_HINT_CHAINS.some((c) => l.startsWith(`:${c} `)));
}

function countRules(saveOutput: string): number {
  return saveOutput.split('\n').filter((l) => l.startsWith('-') || /^\[\d+:\d+\] -/.test(l)).length;
}

/**
 * Picks nft or legacy the way kubernetes-sigs/iptables-wrappers does: kubelet's hint chains in
 * mangle (iptables-nft-save -t mangle, then a full iptables-legacy-save, which must not be asked
 * for mangle lest the kernel create it), else whichever backend holds more rules, else nft.
 * Failing commands count as empty output.
 */
export async function detectBackendWithReason(opts: DetectOptions = {}): Promise<Detection> {
  const exec = opts.exec ?? spawnExec;
  const bin = { ...DETECT_DEFAULTS, ...opts.binaries };
  // Generous: a timeout reads as "no rules" and could pick the wrong backend on a slow node.
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const run = async (file: string, args: string[]): Promise<string> => {
    try {
      const r = await exec(file, args, { timeoutMs });
      return r.code === 0 ? r.stdout : '';
    } catch {
      return '';
    }
  };
  for (const file of [bin.nftSave, bin.nftSave6]) {
    if (hasHint(await run(file, ['-t', 'mangle' satisfies Table]))) {
      return { backend: 'nft', reason: 'hint-nft', nftRules: 0, legacyRules: 0 };
    }
  }
  const legacy = [await run(bin.legacySave, []), await run(bin.legacySave6, [])];
  if (legacy.some(hasHint)) return { backend: 'legacy', reason: 'hint-legacy', nftRules: 0, legacyRules: 0 };
  const legacyRules = legacy.reduce((n, s) => n + countRules(s), 0);
  const nftRules = countRules(await run(bin.nftSave, [])) + countRules(await run(bin.nftSave6, []));
  if (legacyRules > nftRules) return { backend: 'legacy', reason: 'more-rules', nftRules, legacyRules };
  return { backend: 'nft', reason: nftRules > 0 ? 'more-rules' : 'default', nftRules, legacyRules };
}

/** {@link detectBackendWithReason}, backend only. */
export async function detectBackend(opts: DetectOptions = {}): Promise<Backend> {
  return (await detectBackendWithReason(opts)).backend;
}
