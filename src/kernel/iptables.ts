import { defaultBinaries, detectBackend, type Binaries, type DetectOptions } from './iptables/backend.js';
import { IptablesError, restoreError } from './iptables/errors.js';
import { spawnExec, type Exec, type ExecOptions, type ExecResult } from './exec.js';
import { kernelGeneration, type GenerationReader } from './iptables/generation.js';
import { emptyPlan, hasJumpText, NFT_BATCH_RULES, planRestore, renderSections, type RestorePlan, type Section } from './iptables/restore.js';
import { ownedLines, parseSave } from './iptables/save.js';
import { ruleTarget } from './iptables/syntax.js';
import type { Backend, Family, JumpSpec, OwnedPredicate, Rule, SavedTable, Table, TableSpec } from './iptables/types.js';
import { WrittenChains } from './iptables/written.js';
import { SerialQueue } from '../serial.js';

export * from './iptables/backend.js';
export * from './iptables/errors.js';
export * from './iptables/generation.js';
export * from './exec.js';
export * from './iptables/restore.js';
export * from './iptables/save.js';
export * from './iptables/syntax.js';
export * from './iptables/types.js';

/** Chains that kubelet, not the proxy, creates and keeps; never ours even though they start with `KUBE-`. */
const KUBELET_CHAINS: ReadonlySet<string> = new Set([
  '*/KUBE-IPTABLES-HINT',
  '*/KUBE-KUBELET-CANARY',
  'filter/KUBE-FIREWALL',
  'nat/KUBE-MARK-DROP',
]);

/** Default ownership: chains named `KUBE-…`, except kubelet's own (hint/canary chains, filter KUBE-FIREWALL, nat KUBE-MARK-DROP). */
export const defaultIsOwned: OwnedPredicate = (chain, table) =>
  chain.startsWith('KUBE-') && !KUBELET_CHAINS.has(`*/${chain}`) && !KUBELET_CHAINS.has(`${table}/${chain}`);

function lineCount(text: string): number {
  let n = 0;
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) n++;
  return n;
}

/** Options of {@link Iptables.create}. */
export interface IptablesOptions {
  /** Default ipv4 (iptables-*); ipv6 drives ip6tables-*. */
  family?: Family;
  /** Wins over detection. */
  backend?: Backend;
  /** Overrides single binaries of the chosen backend (e.g. an absolute path). */
  binaries?: Partial<Binaries>;
  /** Passed to {@link detectBackend} when no backend is given. */
  detect?: Omit<DetectOptions, 'exec'>;
  /** Which chains this proxy owns; default {@link defaultIsOwned}. */
  isOwned?: OwnedPredicate;
  /** Seconds to wait for the xtables lock (`-w`); default 5. */
  waitSeconds?: number;
  /** Lock file (sets XTABLES_LOCKFILE); default the tools' own (/run/xtables.lock). */
  lockFile?: string;
  /** Per-command time limit; default 60 s, plus 1 ms per line of a restore's input. */
  timeoutMs?: number;
  /** Rules per commit of a restore (see batchChains); default NFT_BATCH_RULES with nft, none with legacy. */
  batchRules?: number;
  /** Command runner; default {@link spawnExec}. */
  exec?: Exec;
  /** Reads the kernel's token of some tables (see generation()); default the kernel's, none (null) with a given `exec`. */
  generation?: GenerationReader | null;
}

/** The owned rules of some tables as iptables-save lines, for `kube-ipvs-proxy inspect`. */
export type OwnedRules<T extends Table> = { backend: Backend } & Record<T, string[]>;

/** The iptables / ip6tables driver of one family: atomic per-table syncs of owned chains and read-back. */
export class Iptables {
  readonly family: Family;
  readonly backend: Backend;
  readonly binaries: Binaries;
  readonly isOwned: OwnedPredicate;
  /** Rules per commit of a restore input; Infinity: one commit per table. */
  readonly batchRules: number;
  private readonly exec: Exec;
  private readonly wait: string;
  private readonly env?: NodeJS.ProcessEnv;
  private readonly timeoutMs: number;
  private readonly queue = new SerialQueue();
  private readonly written = new WrittenChains();
  private readonly readGeneration: GenerationReader | null;

  /** A driver with a known backend; {@link Iptables.create} detects one. */
  constructor(backend: Backend, opts: Omit<IptablesOptions, 'backend' | 'detect'> = {}) {
    this.family = opts.family ?? 'ipv4';
    this.backend = backend;
    this.binaries = { ...defaultBinaries(backend, this.family), ...opts.binaries };
    this.isOwned = opts.isOwned ?? defaultIsOwned;
    this.exec = opts.exec ?? spawnExec;
    // A runner given in place of the real commands means the tables are not this kernel's.
    this.readGeneration = opts.generation !== undefined ? opts.generation : opts.exec ? null : kernelGeneration;
    this.wait = String(opts.waitSeconds ?? 5);
    this.env = opts.lockFile === undefined ? undefined : { ...process.env, XTABLES_LOCKFILE: opts.lockFile };
    this.timeoutMs = opts.timeoutMs ?? 60_000;
    this.batchRules = opts.batchRules ?? (backend === 'nft' ? NFT_BATCH_RULES : Infinity);
  }

  /** Creates a driver, detecting the backend unless `opts.backend` is given. */
  static async create(opts: IptablesOptions = {}): Promise<Iptables> {
    const backend = opts.backend ?? (await detectBackend({ ...opts.detect, exec: opts.exec }));
    return new Iptables(backend, opts);
  }

  private async run(op: keyof Binaries, args: string[], table?: Table, input?: string): Promise<ExecResult & { code: number }> {
    const file = this.binaries[op];
    // A big restore is slow but not stuck (96,000 rules: 6 s on the host, 3-4 times that in
    // UML): killing it at a fixed limit would fail the same way on every retry.
    const timeoutMs = this.timeoutMs + (input === undefined ? 0 : lineCount(input));
    const execOpts: ExecOptions = { timeoutMs, env: this.env, input };
    let r: ExecResult;
    try {
      r = await this.exec(file, args, execOpts);
    } catch (e) {
      throw new IptablesError('EEXEC', `${file}: ${(e as Error).message}`, { op: file, table, cause: e });
    }
    if (r.code === null) {
      throw new IptablesError('EEXEC', `${file}: killed by ${r.signal ?? 'signal'}`, { op: file, table, stderr: r.stderr });
    }
    return { ...r, code: r.code };
  }

  /**
   * A token that is the same on two reads only if none of `tables` changed in between (nft: the
   * ruleset generation; legacy: the tables' rules, counters aside), read without a process; null
   * where it cannot be read. It says nothing of what the rules are: that is saveOwned()'s.
   */
  generation(tables: readonly Table[]): Promise<string | null> {
    return this.readGeneration ? this.readGeneration(this.backend, this.family, tables) : Promise.resolve(null);
  }

  /** Reads one table with `iptables-save -t TABLE` (an absent table reads as empty). */
  async save(table: Table): Promise<SavedTable> {
    const r = await this.run('save', ['-t', table], table);
    if (r.code !== 0) {
      throw new IptablesError('ESAVE', `${this.binaries.save} -t ${table}: ${r.stderr.trim() || `exit code ${r.code}`}`, {
        op: this.binaries.save,
        table,
        exitCode: r.code,
        stderr: r.stderr,
      });
    }
    return parseSave(r.stdout).find((t) => t.table === table) ?? { table, chains: [] };
  }

  /**
   * The owned lines of `tables` (default nat and filter) from one full iptables-save, which
   * creates no table, or from `savedText`, such output read just before (by backend detection).
   */
  async saveOwned<T extends Table = 'nat' | 'filter'>(tables?: readonly T[], savedText?: string): Promise<OwnedRules<T>> {
    const wanted = tables ?? (['nat', 'filter'] as T[]);
    const saved = savedText === undefined ? await this.saveAll() : parseSave(savedText);
    const out = { backend: this.backend } as OwnedRules<T>;
    for (const t of wanted) {
      const st = saved.find((s) => s.table === t);
      (out as Record<T, string[]>)[t] = st ? ownedLines(st, this.isOwned) : [];
    }
    return out;
  }

  /** `iptables -C`: true when `rule` is in `chain` (compared by the tool, not by text). */
  async check(table: Table, chain: string, rule: Rule): Promise<boolean> {
    const r = await this.run('iptables', ['-w', this.wait, '-t', table, '-C', chain, ...rule], table);
    return r.code === 0;
  }

  /** Runs `iptables-restore -w N --noflush` with `input`; throws ERESTORE naming table, line and message. */
  restore(table: Table, input: string): Promise<void> {
    return this.queue.run(() => this.restoreText(input, table));
  }

  /**
   * Rewrites whole owned chains and deletes others as `sections` say, in one iptables-restore,
   * reading nothing first (for a caller that knows what the kernel holds: a partial sync).
   */
  rewrite(sections: readonly Section[]): Promise<void> {
    return this.queue.run(() => this.restoreSections(sections, renderSections(sections, this.batchRules)));
  }

  /** Restores `input`, which writes `sections`, and remembers what they wrote (or, on failure, forgets them). */
  private async restoreSections(sections: readonly Section[], input: string): Promise<void> {
    try {
      await this.restoreText(input, sections[0]?.table ?? 'nat');
    } catch (e) {
      for (const s of sections) this.written.forget(s.table, [...s.chains.map((c) => c.name), ...(s.deleted ?? [])]);
      throw e;
    }
    for (const s of sections) this.written.wrote(s.table, s.chains, s.deleted);
  }

  /** Runs the restore; an error names the table whose section holds the failing line (default `table`). */
  private async restoreText(input: string, table: Table): Promise<void> {
    const r = await this.run('restore', ['-w', this.wait, '--noflush'], table, input);
    if (r.code !== 0) {
      const line = Number(/\bline:? (\d+)\b/.exec(r.stderr)?.[1] ?? 0);
      const failing = (input.split('\n').slice(0, line || undefined).reverse().find((l) => l.startsWith('*'))?.slice(1) as Table | undefined) ?? table;
      throw restoreError(this.binaries.restore, failing, input, r.code, r.stderr);
    }
  }

  /**
   * Makes each table's owned chains exactly `spec.chains` and ensures `spec.jumps`: one
   * iptables-save for all tables, then one iptables-restore whose input has a section per
   * table (each committed atomically at its COMMIT, or in dependency-ordered batches of
   * `batchRules` rules), and no restore when nothing differs. A chain this driver wrote that
   * still reads back as it did is not rewritten (see WrittenChains). Jumps missing from
   * iptables-save's text are confirmed with `iptables -C` before being added, so a rule the
   * tools print differently is not duplicated. A failing table stops the restore there
   * (earlier tables stay applied); the error names the table holding the failing line.
   */
  sync(specs: readonly TableSpec[]): Promise<RestorePlan[]> {
    return this.queue.run(async () => {
      if (specs.length === 0) return [];
      const saved = await this.saveAll();
      const plans: RestorePlan[] = [];
      for (const spec of specs) {
        const current = saved.find((t) => t.table === spec.table) ?? { table: spec.table, chains: [] };
        const present = await this.presentJumps(spec, current);
        const byName = new Map(current.chains.map((c) => [c.name, c]));
        plans.push(
          planRestore(spec, current, {
            isOwned: this.isOwned,
            hasJump: (j) => present.has(j),
            batchRules: this.batchRules,
            keep: (c) => this.written.unchanged(spec.table, c, byName.get(c.name)),
          }),
        );
      }
      const work = plans.filter((p) => !emptyPlan(p));
      if (work.length > 0) {
        await this.restoreSections(
          work.map((p) => ({ table: p.table, chains: p.written, deleted: p.deletedChains })),
          work.map((p) => p.text).join(''),
        );
      }
      return plans;
    });
  }

  /** Every table, from one `iptables-save` (which creates no table). */
  private async saveAll(): Promise<SavedTable[]> {
    const r = await this.run('save', []);
    if (r.code !== 0) {
      throw new IptablesError('ESAVE', `${this.binaries.save}: ${r.stderr.trim() || `exit code ${r.code}`}`, {
        op: this.binaries.save,
        exitCode: r.code,
        stderr: r.stderr,
      });
    }
    return parseSave(r.stdout);
  }

  private async presentJumps(spec: TableSpec, current: SavedTable): Promise<Set<JumpSpec>> {
    const present = new Set<JumpSpec>();
    const existing = new Set(current.chains.map((c) => c.name));
    for (const j of spec.jumps ?? []) {
      if (hasJumpText(current, j)) {
        present.add(j);
        continue;
      }
      const target = ruleTarget(j.rule);
      // A jump to an owned chain that does not exist yet cannot be there.
      if (target !== undefined && this.isOwned(target, spec.table) && !existing.has(target)) continue;
      if (existing.has(j.chain) && (await this.check(spec.table, j.chain, j.rule))) present.add(j);
    }
    return present;
  }

  /** Deletes every owned chain of `tables` (default nat and filter) and the jumps to them. */
  cleanup(tables: readonly Table[] = ['nat', 'filter']): Promise<RestorePlan[]> {
    return this.sync(tables.map((table) => ({ table, chains: [] })));
  }
}
