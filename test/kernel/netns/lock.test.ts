// One proxy per node: the node lock (an abstract unix socket in the network namespace) in a
// fresh netns: the lock itself, then the built daemon in iptables mode beside a second daemon,
// `cleanup` and `--dry-run`, and a restart after the first one is SIGKILLed.
import { assertIsolated } from '../lib/guard.js';
assertIsolated();

import { execFileSync, spawn } from 'node:child_process';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { acquireNodeLock, DEFAULT_LOCK_NAME, NodeLockError } from '../../../src/lock.js';
import { CLI, Daemon, Manifests } from '../lib/daemon.js';

const ARGS = ['--proxy-mode', 'iptables', '--hostname-override', 'kip-node', '--cluster-cidr', '10.244.0.0/16', '--log-format', 'text'];
const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8' });

/** Runs the CLI to its end: exit code and everything it wrote. */
function cli(args: string[]): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const c = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    c.stdout.on('data', (d) => (out += d));
    c.stderr.on('data', (d) => (out += d));
    c.on('close', (code) => resolve({ code, out }));
  });
}

describe('acquireNodeLock', () => {
  it('is exclusive, names the holder, and is free again after release', async () => {
    const name = `kip-lock-test-${process.pid}`;
    const lock = await acquireNodeLock(name);
    const err = await acquireNodeLock(name).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NodeLockError);
    expect(err).toMatchObject({ code: 'ELOCKED', lockName: name, holderPid: process.pid });
    expect((err as Error).message).toContain(`another kube-ipvs-proxy (pid ${process.pid}) already runs in this network namespace`);
    await lock.release();
    await (await acquireNodeLock(name)).release();
  });

  it('is released by the kernel when its holder is SIGKILLed', async () => {
    const name = `kip-lock-kill-${process.pid}`;
    const url = new URL('../../../dist/src/lock.js', import.meta.url).pathname;
    // A holder in another process: takes the lock, says so, then waits to be killed.
    const holder = spawn(process.execPath, ['--input-type=module', '-e', `import(${JSON.stringify(url)}).then(async (m) => { await m.acquireNodeLock(${JSON.stringify(name)}); console.log('held'); setInterval(() => {}, 1000); })`], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    await new Promise<void>((resolve, reject) => {
      holder.stdout.on('data', (d) => String(d).includes('held') && resolve());
      holder.once('exit', (c) => reject(new Error(`holder exited ${c}`)));
    });
    await expect(acquireNodeLock(name)).rejects.toMatchObject({ holderPid: holder.pid });
    const exited = new Promise((r) => holder.once('exit', r));
    holder.kill('SIGKILL');
    await exited;
    await (await acquireNodeLock(name)).release();
  });
});

describe('two daemons on one node', () => {
  let manifests: Manifests;
  let first: Daemon;
  let second: Daemon | undefined;

  beforeAll(async () => {
    manifests = new Manifests();
    first = new Daemon(['--manifests', manifests.dir, ...ARGS]);
    first.start();
    await first.healthy();
  }, 60_000);

  afterAll(async () => {
    await first?.stop('SIGKILL');
    await second?.stop();
    await cli(['cleanup']);
    manifests?.remove();
  });

  it('the second one exits 1 naming the first; cleanup refuses too; --dry-run may run beside it', async () => {
    const again = await cli(['--once', '--manifests', manifests.dir, ...ARGS]);
    expect(again.code).toBe(1);
    expect(again.out).toContain(`another kube-ipvs-proxy (pid ${first.pid}) already runs in this network namespace (it holds the abstract unix socket @${DEFAULT_LOCK_NAME})`);
    expect(again.out).not.toContain('synced');

    const cleanup = await cli(['cleanup', '--log-format', 'text']);
    expect(cleanup.code).toBe(1);
    expect(cleanup.out).toContain('cleanup: another kube-ipvs-proxy');
    expect(sh('sh', '-c', 'iptables-nft-save -t nat; iptables-legacy-save -t nat')).toContain(':KUBE-SERVICES');

    const dry = await cli(['--dry-run', '--manifests', manifests.dir, ...ARGS, '--healthz-bind-address', '', '--metrics-bind-address', '']);
    expect(dry.code, dry.out).toBe(0);
  });

  it('after the first one is SIGKILLed, a new one starts and syncs', async () => {
    await first.stop('SIGKILL');
    second = new Daemon(['--manifests', manifests.dir, ...ARGS]);
    second.start();
    await second.healthy();
    expect(second.log).not.toContain('another kube-ipvs-proxy');
  });
});
