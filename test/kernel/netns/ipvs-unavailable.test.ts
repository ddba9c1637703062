// On this machine's own kernel (no CONFIG_IP_VS): IPVS is reported unavailable, cleanly.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

import { describe, expect, it } from 'vitest';

import { NetlinkIpvsClient } from '../../../src/kernel/ipvs/client.js';
import { assertIsolated } from '../lib/guard.js';

assertIsolated();

const cli = new URL('../../../dist/bin/cli.js', import.meta.url).pathname;

describe('a kernel without IPVS', () => {
  it('the client says unavailable, with the reason', async () => {
    const a = await NetlinkIpvsClient.open();
    expect(a).toEqual({ available: false, reason: expect.stringMatching(/no IPVS generic netlink family/) });
  });

  it('`kube-ipvs-proxy inspect` says so and exits 0 (the built binary)', async () => {
    const json = await promisify(execFile)(process.execPath, [cli, 'inspect', '--json']);
    const report = JSON.parse(json.stdout);
    expect(report.ipvs).toEqual({ available: false, reason: expect.any(String) });
    expect(report.dummy).toEqual({ name: 'kube-ipvs0', exists: false, addresses: [] });
    const text = await promisify(execFile)(process.execPath, [cli, 'inspect']);
    expect(text.stdout).toMatch(/^IPVS: unavailable \(/m);
  });
});
