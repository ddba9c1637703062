// kube-proxy's conntrack settings inside UML, where the whole kernel is the test's: nf_conntrack_max
// = max(--conntrack-max-per-core x CPUs, --conntrack-min) and the hash size raised to a quarter of
// it, re-ensured by the periodic verification; and which UDP timeout wins for a flow IPVS forwards
// (kubernetes#120076): the IPVS one (--ipvs-udp-timeout) decides how long the flow keeps its real
// server, whatever the conntrack one (--conntrack-udp-timeout) is, and no sync wipes the flow.
import { execFileSync, spawn } from 'node:child_process';
import { cpus } from 'node:os';
import { readFileSync, writeFileSync } from 'node:fs';

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { CLI, Daemon, demoNetworkUp, waitFor } from '../lib/daemon.js';
import { assertIsolated } from '../lib/guard.js';

assertIsolated();

const REPO = new URL('../../../', import.meta.url).pathname;
const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const ARGS = ['--manifests', `${REPO}examples`, '--hostname-override', 'kip-node', '--cluster-cidr', '10.244.0.0/16', '--log-format', 'text', '--ipvs-sync-period', '2s'];
const NF = '/proc/sys/net/netfilter';
const HASHSIZE = '/sys/module/nf_conntrack/parameters/hashsize';
const num = (path: string) => Number(readFileSync(path, 'utf8').trim());
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// One datagram from a fixed source port to the DNS Service (10.96.0.53:53, three backends, rr);
// prints the backend that answered.
const SEND_JS = `
const s = require('node:dgram').createSocket('udp4');
const t = setTimeout(() => { process.stdout.write('TIMEOUT'); process.exit(0); }, 2000);
s.on('message', (m) => { clearTimeout(t); process.stdout.write(m.toString().split(' ')[0]); process.exit(0); });
s.bind(Number(process.argv[1]), () => s.send('ping', 53, '10.96.0.53'));
`;
const send = (sport: number) => sh('ip', 'netns', 'exec', 'kip-client', process.execPath, '-e', SEND_JS, String(sport));
/** The IPVS connection of the flow from source port `sport` (`ipvsadm -Lnc`): seconds left and real server; null when none. */
function ipvsEntry(sport: number): { expires: number; real: string } | null {
  const m = new RegExp(`^UDP\\s+(\\d+):(\\d+)\\s+\\S+\\s+10\\.250\\.0\\.2:${sport}\\s+10\\.96\\.0\\.53:53\\s+(\\S+)`, 'm').exec(sh('ipvsadm', '-Lnc'));
  return m ? { expires: Number(m[1]) * 60 + Number(m[2]), real: m[3]! } : null;
}
/** The conntrack entry of that flow: seconds left and the port the backend sees (masqueraded); null when none. */
function conntrackEntry(sport: number): { timeout: number; natPort: number } | null {
  let out = '';
  try {
    out = sh('conntrack', '-L', '-p', 'udp', '--sport', String(sport));
  } catch {
    return null; // exit 1: no entry
  }
  const m = /^udp\s+\d+\s+(\d+)\s.*dport=(\d+)\s+(?:\[|mark)/m.exec(out);
  return m ? { timeout: Number(m[1]), natPort: Number(m[2]) } : null;
}

let d: Daemon | null = null;
const start = async (...args: string[]) => {
  d = new Daemon([...ARGS, ...args]);
  d.start();
  await d.healthy();
};
beforeAll(() => demoNetworkUp());
afterEach(async () => void (await d?.stop()));
afterAll(() => {
  execFileSync('sh', ['-c', `sh ${REPO}examples/demo/network.sh down; ${process.execPath} ${CLI} cleanup >/dev/null 2>&1; true`]);
});

describe('nf_conntrack_max and the hash size (the initial netns: UML\'s)', () => {
  it('max(per core x CPUs, min), the hash size raised to a quarter of it, both put back by the periodic verification', async () => {
    const perCore = 300_000;
    const max = Math.max(perCore * cpus().length, 100_000);
    const hashBefore = num(HASHSIZE);
    expect(hashBefore).toBeLessThan(max / 4);
    await start(`--conntrack-max-per-core=${perCore}`, '--conntrack-min=100000', '--conntrack-tcp-timeout-established=3h');
    expect([num(`${NF}/nf_conntrack_max`), num(`${NF}/nf_conntrack_tcp_timeout_established`)]).toEqual([max, 10_800]);
    const hashsize = num(HASHSIZE); // the kernel rounds it up to whole pages of buckets
    expect(hashsize).toBeGreaterThanOrEqual(max / 4);
    expect(hashsize).toBeLessThan(max / 4 + 4096);
    writeFileSync(`${NF}/nf_conntrack_max`, '5000');
    writeFileSync(`${NF}/nf_conntrack_tcp_timeout_established`, '432000');
    await waitFor('the verification to put them back', () => num(`${NF}/nf_conntrack_max`) === max && num(`${NF}/nf_conntrack_tcp_timeout_established`) === 10_800, 15_000);
    await d!.stop();
    // A smaller setting never lowers the hash size; --conntrack-max-per-core 0 leaves nf_conntrack_max alone.
    await start('--conntrack-max-per-core=1000', '--conntrack-min=0');
    expect([num(`${NF}/nf_conntrack_max`), num(HASHSIZE)]).toEqual([1000, hashsize]);
    await d!.stop();
    writeFileSync(`${NF}/nf_conntrack_max`, '7777');
    await start('--conntrack-max-per-core=0');
    await sleep(2500); // a verification
    expect(num(`${NF}/nf_conntrack_max`)).toBe(7777);
    expect(d!.log).not.toMatch(/cannot set/);
  });
});

describe('UDP through IPVS: --ipvs-udp-timeout against --conntrack-udp-timeout (kubernetes#120076)', () => {
  it('conntrack shorter: its entry expires, the IPVS one keeps the flow on its real server (a new conntrack entry, a new masquerade port); IPVS\'s expiry moves it', async () => {
    await start('--ipvs-udp-timeout=8s', '--conntrack-udp-timeout=2s', '--conntrack-udp-timeout-stream=2s');
    const sport = 40_101;
    const first = send(sport);
    expect(first).toMatch(/^be\d$/);
    expect(ipvsEntry(sport)!.expires).toBeGreaterThan(5);
    const ct = conntrackEntry(sport)!;
    expect(ct.timeout).toBeLessThanOrEqual(2);
    await waitFor('the conntrack entry to expire', () => conntrackEntry(sport) === null, 10_000);
    expect(ipvsEntry(sport)).not.toBeNull();
    expect(send(sport)).toBe(first); // IPVS's entry decides
    expect(conntrackEntry(sport)!.natPort).not.toBe(ct.natPort); // what the backend sees changed
    await waitFor('the IPVS entry to expire', () => ipvsEntry(sport) === null, 15_000);
    expect(send(sport)).not.toBe(first); // scheduled anew (rr)
  });

  it('IPVS shorter: its expiry moves the flow and takes the conntrack entry with it; periodic syncs wipe nothing', async () => {
    await start('--ipvs-udp-timeout=3s', '--conntrack-udp-timeout=60s', '--conntrack-udp-timeout-stream=60s');
    const sport = 40_102;
    const first = send(sport);
    expect(conntrackEntry(sport)!.timeout).toBeGreaterThan(30);
    await waitFor('the IPVS entry to expire', () => ipvsEntry(sport) === null, 10_000);
    await waitFor('its conntrack entry to go with it', () => conntrackEntry(sport) === null, 5_000);
    const second = send(sport);
    expect(second).not.toBe(first);
    // The flow kept alive (a datagram every 100 ms) across periodic verifications (--ipvs-sync-period
    // 2s): the same real server and the same conntrack entry (its masquerade port) all along.
    const nat = conntrackEntry(sport)!.natPort;
    const verifiedBefore = (d!.log.match(/INFO verified /g) ?? []).length;
    const flow = spawn('ip', ['netns', 'exec', 'kip-client', process.execPath, `${REPO}test/kernel/lib/udp-flow.mjs`, '10.96.0.53', '53', String(sport)]);
    let replies = '';
    flow.stdout.on('data', (b) => (replies += b));
    try {
      for (let i = 0; i < 7; i++) {
        await sleep(1000);
        expect(conntrackEntry(sport)!.natPort).toBe(nat);
      }
    } finally {
      flow.kill();
    }
    const seen = replies.trim().split('\n');
    expect(seen.length).toBeGreaterThan(20);
    expect(new Set(seen)).toEqual(new Set([second]));
    expect((d!.log.match(/INFO verified /g) ?? []).length - verifiedBefore).toBeGreaterThanOrEqual(2);
  });
});
