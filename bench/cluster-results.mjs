// The cluster benchmark's rows of the results table (bench/results.mjs), from bench/cluster.mjs's results.
const GOAL = {
  cold: { 3000: '≤ 0.5×', 10000: '≤ 0.3×', 50000: '≤ 0.2×' },
  rss: { 1000: '≤ 100 MiB', 3000: '≤ 130 MiB', 10000: '≤ 200 MiB', 50000: '≤ 450 MiB' },
};
const s = (ms) => `${(ms / 1000).toFixed(2)} s`;
const ms = (x) => `${Math.round(x).toLocaleString('en')} ms`;
const MiB = (x) => `${x.toFixed(0)} MiB`;
const x = (v) => `${v.toFixed(2)}×`;

/** One row per figure and size: `results` and `manifests` as bench/cluster.mjs collects them. */
export function clusterRows({ results, manifests, endpoints, soakMinutes = 0, memoryLimit = null }) {
  const rows = [];
  // The memory limit the daemon ran under (its cgroup's memory.max), as the rows name it.
  const limit = memoryLimit === null ? 'no memory limit' : memoryLimit.label === "the chart's limit" ? `the chart's ${memoryLimit.mib}Mi limit` : `a ${memoryLimit.mib}Mi limit, not the chart's`;
  const size = (n) => `${n.toLocaleString('en')} × ${endpoints}`;
  for (const r of results) {
    const n = r.n;
    const at = (what) => ({ id: `cluster.${what}.${n}`, size: size(n) });
    rows.push(
      { ...at('cold'), benchmark: 'cold start, API: spawn → every virtual and real server in the kernel (UML), median of per-round ratios', ours: s(r.cold), reference: `\`ipvsadm-restore\` ${s(r.restore)}`, ratio: x(r.ratio), goal: GOAL.cold[n] },
      { ...at('rss'), benchmark: `RSS 3 s after the cold start (UML, ${limit})`, ours: `${MiB(r.memCold.rss)} (heap ${MiB(r.memCold.heap)})`, goal: GOAL.rss[n] },
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
      { id: `cluster.rss-manifests.${n}`, size: size(n), benchmark: `RSS 3 s after the \`--manifests\` cold start (UML, ${limit})`, ours: `${MiB(manifests.memCold.rss)} (heap ${MiB(manifests.memCold.heap)})`, goal: GOAL.rss[n] },
    );
  }
  return rows;
}

/** Goals of the peer rows, ours / kube-proxy (issue 48): cold start and RSS only at 10,000. */
const PEER_GOAL = { cold: { 10000: '≤ 0.1×' }, one: '≤ 0.05×', cpu: '≤ 0.2×', rss: { 10000: '≤ 1.0×' } };
const q = (a, b) => `${(a / b).toFixed(a / b < 0.1 ? 3 : 2)}×`;
/** A goal cell: the goal and whether this figure met it (`met`: the ratio is within it). */
const goal = (text, met) => (text ? `${text} ${met ? '(met)' : '(not met)'}` : undefined);
const within = (text, value) => value <= Number(text.replace(/[^\d.]/g, ''));

/** The `--peer kube-proxy` rows: per figure and size, ours, kube-proxy's, the ratio ours / theirs and the goal. */
export function peerRows({ results, endpoints }) {
  const rows = [];
  for (const r of results) {
    const n = r.n;
    const at = (what) => ({ id: `peer.${what}.${n}`, size: `${n.toLocaleString('en')} × ${endpoints}` });
    const { ours: o, kubeProxy: k } = r;
    const ratioGoal = (g, a, b) => ({ ratio: q(a, b), goal: g ? goal(g, within(g, a / b)) : undefined });
    // The churn writes no second change to a service before the first is in the kernel: a slow proxy gets fewer.
    const rate = (x) => (x.churn.rate < 45 ? `, ${x.churn.rate.toFixed(0)} changes/s reached` : '');
    const synced = (x) => (x.readyMs === undefined ? '' : ` (first sync done ${s(x.readyMs)})`);
    // kube-proxy's RSS: after its first sync, or else the last sample taken while it ran (its state built, its ipsets being filled).
    const kRss = k.memCold ?? k.rssUnsynced?.last;
    const waited = (x) => `${(x.firstSyncTimeoutMs / 60_000).toFixed(0)} min`;
    const perK = (x) => x.churn.cpuMs / x.churn.n; // CPU ms per change = CPU s per 1,000 changes
    // [needed figure, id, benchmark, ours, kube-proxy's, ratio and goal, kube-proxy's figure if not k[needed]];
    // the last three read kube-proxy's figures.
    const figures = [
      ['cold', 'cold', 'vs kube-proxy: cold start, spawn → every virtual and real server in the kernel (UML), median', () => `${s(o.cold)}${synced(o)}`, () => `kube-proxy ${s(k.cold)}${synced(k)}; \`ipvsadm-restore\` ${s(r.restore)}`, () => ratioGoal(PEER_GOAL.cold[n], o.cold, k.cold)],
      ['restart', 'restart', 'vs kube-proxy: restart over the programmed kernel, a change made while down in the kernel (UML)', () => s(o.restart.usefulMs), () => `kube-proxy ${s(k.restart.usefulMs)}`, () => ({ ratio: q(o.restart.usefulMs, k.restart.usefulMs) })],
      ['one', 'one-change', 'vs kube-proxy: one change, event → kernel, p99 (UML)', () => `${ms(o.one.p99)} (p50 ${ms(o.one.p50)})`, () => `kube-proxy ${ms(k.one.p99)} (p50 ${ms(k.one.p50)})`, () => ratioGoal(PEER_GOAL.one, o.one.p99, k.one.p99)],
      ['churn', 'churn', 'vs kube-proxy: churn at 50 changes/s, event → kernel, p99 (UML)', () => `${ms(o.churn.p99)} (p50 ${ms(o.churn.p50)})${rate(o)}`, () => `kube-proxy ${ms(k.churn.p99)} (p50 ${ms(k.churn.p50)})${rate(k)}`, () => ({ ratio: q(o.churn.p99, k.churn.p99) })],
      ['churn', 'churn-cpu', 'vs kube-proxy: CPU seconds per 1,000 changes in that churn, with exited children (UML)', () => `${perK(o).toFixed(2)} s`, () => `kube-proxy ${perK(k).toFixed(2)} s`, () => ratioGoal(PEER_GOAL.cpu, perK(o), perK(k))],
      ['periodic', 'no-change', 'vs kube-proxy: a 10 s sync period without changes, per period: kernel writes, processes created (system-wide), CPU (UML)',
        () => `${o.periodic.kernelOps.toFixed(0)} writes, ${o.periodic.forks.toFixed(1)} processes, CPU ${s(o.periodic.cpuMs)}`,
        () => `kube-proxy: ${k.periodic.forks.toFixed(1)} processes (${Object.entries(k.periodic.execs).map(([c, v]) => `${c} ×${v.toFixed(0)}`).join(', ')}), CPU ${s(k.periodic.cpuMs)}`,
        () => ({ ratio: `CPU ${q(o.periodic.cpuMs, k.periodic.cpuMs)}` })],
      ['memCold', 'rss', "vs kube-proxy: RSS 3 s after the cold start's first sync (UML)", () => MiB(o.memCold),
        () => `kube-proxy ${MiB(kRss)}${k.memCold === undefined ? ` ${waited(k)} into its first sync, not ended (at its cold start ${MiB(k.rssUnsynced.first)}, at most ${MiB(k.rssUnsynced.max)})` : ''}`,
        () => ratioGoal(PEER_GOAL.rss[n], o.memCold, kRss), kRss],
      ['memChurn', 'rss-churn', 'vs kube-proxy: RSS after the churn (UML)', () => MiB(o.memChurn), () => `kube-proxy ${MiB(k.memChurn)}`, () => ({ ratio: q(o.memChurn, k.memChurn) })],
    ];
    // Goals on this daemon's figure alone, marked even without kube-proxy's.
    const own = { periodic: () => goal('0 writes, 0 processes', o.periodic.kernelOps === 0 && o.periodic.forks === 0) };
    // kube-proxy whose first sync never ended: this daemon's figures, kube-proxy's marked not measured.
    const unsynced = k.firstSyncTimeoutMs === undefined ? null : `kube-proxy: not measured (its first sync had not ended ${waited(k)} after its cold start)`;
    // A run stopped early: only the figures both sides have (the cold start is recorded before the other phases).
    for (const [need, id, benchmark, ours, ref, ratio, theirs = k[need]] of figures) {
      if (o[need] === undefined) continue;
      const both = theirs !== undefined;
      if (!both && (unsynced === null || need === 'cold')) continue;
      const row = { ...at(id), benchmark, ours: ours(), reference: both ? ref() : unsynced, ...(both ? ratio() : { ratio: '–' }) };
      if (own[need]) row.goal = own[need]();
      rows.push(row);
    }
  }
  return rows;
}
