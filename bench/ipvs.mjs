// IPVS benchmark, run inside UML by bench/run.mjs: 1,000 virtual services x 10 real servers
// applied to an empty kernel by the addon and by ipvsadm-restore, then dumped by both.
// Prints medians and ratios; every figure is relative to a reference run in the same boot.
import { NetlinkIpvsClient, throwFirstFailure } from '../dist/src/kernel/ipvs/client.js';
import { ratio, recordResults } from './results.mjs';
import { median, reloadIpvs, requireUml, restoreText as toRestoreText, sh, time } from './uml-kernel.mjs';

const SERVICES = Number(process.env.BENCH_SERVICES ?? 1000);
const DESTS = Number(process.env.BENCH_DESTS ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);

const services = Array.from({ length: SERVICES }, (_, i) => ({
  family: 'ipv4', protocol: 'tcp', address: `10.97.${i >> 8}.${i & 255}`, port: 80, fwmark: null,
  scheduler: 'rr', flags: [], timeout: 0, netmask: 32,
  destinations: Array.from({ length: DESTS }, (_, j) => ({
    address: `10.244.${(i * DESTS + j) >> 8 & 255}.${(i * DESTS + j) & 255}`, port: 8080,
    forward: 'masq', weight: 1, upperThreshold: 0, lowerThreshold: 0,
  })),
}));
const ops = services.flatMap(({ destinations, ...service }) => [
  { kind: 'addService', service },
  ...destinations.map((destination) => ({ kind: 'addDestination', service, destination })),
]);
const restoreText = toRestoreText(services);

/** Reloads ip_vs (see reloadIpvs) and reopens the client. */
async function emptyKernel() {
  reloadIpvs();
  client?.close();
  const a = await NetlinkIpvsClient.open();
  if (!a.available) throw new Error(a.reason);
  client = a.client;
}

requireUml('bench/ipvs.mjs');
let client;
const rows = { restore: [], addon: [], saveDump: [], addonDump: [] };
const expectedLines = SERVICES * (DESTS + 1);
async function viaIpvsadm() {
  await emptyKernel();
  rows.restore.push(await time(() => sh('ipvsadm-restore', [], restoreText)));
}
async function viaAddon() {
  await emptyKernel();
  rows.addon.push(await time(async () => throwFirstFailure(await client.apply(ops))));
}
for (let r = 0; r < ROUNDS; r++) {
  // Alternate which side goes first; both dumps read the same table.
  if (r % 2) await viaAddon(), await viaIpvsadm();
  else await viaIpvsadm(), await viaAddon();
  let dumped;
  rows.saveDump.push(await time(() => sh('ipvsadm', ['-Sn'])));
  rows.addonDump.push(await time(async () => (dumped = await client.dumpAll())));
  const lines = sh('ipvsadm', ['-Sn']).trim().split('\n').length;
  const dests = dumped.reduce((n, s) => n + s.destinations.length, 0);
  if (lines !== expectedLines || dumped.length + dests !== expectedLines) throw new Error(`state mismatch: ${lines} lines, ${dumped.length}+${dests} objects`);
}
sh('ipvsadm', ['-C']);
client?.close();

const f = (ms) => `${ms.toFixed(0)} ms`;
const apply = { ref: median(rows.restore), ours: median(rows.addon) };
const dump = { ref: median(rows.saveDump), ours: median(rows.addonDump) };
console.log(`IPVS ${SERVICES} services x ${DESTS} real servers (${ops.length} rules), median of ${ROUNDS}, kernel ${sh('uname', ['-r']).trim()}`);
console.log(`  apply: addon ${f(apply.ours)}  ipvsadm-restore ${f(apply.ref)}  ratio ${(apply.ours / apply.ref).toFixed(3)}`);
console.log(`  dump:  addon ${f(dump.ours)}  ipvsadm -Sn ${f(dump.ref)}  ratio ${(dump.ours / dump.ref).toFixed(3)}`);
console.log(JSON.stringify({ bench: 'ipvs', services: SERVICES, dests: DESTS, rounds: rows }));
const size = `${SERVICES.toLocaleString('en')} × ${DESTS}`;
const whole = (x) => `${Math.round(x).toLocaleString('en')} ms`;
recordResults([
  { id: `ipvs.apply.${SERVICES}x${DESTS}`, benchmark: 'IPVS: apply to an empty kernel (UML)', size, ours: whole(apply.ours), reference: `\`ipvsadm-restore\` ${whole(apply.ref)}`, ratio: ratio(apply.ours, apply.ref), goal: '≤ 0.2×' },
  { id: `ipvs.dump.${SERVICES}x${DESTS}`, benchmark: 'IPVS: full dump of that table (UML)', size, ours: whole(dump.ours), reference: `\`ipvsadm -Sn\` ${whole(dump.ref)}`, ratio: ratio(dump.ours, dump.ref), goal: '≤ 1×' },
]);
