// Proxier benchmark, run inside UML by bench/run.mjs: 1,000 Services x 10 endpoints.
//   full sync from an empty kernel (IPVS + ipsets + kube-ipvs0 addresses + iptables) through the
//   real proxier, against ipvsadm-restore of the same virtual servers (ratio, same boot);
//   then one endpoint change at that size (time and op count), and the process's RSS.
import { parseArgs } from '../dist/src/config.js';
import { NetlinkIpsetClient } from '../dist/src/kernel/ipset/client.js';
import { NetlinkIpvsClient } from '../dist/src/kernel/ipvs/client.js';
import { Iptables } from '../dist/src/kernel/iptables.js';
import { NetlinkLinkClient } from '../dist/src/kernel/link.js';
import { createLogger } from '../dist/src/log-json.js';
import { endpointSliceSchema, serviceSchema } from '../dist/src/model/k8s-schemas.js';
import { IpvsProxier } from '../dist/src/proxy/ipvs/proxier.js';
import { median, reloadIpvs, requireUml, restoreText, sh, time } from './uml-kernel.mjs';

requireUml('bench/proxier.mjs');
const SERVICES = Number(process.env.BENCH_SERVICES ?? 1000);
const ENDPOINTS = Number(process.env.BENCH_DESTS ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

const vip = (i) => `10.97.${i >> 8}.${i & 255}`;
const ep = (n) => `10.244.${(n >> 8) & 255}.${n & 255}`;
const objects = Array.from({ length: SERVICES }, (_, i) => ({
  service: serviceSchema.parse({ metadata: { name: `svc-${i}`, namespace: 'bench' }, spec: { clusterIP: vip(i), ports: [{ name: 'http', port: 80, targetPort: 8080 }] } }),
  slice: endpointSliceSchema.parse({
    metadata: { name: `svc-${i}-1`, namespace: 'bench', labels: { 'kubernetes.io/service-name': `svc-${i}` } },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    endpoints: Array.from({ length: ENDPOINTS }, (_, j) => ({ addresses: [ep(i * ENDPOINTS + j)], conditions: { ready: true } })),
  }),
}));
const reference = restoreText(objects.map((o, i) => ({ address: vip(i), port: 80, destinations: o.slice.endpoints.map((e) => ({ address: e.addresses[0], port: 8080 })) })));

sh('sh', ['-c', 'iptables-legacy -t mangle -N KUBE-IPTABLES-HINT 2>/dev/null || true']);
const { config } = parseArgs(['--hostname-override', 'kip-node', '--cluster-cidr', '10.244.0.0/16', '--ipvs-sync-period', '1h']);
const logger = createLogger({ format: 'text', verbosity: 0 }, { write: () => true });

async function freshProxier() {
  sh('node', ['dist/bin/cli.js', 'cleanup']);
  reloadIpvs();
  const ipvs = await NetlinkIpvsClient.open();
  const iptables = await Iptables.create({ family: 'ipv4' });
  return new IpvsProxier({
    config, nodeName: 'kip-node', logger, dummyName: 'kube-ipvs0',
    clients: { ipvs: ipvs.client, ipset: await NetlinkIpsetClient.open(), link: NetlinkLinkClient.open(), iptables: { ipv4: iptables, ipv6: null } },
  });
}

const rows = { restore: [], full: [], change: [] };
let last;
for (let r = 0; r < ROUNDS; r++) {
  sh('node', ['dist/bin/cli.js', 'cleanup']);
  reloadIpvs();
  rows.restore.push(await time(() => sh('ipvsadm-restore', [], reference)));
  const proxier = await freshProxier();
  const handler = proxier.handler(() => {});
  for (const { service, slice } of objects) {
    handler.onService(`bench/${service.metadata.name}`, service);
    handler.onEndpointSlice(`bench/${slice.metadata.name}`, slice);
  }
  let full;
  rows.full.push(await time(async () => (full = await proxier.sync({ full: true }))));
  // One endpoint of one service replaced by another address.
  const { slice } = objects[SERVICES >> 1];
  const changed = { ...slice, endpoints: [...slice.endpoints.slice(1), { ...slice.endpoints[0], addresses: ['10.245.0.1'] }] };
  handler.onEndpointSlice(`bench/${slice.metadata.name}`, changed);
  let one;
  rows.change.push(await time(async () => (one = await proxier.sync())));
  last = { full, one, rss: process.memoryUsage().rss };
  handler.onEndpointSlice(`bench/${slice.metadata.name}`, slice);
  proxier.close();
}
sh('node', ['dist/bin/cli.js', 'cleanup']);

const f = (ms) => `${ms.toFixed(0)} ms`;
const ref = median(rows.restore);
const fullMs = median(rows.full);
const nonZero = (ops) => Object.entries(ops).filter(([k, v]) => v && k !== 'virtualServers').map(([k, v]) => `${k} ${v}`).join(', ');
console.log(`proxier: ${SERVICES} services x ${ENDPOINTS} endpoints, median of ${ROUNDS}, kernel ${sh('uname', ['-r']).trim()}`);
console.log(`  full sync from empty: ${f(fullMs)}  ipvsadm-restore (IPVS only) ${f(ref)}  ratio ${(fullMs / ref).toFixed(3)}`);
console.log(`    phases ${JSON.stringify(last.full.phases)}; ops: ${nonZero(last.full.ops)}`);
console.log(`  one endpoint change: ${f(median(rows.change))}; ops: ${nonZero(last.one.ops)}; phases ${JSON.stringify(last.one.phases)}`);
console.log(`  RSS after sync: ${(last.rss / 2 ** 20).toFixed(0)} MiB`);
console.log(JSON.stringify({ bench: 'proxier', rounds: rows }));
