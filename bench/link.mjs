// Binding Service IPs on the host kernel, in a fresh network namespace (re-executes itself under
// `unshare -n` when started outside one): N IPs made local through one link by the link client,
// as local routes (--ipvs-address-binding=route, the default) and as addresses (=address, and
// kube-proxy), and as addresses by `ip -batch`. IPv4 and IPv6 (IPv6 addresses at smaller sizes:
// they cost far more). The link is a veth (this kernel may have no dummy links; the kernel's work
// per address or route is the same), up (IPv6 takes no route through a link that is down).
//   npm run build && node bench/link.mjs   (BENCH_SIZES=10000,20000,40000, BENCH_SIZES6=1000,2000,4000)
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { inFreshNetnsOrReexec } from './fresh-netns.mjs';
import { ratio, recordResults } from './results.mjs';

const SIZES = { ipv4: (process.env.BENCH_SIZES ?? '10000,20000,40000').split(',').map(Number), ipv6: (process.env.BENCH_SIZES6 ?? '1000,2000,4000').split(',').map(Number) };
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
const ipOf = { ipv4: (i) => `10.${96 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`, ipv6: (i) => `fd00::${(i >> 16).toString(16)}:${(i & 0xffff).toString(16)}` };
const HOST = { ipv4: 32, ipv6: 128 };

const client = NetlinkLinkClient.open();
/** Binds `ips` with `call` on a fresh link; checks that every one is there (`count`). */
async function bind(call, ips, count) {
  fresh();
  let failed = 0;
  const ms = await time(async () => (failed = (await call(ips)).filter((r) => !r.ok).length));
  const there = await count();
  if (failed || there !== ips.length) throw new Error(`${ips.length} IPs: ${failed} failed, ${there} bound`);
  return ms;
}

const results = [];
for (const family of ['ipv4', 'ipv6']) {
  for (const n of SIZES[family]) {
    const ips = Array.from({ length: n }, (_, i) => ipOf[family](i));
    const routes = await bind((a) => client.addLocalRoutes(LINK, a), ips, async () => (await client.listLocalRoutes(LINK)).length);
    const addresses = await bind((a) => client.addAddresses(LINK, a), ips, async () => (await client.listAddresses(LINK)).filter((a) => !a.startsWith('fe80:')).length);
    fresh();
    const nodad = family === 'ipv6' ? ' nodad' : '';
    const batch = await time(() => ip(['-batch', '-'], ips.map((a) => `addr add ${a}/${HOST[family]} dev ${LINK}${nodad}`).join('\n')));
    results.push({ family, n, routes, addresses, batch });
    console.log(`  ${n.toLocaleString('en')} ${family}: local routes ${(routes / 1000).toFixed(2)} s; addresses ${(addresses / 1000).toFixed(2)} s (ip -batch ${(batch / 1000).toFixed(2)} s)`);
  }
}
spawnSync('ip', ['link', 'del', LINK]);
client.close();

console.log(`link benchmark (kernel ${readFileSync('/proc/sys/kernel/osrelease', 'utf8').trim()}): binding N addresses to one link costs N² in the kernel; N routes, N log N`);
const s = (ms) => `${(ms / 1000).toFixed(2)} s`;
recordResults(results.map(({ family, n, routes, addresses, batch }) => ({
  id: `link.${family === 'ipv4' ? 'addresses' : 'addresses6'}.${n}`,
  benchmark: `Service IPs: bind ${family === 'ipv4' ? 'IPv4' : 'IPv6'} IPs through one link, as local routes (the default) vs as addresses (host, netns)`,
  size: `${n.toLocaleString('en')} IPs`,
  ours: s(routes),
  reference: `as addresses ${s(addresses)} (\`ip -batch\` ${s(batch)})`,
  ratio: ratio(routes, addresses),
})));
