import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { BEGIN, END, HEADER, formatRow, ratio, recordResults, rowId, updateTable } from '../../bench/results.mjs';

const doc = (rows: string[]) => ['# Benchmarks', '', 'method text', '', BEGIN, ...HEADER, ...rows, END, '', 'after the table', ''].join('\n');
const ipvs = { id: 'ipvs.apply.1000x10', benchmark: 'IPVS apply (UML)', size: '1,000 × 10', ours: '397 ms', reference: '`ipvsadm-restore` 6,551 ms', ratio: '0.061×', goal: '≤ 0.2×' };
const cold = { id: 'cluster.cold.3000', benchmark: 'cold start (UML)', size: '3,000 × 10', ours: '6.19 s', reference: '35.06 s', ratio: '0.18×', goal: '≤ 0.5×' };
const old = 'b2a24f6, 2026-11-29';

describe('bench/results.mjs: the results table of docs/benchmarks.md', () => {
  it('replaces only the rows of the ids it is given, in place', () => {
    const before = doc([formatRow(ipvs, old), formatRow(cold, old)]);
    const after = updateTable(before, [{ ...cold, ours: '5.00 s', ratio: '0.14×' }], 'abc1234+dirty, 2026-12-01');
    const lines = after.split('\n');
    expect(lines).toContain(formatRow(ipvs, old));
    expect(lines).toContain(formatRow({ ...cold, ours: '5.00 s', ratio: '0.14×' }, 'abc1234+dirty, 2026-12-01'));
    expect(lines.filter((l) => rowId(l) !== null).map(rowId)).toEqual(['ipvs.apply.1000x10', 'cluster.cold.3000']);
    expect(after.startsWith('# Benchmarks\n\nmethod text\n\n')).toBe(true);
    expect(after.endsWith(`${END}\n\nafter the table\n`)).toBe(true);
  });

  it('puts a new id after the last row of its benchmark, or at the end', () => {
    const before = doc([formatRow(ipvs, old), formatRow(cold, old)]);
    const dump = { ...ipvs, id: 'ipvs.dump.1000x10', benchmark: 'IPVS dump (UML)' };
    const ipset = { ...ipvs, id: 'ipset.add.50000', benchmark: 'ipset add' };
    const ids = updateTable(before, [dump, ipset], 'x, 2026-12-01').split('\n').map(rowId).filter(Boolean);
    expect(ids).toEqual(['ipvs.apply.1000x10', 'ipvs.dump.1000x10', 'cluster.cold.3000', 'ipset.add.50000']);
  });

  it('writes the header into an empty table, and is idempotent', () => {
    const empty = `intro\n${BEGIN}\n${END}\n`;
    const once = updateTable(empty, [ipvs], old);
    expect(once).toBe(`intro\n${BEGIN}\n${HEADER.join('\n')}\n${formatRow(ipvs, old)}\n${END}\n`);
    expect(updateTable(once, [ipvs], old)).toBe(once);
  });

  it('refuses a file without the markers, a bad id and an id given twice', () => {
    expect(() => updateTable('# no table\n', [ipvs], old, 'docs/benchmarks.md')).toThrow(/docs\/benchmarks\.md: no results table/);
    expect(() => updateTable(doc([]), [{ ...ipvs, id: 'has space' }], old)).toThrow(/invalid id/);
    expect(() => updateTable(doc([]), [ipvs, ipvs], old)).toThrow(/given twice/);
  });

  it('escapes pipes in cells and formats ratios', () => {
    expect(formatRow({ ...ipvs, reference: 'a | b' }, old)).toContain('a \\| b');
    expect(ratio(397, 6551)).toBe('0.061×');
    expect(ratio(1220, 1000)).toBe('1.22×');
  });

  it('recordResults stamps the rows with the commit and the date it is given, in the file it is given', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'kip-results-')), 'benchmarks.md');
    writeFileSync(file, doc([formatRow(ipvs, old), formatRow(cold, old)]));
    expect(recordResults([{ ...ipvs, ours: '300 ms' }], { file, stamp: 'abc1234', date: '2026-12-01' })).toBe(file);
    const text = readFileSync(file, 'utf8');
    expect(text).toContain(formatRow({ ...ipvs, ours: '300 ms' }, 'abc1234, 2026-12-01'));
    expect(text).toContain(formatRow(cold, old));
    expect(recordResults([ipvs], { file: 'off' })).toBeNull();
  });
});

describe('bench/cluster-results.mjs: the cluster benchmark rows', () => {
  const size = (n: number, extra: object = {}) => ({
    n, cold: 6190, restore: 35060, ratio: 0.18, firstList: 1110, requestOnly: 900, memCold: { rss: 80, heap: 30 },
    one: { p50: 8, p99: 69 }, oneFloor: { p50: 6 }, churn: { p50: 524, p99: 1023 }, memChurn: { rss: 90 },
    restart: { usefulMs: 4270, kernelOps: 3, listing: { usefulMs: 4970 } }, periodic: { kernelOps: 0 }, ...extra,
  });

  it('gives each figure of each size its own id, with the goal of that size', async () => {
    const { clusterRows } = await import('../../bench/cluster-results.mjs');
    const soak = { idle: { rss: 83 }, p99: [1020, 1047] };
    const rows = clusterRows({ results: [size(1000), size(3000, { soak })], manifests: { n: 3000, cold: 6160, restore: 32620, ratio: 0.18, memCold: { rss: 81, heap: 31 } }, endpoints: 10, soakMinutes: 30 });
    const ids = rows.map((r: { id: string }) => r.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toContain('cluster.cold.3000');
    expect(ids).toContain('cluster.soak.3000');
    expect(ids).not.toContain('cluster.soak.1000');
    expect(ids).toContain('cluster.cold-manifests.3000');
    const byId = Object.fromEntries(rows.map((r: { id: string }) => [r.id, r]));
    expect(byId['cluster.cold.3000']).toMatchObject({ ours: '6.19 s', reference: '`ipvsadm-restore` 35.06 s', ratio: '0.18×', goal: '≤ 0.5×', size: '3,000 × 10' });
    expect(byId['cluster.cold.1000'].goal).toBeUndefined();
    expect(byId['cluster.rss.1000']).toMatchObject({ ours: '80 MiB (heap 30 MiB)', goal: '≤ 100 MiB' });
    expect(byId['cluster.soak.3000']).toMatchObject({ ratio: '1.04×', goal: '≤ 1.10×' });
    const text = updateTable(doc([]), rows, 'abc1234, 2026-12-01');
    expect(text.split('\n').filter((l) => rowId(l) !== null)).toHaveLength(rows.length);
  });

  describe('peer rows (ours / kube-proxy)', () => {
    const ours = {
      cold: 24000, memCold: 90, one: { p50: 4, p99: 9 }, churn: { p50: 500, p99: 1000, rate: 50, cpuMs: 2000, n: 1000 }, memChurn: 100,
      restart: { usefulMs: 3000 }, periodic: { kernelOps: 0, forks: 0, cpuMs: 1000, execs: {} },
    };
    const rows = async (kubeProxy: object) => {
      const { peerRows } = await import('../../bench/cluster-results.mjs');
      const out = peerRows({ results: [{ n: 10000, restore: 160000, ours, kubeProxy }], endpoints: 10 });
      return Object.fromEntries(out.map((r: { id: string }) => [r.id, r]));
    };

    it('kube-proxy synced: its RSS after the first sync, the goal marked', async () => {
      const byId = await rows({ cold: 300000, memCold: 180 });
      expect(Object.keys(byId).sort()).toEqual(['peer.cold.10000', 'peer.rss.10000']);
      expect(byId['peer.rss.10000']).toMatchObject({ ours: '90 MiB', reference: 'kube-proxy 180 MiB', ratio: '0.50×', goal: '≤ 1.0× (met)' });
    });

    it("kube-proxy's first sync not ended: its RSS from the samples, the other figures not measured", async () => {
      const byId = await rows({ cold: 300000, firstSyncTimeoutMs: 4_800_000, rssUnsynced: { first: 150, max: 200, last: 180 } });
      expect(byId['peer.rss.10000']).toMatchObject({ reference: 'kube-proxy 180 MiB 80 min into its first sync, not ended (at its cold start 150 MiB, at most 200 MiB)', ratio: '0.50×', goal: '≤ 1.0× (met)' });
      expect(byId['peer.one-change.10000']).toMatchObject({ ours: '9 ms (p50 4 ms)', ratio: '–', reference: expect.stringContaining('not measured') });
      expect(byId['peer.cold.10000']).toMatchObject({ ratio: '0.080×', goal: '≤ 0.1× (met)' });
    });
  });
});
