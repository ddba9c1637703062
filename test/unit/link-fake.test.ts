// FakeLinkClient: the link case table the kernel runs too (test/kernel/uml/link.test.ts), then
// what only the fake has (links made "by another program", fault injection, the call log).
import { describe, expect, it } from 'vitest';

import type { NetlinkError } from '../../src/kernel/errors.js';
import { FakeLinkClient } from '../../src/kernel/link.js';
import { LINK_CASES, runLinkCase } from '../kernel/lib/cases/link-cases.js';

const codes = (rs: ReadonlyArray<{ ok: boolean; error?: unknown }>) => rs.map((r) => (r.ok ? 'ok' : (r.error as NetlinkError).code));

describe('FakeLinkClient: the link case table', () => {
  it.each(LINK_CASES.map((c) => [c.name, c] as const))('%s', (_name, c) => {
    const fake = new FakeLinkClient();
    // An operator's route is of another protocol: the fake holds only the client's own, as its dumps are filtered.
    return runLinkCase(fake, { addLink: async (name, kind) => void fake.addLink(name, kind, false), addStaticRoute: async () => {} }, c);
  });
});

describe('FakeLinkClient', () => {
  it('addLink: a link with addresses, as another program made it', async () => {
    const c = new FakeLinkClient(false);
    c.addLink('eth0', null, true, ['192.0.2.10', '2001:DB8::10']);
    expect(await c.getLink('lo')).toBeNull();
    expect(await c.listAddresses('eth0')).toEqual(['192.0.2.10', '2001:db8::10']);
  });

  it('injects address faults and call faults, and records calls', async () => {
    const c = new FakeLinkClient();
    const { link } = await c.ensureDummy();
    c.failAddress('10.96.0.3', 'EPERM');
    const r = await c.addAddresses(link, ['10.96.0.3', '10.96.0.3']);
    expect(codes(r)).toEqual(['EPERM', 'ok']);
    expect(!r[0]!.ok && r[0]!.error).toMatchObject({ errno: 1, object: '10.96.0.3 dev kube-ipvs0' });
    c.failCall('ensureDummy', new Error('boom'));
    await expect(c.ensureDummy()).rejects.toThrow('boom');
    await c.localAddresses();
    expect(c.calls).toEqual(['ensureDummy kube-ipvs0', 'addAddresses kube-ipvs0', 'ensureDummy kube-ipvs0', 'localAddresses']);
  });
});
