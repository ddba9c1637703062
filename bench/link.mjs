// Binding Service addresses on the host kernel, in a fresh network namespace (re-executes itself
// under `unshare -n` when started outside one): N IPv4 /32 addresses added to one link (a veth:
// this kernel may have no dummy links; the kernel's work per address is the same) by the link
// client and by `ip -batch`, and, for comparison, N `local` routes in the local table, which make
// the same addresses local without an address each. Prints the times per size.
//   npm run build && node bench/link.mjs        (BENCH_SIZES=10000,20000,40000 to change)
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { inFreshNetnsOrReexec } from './fresh-netns.mjs';
import { ratio, recordResults } from './results.mjs';

const SIZES = (process.env.BENCH_SIZES ?? '10000,20000,40000').split(',').map(Number);
const LINK = 'kip-bench0';

inFreshNetnsOrReexec(import.meta.url, 'links');

const { NetlinkLinkClient } = await import('../dist/src/kernel/link.js');
const ip = (args, input) => execFileSync('ip', args, { encoding: 'utf8', maxBuffer: 1 << 28, ...(input ? { input } : {}) });
const fresh = () => {
  spawnSync('ip', ['link', 'del', LINK]);
  ip(['link', 'add', LINK, 'type', 'veth', 'peer', 'name', `${LINK}p`]);
  ip(['link', 'set', LINK, 'up']);
};
const time = async (fn) => {
  const t = performance.now();
  await fn();
  return performance.now() - t;
};

const client = NetlinkLinkClient.open();
const results = [];
for (const n of SIZES) {
  const addrs = Array.from({ length: n }, (_, i) => `10.${96 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`);
  fresh();
  let failed = 0;
  const ours = await time(async () => (failed = (await client.addAddresses(LINK, addrs)).filter((r) => !r.ok).length));
  const listed = ip(['-4', '-o', 'addr', 'show', 'dev', LINK]).trim().split('\n').length;
  if (failed || listed !== n) throw new Error(`${n} addresses: ${failed} failed, ${listed} on the link`);
  fresh();
  const batch = await time(() => ip(['-batch', '-'], addrs.map((a) => `addr add ${a}/32 dev ${LINK}`).join('\n')));
  fresh();
  const routes = await time(() => ip(['-batch', '-'], addrs.map((a) => `route add local ${a}/32 dev ${LINK} table local proto kernel scope host`).join('\n')));
  results.push({ n, ours, batch, routes });
  console.log(`  ${n.toLocaleString('en')} addresses: client ${(ours / 1000).toFixed(2)} s, ip -batch ${(batch / 1000).toFixed(2)} s; as local routes (ip -batch) ${(routes / 1000).toFixed(2)} s`);
}
spawnSync('ip', ['link', 'del', LINK]);
client.close();

console.log(`link benchmark (kernel ${readFileSync('/proc/sys/kernel/osrelease', 'utf8').trim()}): the kernel walks the link's whole address list for each address added`);
const s = (ms) => `${(ms / 1000).toFixed(2)} s`;
recordResults(results.map(({ n, ours, batch, routes }) => ({
  id: `link.addresses.${n}`,
  benchmark: 'addresses: bind /32 addresses to one link (host, netns)',
  size: `${n.toLocaleString('en')} addresses`,
  ours: s(ours),
  reference: `\`ip -batch\` ${s(batch)}; the same as \`local\` routes ${s(routes)}`,
  ratio: ratio(ours, batch),
})));
