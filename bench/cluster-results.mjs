// The cluster benchmark's rows of the results table (bench/results.mjs), from bench/cluster.mjs's results.
const GOAL = {
  cold: { 3000: '≤ 0.5×', 10000: '≤ 0.3×' },
  rss: { 1000: '≤ 100 MiB', 3000: '≤ 130 MiB', 10000: '≤ 200 MiB' },
};
const s = (ms) => `${(ms / 1000).toFixed(2)} s`;
const ms = (x) => `${Math.round(x).toLocaleString('en')} ms`;
const MiB = (x) => `${x.toFixed(0)} MiB`;
const x = (v) => `${v.toFixed(2)}×`;

/** One row per figure and size: `results` and `manifests` as bench/cluster.mjs collects them. */
export function clusterRows({ results, manifests, endpoints, soakMinutes = 0 }) {
  const rows = [];
  const size = (n) => `${n.toLocaleString('en')} × ${endpoints}`;
  for (const r of results) {
    const n = r.n;
    const at = (what) => ({ id: `cluster.${what}.${n}`, size: size(n) });
    rows.push(
      { ...at('cold'), benchmark: 'cold start, API: spawn → every virtual and real server in the kernel (UML), median of per-round ratios', ours: s(r.cold), reference: `\`ipvsadm-restore\` ${s(r.restore)}`, ratio: x(r.ratio), goal: GOAL.cold[n] },
      { ...at('rss'), benchmark: 'RSS 3 s after the cold start (UML, the chart\'s 512Mi limit)', ours: `${MiB(r.memCold.rss)} (heap ${MiB(r.memCold.heap)})`, goal: GOAL.rss[n] },
    );
    if (r.firstList !== null) {
      rows.push({ ...at('first-list'), benchmark: 'spawn → first list request (UML)', ours: s(r.firstList), reference: r.requestOnly === null ? undefined : `a \`node\` process that only sends it ${s(r.requestOnly)}`, ratio: r.requestOnly === null ? undefined : x(r.firstList / r.requestOnly) });
    }
    rows.push(
      { ...at('one-change'), benchmark: 'one change: event → kernel, p50 (UML)', ours: `${ms(r.one.p50)} (p99 ${ms(r.one.p99)})`, reference: `a bare watcher (\`bench/change-floor.mjs\`) ${ms(r.oneFloor.p50)}`, ratio: x(r.one.p50 / r.oneFloor.p50), goal: '≤ 20 ms' },
      { ...at('churn'), benchmark: 'churn, 50 changes/s: event → kernel, p99 (UML)', ours: `${ms(r.churn.p99)} (p50 ${ms(r.churn.p50)})`, goal: '≤ 1,250 ms' },
      { ...at('restart'), benchmark: 'restart over the programmed kernel: a change made while down in the kernel, median (UML)', ours: `${s(r.restart.usefulMs)}, ${r.restart.kernelOps} writes`, reference: `cold start ${s(r.cold)}`, ratio: x(r.restart.usefulMs / r.cold), goal: '≤ 1×' },
      { ...at('no-change'), benchmark: 'a sync period without changes: kernel writes (UML)', ours: `${r.periodic.kernelOps.toFixed(0)}`, goal: '0' },
    );
    if (r.soak) {
      const idle = r.soak.idle.rss;
      rows.push({ ...at('soak'), benchmark: `${soakMinutes}-minute soak at 50 changes/s: RSS 45 s after it (UML)`, ours: `${MiB(idle)} (per-minute p99 at most ${ms(Math.max(...r.soak.p99))})`, reference: `after the cold start ${MiB(r.memCold.rss)}`, ratio: x(idle / r.memCold.rss), goal: '≤ 1.10×' });
    }
  }
  if (manifests) {
    const n = manifests.n;
    rows.push(
      { id: `cluster.cold-manifests.${n}`, size: size(n), benchmark: 'cold start, `--manifests` (UML), median of per-round ratios', ours: s(manifests.cold), reference: `\`ipvsadm-restore\` ${s(manifests.restore)}`, ratio: x(manifests.ratio), goal: GOAL.cold[n] },
      { id: `cluster.rss-manifests.${n}`, size: size(n), benchmark: 'RSS 3 s after the `--manifests` cold start (UML, the chart\'s 512Mi limit)', ours: `${MiB(manifests.memCold.rss)} (heap ${MiB(manifests.memCold.heap)})`, goal: GOAL.rss[n] },
    );
  }
  return rows;
}
