// The files named on the command line (or in the --config file) that cannot be read: the built
// CLI exits non-zero with one line naming the flag (or field) and the path, never a stack trace,
// and never hangs with its servers open. In a fresh netns (iptables mode; the daemon binds its
// health port there when it gets that far).
import { assertIsolated } from '../lib/guard.js';
assertIsolated();

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { CLI } from '../lib/daemon.js';

const ARGS = ['--proxy-mode', 'iptables', '--hostname-override', 'kip-node', '--log-format', 'text'];
const dir = mkdtempSync(join(tmpdir(), 'kip-cli-files-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs the CLI to its end (killed after `limitMs`): exit code, stderr+stdout lines, how long it took. */
function cli(args: string[], limitMs = 20_000): Promise<{ code: number | null; lines: string[]; ms: number; killed: boolean }> {
  const t0 = Date.now();
  return new Promise((resolve) => {
    const c = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let killed = false;
    const timer = setTimeout(() => ((killed = true), c.kill('SIGKILL')), limitMs);
    c.stdout.on('data', (d) => (out += d));
    c.stderr.on('data', (d) => (out += d));
    c.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, lines: out.split('\n').filter((l) => l !== ''), ms: Date.now() - t0, killed });
    });
  });
}

describe('an unreadable file named on the command line', () => {
  const missing = join(dir, 'missing');
  const config = (kubeconfig: string) => {
    const p = join(dir, `config-${Math.random().toString(36).slice(2)}.yaml`);
    writeFileSync(p, `apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nclientConnection: {kubeconfig: ${kubeconfig}}\n`);
    return p;
  };
  it.each([
    [['--manifests', missing], `--manifests: cannot read ${missing}: no such file or directory`],
    [['--kubeconfig', missing], `--kubeconfig: cannot read ${missing}: no such file or directory`],
    [['--kubeconfig', dir], `--kubeconfig: ${dir} is a directory, not a file`],
    [['--manifests', `${join(dir, 'x')}/sub`], `--manifests: cannot read ${join(dir, 'x')}/sub: no such file or directory`],
    [['--config', missing], `--config: cannot read ${missing}: ENOENT: no such file or directory, open '${missing}'`],
  ])('%j: exit 2 and one line naming the flag and the path', async (args, reason) => {
    const r = await cli([...args, ...ARGS]);
    expect(r.lines).toEqual([`kube-ipvs-proxy: invalid configuration: ${reason}`]);
    expect(r.code).toBe(2);
  });

  it("a config file's clientConnection.kubeconfig names the file and field", async () => {
    const file = config(missing);
    const r = await cli(['--config', file, ...ARGS]);
    expect(r.lines).toEqual([`kube-ipvs-proxy: invalid configuration: ${file}: clientConnection.kubeconfig: cannot read ${missing}: no such file or directory`]);
    expect(r.code).toBe(2);
  });

  it("a kubeconfig naming a CA file that is missing: one error line, exit 1, the daemon's servers closed (no hang)", async () => {
    const ca = join(dir, 'missing-ca.crt');
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, `apiVersion: v1
kind: Config
current-context: c
contexts: [{name: c, context: {cluster: k, user: u}}]
clusters: [{name: k, cluster: {server: "https://127.0.0.1:6443", certificate-authority: ${ca}}}]
users: [{name: u, user: {token: abc}}]
`);
    const r = await cli(['--kubeconfig', kubeconfig, ...ARGS]);
    expect(r.killed, r.lines.join('\n')).toBe(false);
    expect(r.code).toBe(1);
    const errors = r.lines.filter((l) => / ERROR /.test(l));
    expect(errors).toHaveLength(1);
    expect(errors[0]).toContain(`the source cannot start; exiting source="--kubeconfig ${kubeconfig}"`);
    expect(errors[0]).toContain(`certificate-authority ${ca}: ENOENT`);
    expect(r.lines.filter((l) => /^\s+at /.test(l))).toEqual([]); // no stack trace
  });
});
