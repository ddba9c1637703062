import { spawnExec, type Exec } from '../exec.js';
import type { Backend, Family } from './types.js';

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

/** The binaries that backend detection runs: the save tools, and the IPv4 restore tools for the probe. */
export interface DetectBinaries {
  nftSave: string;
  nftSave6: string;
  legacySave: string;
  legacySave6: string;
  nftRestore: string;
  legacyRestore: string;
}

const DETECT_DEFAULTS: DetectBinaries = {
  nftSave: 'iptables-nft-save',
  nftSave6: 'ip6tables-nft-save',
  legacySave: 'iptables-legacy-save',
  legacySave6: 'ip6tables-legacy-save',
  nftRestore: 'iptables-nft-restore',
  legacyRestore: 'iptables-legacy-restore',
};

/** Options of {@link detectBackend}. */
export interface DetectOptions {
  exec?: Exec;
  binaries?: Partial<DetectBinaries>;
  /** Per-command time limit (iptables-nft 1.8.3 could loop forever). Default 30 s. */
  timeoutMs?: number;
  /**
   * Also prove that the preferred backend can program the nat and filter tables by restoring
   * {@link PROBE_INPUT} (a write, though it leaves no rule). Without it, a backend is usable
   * when its iptables-save works.
   */
  probe?: boolean;
}

/** Why {@link detectBackend} chose what it chose. */
export interface Detection {
  /** The backend to use. */
  backend: Backend;
  /** Why the preferred backend was preferred (kubelet's hint, rule counts, or the default nft). */
  reason: 'hint-nft' | 'hint-legacy' | 'more-rules' | 'default';
  nftRules: number;
  legacyRules: number;
  /**
   * Backends that failed the probe, with the tool's message. When the preferred one is here,
   * `backend` is the other one; when both are, `backend` is the preferred one anyway.
   */
  unusable: Partial<Record<Backend, string>>;
  /** The chosen backend's full iptables-save output per family, where detection read it. */
  saved: Partial<Record<Family, string>>;
}

/**
 * The probe: in one transaction per table, a chain in nat with a jump to it from POSTROUTING
 * (which needs the nat table and its base chains, as every sync does) and a chain in filter,
 * all deleted again before COMMIT. Nothing stays but the tables and their built-in chains,
 * which the proxy's first sync creates anyway.
 */
export const PROBE_INPUT = [
  '*nat',
  ':KUBE-PROXY-PROBE - [0:0]',
  '-A POSTROUTING -m comment --comment "kube-ipvs-proxy backend probe" -j KUBE-PROXY-PROBE',
  '-D POSTROUTING -m comment --comment "kube-ipvs-proxy backend probe" -j KUBE-PROXY-PROBE',
  '-X KUBE-PROXY-PROBE',
  'COMMIT',
  '*filter',
  ':KUBE-PROXY-PROBE - [0:0]',
  '-X KUBE-PROXY-PROBE',
  'COMMIT',
  '',
].join('\n');

function hasHint(saveOutput: string): boolean {
  return saveOutput.split('\n').some((l) => KUBELET_HINT_CHAINS.some((c) => l.startsWith(`:${c} `)));
}

function countRules(saveOutput: string): number {
  return saveOutput.split('\n').filter((l) => l.startsWith('-') || /^\[\d+:\d+\] -/.test(l)).length;
}

/** The first lines of a tool's complaint, on one line. */
function firstLines(text: string): string {
  return text.trim().split('\n').map((l) => l.trim()).filter(Boolean).slice(0, 3).join('; ').slice(0, 300);
}

/**
 * Picks nft or legacy the way kubernetes-sigs/iptables-wrappers does: kubelet's hint chains
 * (KUBE-IPTABLES-HINT, KUBE-KUBELET-CANARY), else whichever backend holds more rules, else nft.
 * Reads full iptables-saves (a full save creates no table; `iptables-legacy-save -t mangle`
 * would), both backends' and both families' at once. Failing commands count as empty output.
 * The preferred backend must then be usable (its IPv4 save worked and, with `probe`, it holds nat
 * and filter tables already or restores {@link PROBE_INPUT}), else the other one is used if it is.
 */
export async function detectBackendWithReason(opts: DetectOptions = {}): Promise<Detection> {
  const exec = opts.exec ?? spawnExec;
  const bin = { ...DETECT_DEFAULTS, ...opts.binaries };
  // Generous: a timeout reads as "no rules" and could pick the wrong backend on a slow node.
  const timeoutMs = opts.timeoutMs ?? 30_000;
  type Outcome = { stdout: string; error: string | null };
  /** A command's stdout, or why it failed. */
  const run = async (file: string, args: string[], input?: string): Promise<Outcome> => {
    try {
      const r = await exec(file, args, { timeoutMs, input });
      if (r.code === 0) return { stdout: r.stdout, error: null };
      const why = firstLines(r.stderr) || (r.code === null ? `killed by ${r.signal ?? 'signal'}` : `exit code ${r.code}`);
      return { stdout: '', error: `${file}: ${why}` };
    } catch (e) {
      return { stdout: '', error: `${file}: ${(e as Error).message}` };
    }
  };
  // All four saves in one round: on a start-up with a CPU to spare they cost one process's time,
  // and the chosen backend's IPv6 save is needed anyway (the iptables mode's leftovers are looked
  // for in it).
  const [nft4, legacy4, nft6, legacy6] = await Promise.all([run(bin.nftSave, []), run(bin.legacySave, []), run(bin.nftSave6, []), run(bin.legacySave6, [])]);
  const nftRules = countRules(nft4.stdout) + countRules(nft6.stdout);
  const legacyRules = countRules(legacy4.stdout) + countRules(legacy6.stdout);
  let preferred: Omit<Detection, 'unusable' | 'saved'>;
  // An nft hint (in either family) beats a legacy one; rule counts matter only without a hint.
  if (hasHint(nft4.stdout) || hasHint(nft6.stdout)) preferred = { backend: 'nft', reason: 'hint-nft', nftRules: 0, legacyRules: 0 };
  else if (hasHint(legacy4.stdout) || hasHint(legacy6.stdout)) preferred = { backend: 'legacy', reason: 'hint-legacy', nftRules: 0, legacyRules: 0 };
  else if (legacyRules > nftRules) preferred = { backend: 'legacy', reason: 'more-rules', nftRules, legacyRules };
  else preferred = { backend: 'nft', reason: nftRules > 0 ? 'more-rules' : 'default', nftRules, legacyRules };

  // Usable: its IPv4 save worked and, with `probe`, it already has nat and filter tables (it
  // could create them) or it restores the probe.
  const check = async (backend: Backend): Promise<string | null> => {
    const saved = backend === 'nft' ? nft4 : legacy4;
    if (saved.error !== null) return saved.error;
    if (!opts.probe || (/^\*nat$/m.test(saved.stdout) && /^\*filter$/m.test(saved.stdout))) return null;
    return (await run(backend === 'nft' ? bin.nftRestore : bin.legacyRestore, ['-w', '5', '--noflush'], PROBE_INPUT)).error;
  };
  const savedBy = (backend: Backend): Partial<Record<Family, string>> => {
    const [v4, v6] = backend === 'nft' ? [nft4, nft6] : [legacy4, legacy6];
    return { ...(v4.error === null ? { ipv4: v4.stdout } : {}), ...(v6.error === null ? { ipv6: v6.stdout } : {}) };
  };
  const first = await check(preferred.backend);
  if (first === null) return { ...preferred, unusable: {}, saved: savedBy(preferred.backend) };
  const other: Backend = preferred.backend === 'nft' ? 'legacy' : 'nft';
  const second = await check(other);
  const unusable = { [preferred.backend]: first, ...(second === null ? {} : { [other]: second }) };
  const backend = second === null ? other : preferred.backend;
  return { ...preferred, backend, unusable, saved: savedBy(backend) };
}

/** {@link detectBackendWithReason}, backend only. */
export async function detectBackend(opts: DetectOptions = {}): Promise<Backend> {
  return (await detectBackendWithReason(opts)).backend;
}
