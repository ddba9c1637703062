// ipset benchmark on the host kernel, in a fresh network namespace (re-executes itself under
// `unshare -n` when started outside one): 50,000 hash:ip,port entries added to an empty set
// by the client and by `ipset restore` (process spawn included), then the set listed by the
// client and by `ipset save`. Prints medians and ratios measured in the same run.
//   npm run build && node bench/ipset.mjs        (BENCH_ENTRIES, BENCH_ROUNDS to change)
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { inFreshNetnsOrReexec } from './fresh-netns.mjs';
import { ratio, recordResults } from './results.mjs';

const ENTRIES = Number(process.env.BENCH_ENTRIES ?? 50000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const SET = 'kip-bench';


inFreshNetnsOrReexec(import.meta.url, 'ipsets');

const { NetlinkIpsetClient } = await import('../dist/src/kernel/ipset/client.js');

const entries = Array.from({ length: ENTRIES }, (_, i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255},${i % 3 ? 'tcp' : 'udp'}:${1 + (i % 1000)}`);
const create = `create ${SET} hash:ip,port family inet hashsize 65536 maxelem ${2 * ENTRIES}`;
const restoreText = `${entries.map((e) => `add ${SET} ${e}`).join('\n')}\n`;

const sh = (args, input) => execFileSync('ipset', args, { encoding: 'utf8', maxBuffer: 1 << 28, ...(input ? { input } : {}) });
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
async function time(fn) {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}
function emptySet() {
  sh(['destroy']);
  sh(['restore'], `${create}\n`);
}

const client = await NetlinkIpsetClient.open();
const rows = { restore: [], client: [], save: [], list: [] };
for (let round = 0; round < ROUNDS; round++) {
  emptySet();
  rows.restore.push(await time(() => sh(['restore'], restoreText)));
  rows.save.push(await time(() => sh(['save', SET])));

  emptySet();
  let results;
  rows.client.push(await time(async () => (results = await client.add(SET, entries))));
  const failed = results.filter((r) => !r.ok).length;
  if (failed) throw new Error(`${failed} entries failed`);
  let listed;
  rows.list.push(await time(async () => ([listed] = await client.list(SET))));
  if (listed.entries.length !== ENTRIES) throw new Error(`listed ${listed.entries.length} entries, want ${ENTRIES}`);
}
const saved = sh(['save', SET]).trim().split('\n').length - 1;
if (saved !== ENTRIES) throw new Error(`ipset save shows ${saved} entries, want ${ENTRIES}`);
sh(['destroy']);
client.close();

const m = Object.fromEntries(Object.entries(rows).map(([k, v]) => [k, median(v)]));
const ms = (x) => `${x.toFixed(1)} ms`;
console.log(`ipset benchmark: ${ENTRIES} hash:ip,port entries, median of ${ROUNDS} rounds (kernel ${readFileSync('/proc/sys/kernel/osrelease', 'utf8').trim()})`);
console.log(`  add   ipset restore ${ms(m.restore).padStart(10)}   client.add  ${ms(m.client).padStart(10)}   ratio ${(m.client / m.restore).toFixed(2)}x (goal <= 0.5x)`);
console.log(`  list  ipset save    ${ms(m.save).padStart(10)}   client.list ${ms(m.list).padStart(10)}   ratio ${(m.list / m.save).toFixed(2)}x`);
console.log(`  rounds (ms): ${JSON.stringify(Object.fromEntries(Object.entries(rows).map(([k, v]) => [k, v.map((x) => Math.round(x))])))}`);
const n = ENTRIES.toLocaleString('en');
const whole = (x) => `${Math.round(x).toLocaleString('en')} ms`;
recordResults([
  { id: `ipset.add.${ENTRIES}`, benchmark: 'ipset: add the entries to an empty set (host, netns)', size: `${n} hash:ip,port entries`, ours: whole(m.client), reference: `\`ipset restore\` ${whole(m.restore)}`, ratio: ratio(m.client, m.restore), goal: '≤ 0.5×' },
  { id: `ipset.list.${ENTRIES}`, benchmark: 'ipset: list that set (host, netns)', size: `${n} entries`, ours: whole(m.list), reference: `\`ipset save\` ${whole(m.save)}`, ratio: ratio(m.list, m.save) },
]);
