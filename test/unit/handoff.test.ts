// The record a stopping daemon leaves for the next one (handoff.ts): one digest per virtual server,
// equal for what the kernel cannot tell apart, taken (removed) when read.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import type { Destination, VirtualService } from '../../src/kernel/ipvs/types.js';
import { differing, digest, takeHandoff, writeHandoff } from '../../src/proxy/ipvs/handoff.js';
import { emptyObserved } from '../../src/proxy/ipvs/observe.js';

const service = (over: Partial<VirtualService> = {}): VirtualService => ({ family: 'ipv4', protocol: 'tcp', address: '10.96.0.10', port: 80, fwmark: null, scheduler: 'rr', flags: [], timeout: 0, netmask: 0xffffffff, ...over });
const dest = (address: string, over: Partial<Destination> = {}): Destination => ({ address, port: 8080, forward: 'masq', weight: 1, upperThreshold: 0, lowerThreshold: 0, ...over });

describe('digest', () => {
  it('is the same for the same virtual server in any order, and for flags the kernel stores alike', () => {
    const a = digest({ service: service({ scheduler: 'sh', flags: ['sh-fallback', 'sh-port'] }), destinations: [dest('10.244.1.2'), dest('10.244.2.2')] });
    const b = digest({ service: service({ scheduler: 'sh', flags: ['flag-2', 'flag-1'] }), destinations: new Map([['x', dest('10.244.2.2')], ['y', dest('10.244.1.2')]]).values() });
    expect(a).toBe(b);
  });

  it('differs when a parameter or a real server differs', () => {
    const base = digest({ service: service(), destinations: [dest('10.244.1.2')] });
    expect(digest({ service: service({ scheduler: 'wrr' }), destinations: [dest('10.244.1.2')] })).not.toBe(base);
    expect(digest({ service: service({ timeout: 10800, flags: ['persistent'] }), destinations: [dest('10.244.1.2')] })).not.toBe(base);
    expect(digest({ service: service(), destinations: [dest('10.244.1.2', { weight: 0 })] })).not.toBe(base);
    expect(digest({ service: service(), destinations: [dest('10.244.1.3')] })).not.toBe(base);
    expect(digest({ service: service(), destinations: [dest('10.244.1.2'), dest('10.244.1.3')] })).not.toBe(base);
  });
});

describe('the record', () => {
  let dir: string;
  beforeEach(() => void (dir = mkdtempSync(join(tmpdir(), 'kip-handoff-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('round-trips; differing() names the wanted virtual servers that changed or are new; taking it removes it', () => {
    const observed = emptyObserved();
    observed.virtualServers.set('tcp/10.96.0.10:80', { service: service(), destinations: new Map([['10.244.1.2:8080', dest('10.244.1.2')]]) });
    observed.virtualServers.set('tcp/10.96.0.11:80', { service: service({ address: '10.96.0.11' }), destinations: new Map([['10.244.1.2:8080', dest('10.244.1.2')]]) });
    writeHandoff(join(dir, 'state'), observed); // creates the directory
    const record = takeHandoff(join(dir, 'state'))!;
    expect(record.size).toBe(2);
    expect(existsSync(join(dir, 'state', 'ipvs-handoff.json'))).toBe(false);
    expect(takeHandoff(join(dir, 'state'))).toBeNull();
    const wanted = new Map([
      ['tcp/10.96.0.10:80', { service: service(), destinations: [dest('10.244.1.2')] }],
      ['tcp/10.96.0.11:80', { service: service({ address: '10.96.0.11' }), destinations: [dest('10.244.9.9')] }],
      ['tcp/10.96.0.12:80', { service: service({ address: '10.96.0.12' }), destinations: [] }],
    ]);
    expect([...differing(record, wanted)]).toEqual(['tcp/10.96.0.11:80', 'tcp/10.96.0.12:80']);
  });

  it('an unreadable or foreign record is no record (and is removed)', () => {
    for (const text of ['{not json', '{"version":99,"virtualServers":{}}', '{"version":1}', 'null']) {
      writeFileSync(join(dir, 'ipvs-handoff.json'), text);
      expect(takeHandoff(dir)).toBeNull();
      expect(existsSync(join(dir, 'ipvs-handoff.json'))).toBe(false);
    }
  });
});
