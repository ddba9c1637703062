// Runs the built daemon (dist/bin/cli.js) as a child process for end-to-end tests, on a
// private copy of the example manifests that a test may edit.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { parseAllDocuments, stringify } from 'yaml';

const REPO = new URL('../../../', import.meta.url).pathname;
/** The built CLI. */
export const CLI = join(REPO, 'dist/bin/cli.js');

/**
 * The demo topology (examples/demo/network.sh: a client and three backends in network namespaces)
 * and kubelet's hint chain for legacy iptables, as the UML end-to-end files start from.
 */
export function demoNetworkUp(): void {
  execFileSync('sh', [join(REPO, 'examples/demo/network.sh'), 'up'], { stdio: ['ignore', 'pipe', 'pipe'] });
  execFileSync('sh', ['-c', 'iptables-legacy -t mangle -N KUBE-IPTABLES-HINT 2>/dev/null || true']);
}

/** Stops `daemon`, takes the demo topology down, removes what the proxy owns (`cleanup`) and `manifests`. */
export async function demoTeardown(opts: { daemon?: Daemon; manifests?: Manifests } = {}): Promise<void> {
  await opts.daemon?.stop();
  execFileSync('sh', ['-c', `sh ${join(REPO, 'examples/demo/network.sh')} down; ${process.execPath} ${CLI} cleanup >/dev/null 2>&1; true`]);
  opts.manifests?.remove();
}

/** Waits until `check` returns a truthy value (polling), or throws after `timeoutMs`. */
export async function waitFor<T>(what: string, check: () => T | Promise<T>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * A private, editable copy of examples/*.yaml. Inside UML it lives on a tmpfs (/run): UML's
 * hostfs does not deliver inotify events, which the manifest source's watch relies on.
 */
export class Manifests {
  readonly dir = mkdtempSync(join(process.env.KIP_IN_UML === '1' ? '/run' : tmpdir(), 'kip-manifests-'));
  constructor(from = join(REPO, 'examples')) {
    for (const f of readdirSync(from)) if (/\.(ya?ml|json)$/.test(f)) cpSync(join(from, f), join(this.dir, f));
  }
  /** Rewrites every document of `file` through `edit` (return null to drop a document). */
  edit(file: string, edit: (doc: Record<string, any>) => Record<string, any> | null): void {
    const path = join(this.dir, file);
    const docs = parseAllDocuments(readFileSync(path, 'utf8')).map((d) => d.toJS() as Record<string, any>);
    const kept = docs.map(edit).filter((d): d is Record<string, any> => d !== null);
    writeFileSync(path, kept.map((d) => stringify(d)).join('---\n'));
  }
  write(file: string, text: string): void {
    writeFileSync(join(this.dir, file), text);
  }
  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** The daemon as a child process, its log kept in memory. */
export class Daemon {
  protected child: ChildProcess | null = null;
  log = '';
  /**
   * Its state directory, kept across restarts of this instance: /run/kube-ipvs-proxy inside UML
   * (a fresh tmpfs per boot), otherwise a directory of its own (not the host's /run).
   */
  readonly stateDir = process.env.KIP_IN_UML === '1' ? '/run/kube-ipvs-proxy' : mkdtempSync(join(tmpdir(), 'kip-state-'));
  constructor(private readonly args: string[]) {}

  /** The child's pid once started. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  start(): void {
    this.attach(spawn(process.execPath, [CLI, ...this.args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, KUBE_IPVS_PROXY_STATE_DIR: this.stateDir } }));
  }

  /** Takes `child` as the daemon's process, its output into the log. */
  protected attach(child: ChildProcess): void {
    this.child = child;
    child.stdout!.on('data', (d) => (this.log += d));
    child.stderr!.on('data', (d) => (this.log += d));
  }

  /** Resolves once /healthz answers 200 after a completed sync. */
  async healthy(port = 10256, timeoutMs = 60_000): Promise<void> {
    await waitFor('the daemon to be healthy', async () => {
      if (this.child?.exitCode !== null) throw new Error(`daemon exited: ${this.log}`);
      try {
        const r = await fetch(`http://127.0.0.1:${port}/healthz`);
        const body = (await r.json()) as { status?: object };
        return r.ok && Boolean(body.status); // `status` appears after the first successful sync
      } catch {
        return false;
      }
    }, timeoutMs).catch((e: Error) => {
      throw new Error(`${e.message}; daemon log:\n${this.log.slice(-4000)}`);
    });
  }

  /** The exit code once the process has exited (null while it runs). */
  exitCode(): number | null {
    return this.child?.exitCode ?? null;
  }

  /** Stops with `signal` and waits for the exit code. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
    const c = this.child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return c?.exitCode ?? null;
    const code = new Promise<number | null>((r) => c.once('exit', (n) => r(n)));
    c.kill(signal);
    return code;
  }
}
