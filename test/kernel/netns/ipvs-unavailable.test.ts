// A kernel without IPVS, whatever this host has: the clients ask the real generic netlink
// controller for a family name no kernel registers, and get its real "no such family" answer.
import { describe, expect, it } from 'vitest';

import { openIpvs } from '../../../src/daemon.js';
import { formatInspect, gatherInspect, realSources } from '../../../src/inspect.js';
import { NetlinkIpvsClient } from '../../../src/kernel/ipvs/client.js';
import { TextLogger } from '../../../src/log.js';
import { assertIsolated } from '../lib/guard.js';

assertIsolated();

/** Shaped like "IPVS" (≤ 15 bytes, GENL_NAMSIZ) but registered by no module. */
const NO_SUCH_FAMILY = 'KIP_NO_IPVS';

describe('a kernel without IPVS', () => {
  it('the client says unavailable, with the reason', async () => {
    const a = await NetlinkIpvsClient.open(NO_SUCH_FAMILY);
    expect(a).toEqual({ available: false, reason: expect.stringMatching(/no IPVS generic netlink family/) });
  });

  it('the daemon, after one modprobe, decides IPVS is unavailable and says why (what its iptables fallback acts on)', async () => {
    const logger = new TextLogger('info', { write: () => true } as never, () => new Date());
    const r = await openIpvs(logger, NO_SUCH_FAMILY);
    expect(r).toEqual({ reason: expect.stringMatching(/no IPVS generic netlink family.*; modprobe ip_vs did not help$/) });
  });

  it('inspect reports IPVS unavailable and still reads the other sections from this namespace', async () => {
    const report = await gatherInspect({ ...realSources, ipvs: () => NetlinkIpvsClient.open(NO_SUCH_FAMILY) });
    expect(report.ipvs).toEqual({ available: false, reason: expect.any(String) });
    expect(report.dummy).toEqual({ name: 'kube-ipvs0', exists: false, addresses: [], routes: [] });
    expect(report.errors).toBeUndefined();
    expect(formatInspect(report)).toMatch(/^IPVS: unavailable \(/m);
  });
});
