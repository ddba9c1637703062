// DestinationTable: the observed real servers of one virtual server in one array, held to a Map
// of the same operations (random sequences, below and past the size where it keeps an index).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

import { destinationId, type Destination } from '../../src/kernel/ipvs/types.js';
import { DestinationTable, isIdOf } from '../../src/proxy/ipvs/destination-table.js';

const dst = (address: string, port: number, weight = 1): Destination => ({ address, port, forward: 'masq', weight, upperThreshold: 0, lowerThreshold: 0 });

describe('isIdOf', () => {
  it('matches exactly the id destinationId gives, IPv4 and IPv6', () => {
    for (const d of [dst('10.0.0.1', 80), dst('10.0.0.1', 8080), dst('fd00::1', 80), dst('fd00::10', 0)]) expect(isIdOf(d, destinationId(d))).toBe(true);
    const d = dst('10.0.0.1', 80);
    for (const id of ['10.0.0.1:8', '10.0.0.1:800', '10.0.0.10:80', '10.0.0.1:080', '10.0.0.1:', '10.0.0.1', '[10.0.0.1]:80', '10.0.0.1:8a']) expect(isIdOf(d, id)).toBe(false);
    const v6 = dst('fd00::1', 80);
    for (const id of ['fd00::1:80', '[fd00::1]80', '[fd00::10]:80', '[fd00::1]:81']) expect(isIdOf(v6, id)).toBe(false);
  });
});

describe('DestinationTable', () => {
  it('does what a Map of the same operations does: contents, order, sizes, results', () => {
    const address = fc.oneof(fc.integer({ min: 1, max: 40 }).map((i) => `10.0.0.${i}`), fc.integer({ min: 1, max: 8 }).map((i) => `fd00::${i}`));
    const op = fc.tuple(fc.constantFrom('set', 'set', 'delete', 'get'), address, fc.constantFrom(80, 8080), fc.integer({ min: 0, max: 3 }));
    fc.assert(
      fc.property(fc.array(op, { maxLength: 120 }), (ops) => {
        const table = new DestinationTable();
        const map = new Map<string, Destination>();
        for (const [kind, a, port, weight] of ops) {
          const d = dst(a, port, weight);
          const id = destinationId(d);
          if (kind === 'set') {
            table.set(id, d);
            map.set(id, d);
          } else if (kind === 'delete') expect(table.delete(id)).toBe(map.delete(id));
          else {
            expect(table.get(id)).toBe(map.get(id));
            expect(table.has(id)).toBe(map.has(id));
          }
          expect(table.size).toBe(map.size);
        }
        expect([...table]).toEqual([...map]);
        expect([...table.keys()]).toEqual([...map.keys()]);
        expect([...table.values()]).toEqual([...map.values()]);
      }),
      { numRuns: 300 },
    );
  });

  it('share() takes a list of the same objects (in any order) as its own, and copies it before a change', () => {
    const list = [dst('10.0.0.1', 80), dst('10.0.0.2', 80)];
    const table = new DestinationTable([list[1]!, list[0]!]);
    table.share([list[0]!, dst('10.0.0.2', 80)]); // an equal object is not the same one
    expect([...table.values()]).toEqual([list[1], list[0]]);
    table.share(list);
    expect([...table.values()][0]).toBe(list[0]);
    table.delete('10.0.0.1:80');
    expect(list).toHaveLength(2);
    expect([...table.keys()]).toEqual(['10.0.0.2:80']);
  });

  it('forEach may delete as it goes (as a Map allows)', () => {
    const list = [dst('10.0.0.1', 80), dst('10.0.0.2', 80), dst('10.0.0.3', 80)];
    const table = new DestinationTable(list.slice());
    table.forEach((d, id) => d.address !== '10.0.0.2' && table.delete(id));
    expect([...table.keys()]).toEqual(['10.0.0.2:80']);
  });
});
