// `kube-ipvs-proxy --version`, as kube-proxy's: the version of package.json, exit 0, nothing else run.
import { readFileSync } from 'node:fs';

import { describe, expect, it } from 'vitest';

import { main } from '../../src/cli.js';

describe('--version', () => {
  it("prints package.json's version and exits 0", async () => {
    const out: string[] = [];
    const code = await main(['--version'], { stdout: (t) => out.push(t), stderr: () => {} });
    const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    expect([code, out.join('')]).toEqual([0, `kube-ipvs-proxy v${version}\n`]);
  });
});
