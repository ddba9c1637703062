// Draining real servers inside UML, with real TCP from a client namespace: a drained real server
// is deleted within about two seconds of its last connection (not by the next periodic sync), and
// sh / mh Services with a draining (weight-0) real server never refuse a client while another
// real server is ready, nor send a new connection to the draining one (kubernetes PR #138688).
import { execFileSync, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { CLI, Daemon, Manifests, demoNetworkUp, waitFor } from '../lib/daemon.js';
import { assertIsolated } from '../lib/guard.js';

assertIsolated();

const REPO = new URL('../../../', import.meta.url).pathname;
const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const BACKENDS = { be1: '10.244.1.2', be2: '10.244.2.2', be3: '10.244.3.2' } as const;
type Backend = keyof typeof BACKENDS;
/** Client source addresses added to kip-client's eth0: enough that each hash bucket family gets some. */
const SOURCES = Array.from({ length: 24 }, (_, i) => `10.250.0.${10 + i}`);

const service = (name: string, ip: string, scheduler?: string) => `---
apiVersion: v1
kind: Service
metadata: {name: ${name}, namespace: demo${scheduler ? `, annotations: {kube-ipvs-proxy.io/scheduler: ${scheduler}}` : ''}}
spec: {clusterIP: ${ip}, clusterIPs: [${ip}], ports: [{name: http, port: 80, targetPort: 8080}]}
`;
type Conditions = { ready: boolean; serving: boolean; terminating: boolean };
const READY: Conditions = { ready: true, serving: true, terminating: false };
const TERMINATING: Conditions = { ready: false, serving: true, terminating: true };
const slice = (svc: string, eps: Partial<Record<Backend, Conditions>>) => `---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: ${svc}-1, namespace: demo, labels: {kubernetes.io/service-name: ${svc}}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
${Object.entries(eps).map(([b, c]) => `- {addresses: [${BACKENDS[b as Backend]}], nodeName: kip-node, conditions: ${JSON.stringify(c)}}`).join('\n')}
`;
const ALL_READY = { be1: READY, be2: READY, be3: READY };

// Runs in kip-client: one HTTP request per source address (a new connection each); prints a JSON
// object source -> the backend that answered, or ERR:<code>.
const FAN_OUT = `
const [host, ...sources] = process.argv.slice(1);
const one = (src) => new Promise((done) => {
  const req = require('node:http').get({ host, port: 80, localAddress: src, agent: false, timeout: 3000 }, (res) => {
    let body = '';
    res.setEncoding('utf8').on('data', (d) => (body += d)).on('end', () => done(body.split(' ')[0]));
  });
  req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })));
  req.on('error', (e) => done('ERR:' + (e.code || e.message)));
});
(async () => {
  const out = {};
  for (const s of sources) out[s] = await one(s);
  process.stdout.write(JSON.stringify(out));
})();
`;

/** One new connection per source address to VIP:80: source -> backend (or ERR:code). */
function fanOut(vip: string): Record<string, string> {
  return JSON.parse(sh('ip', 'netns', 'exec', 'kip-client', process.execPath, '-e', FAN_OUT, vip, ...SOURCES)) as Record<string, string>;
}

// Runs in kip-client: holds one keep-alive connection from SRC to HOST:80; a line "again" sends a
// request on it (prints the backend), "reset" ends it with a RST, "close" with a FIN.
const HOLD = `
const [host, src] = process.argv.slice(1);
const socket = require('node:net').connect({ host, port: 80, localAddress: src || undefined });
let buf = '';
const waiting = [];
socket.setEncoding('utf8');
socket.on('data', (d) => {
  buf += d;
  for (;;) {
    const end = buf.indexOf('\\r\\n\\r\\n');
    if (end < 0) return;
    const len = Number(/content-length: (\\d+)/i.exec(buf.slice(0, end))?.[1] ?? 0);
    if (buf.length < end + 4 + len) return;
    const body = buf.slice(end + 4, end + 4 + len);
    buf = buf.slice(end + 4 + len);
    waiting.shift()?.(body.split(' ')[0]);
  }
});
socket.on('error', (e) => { console.log('error:' + e.code); process.exit(1); });
const ask = () => new Promise((r) => { waiting.push(r); socket.write('GET / HTTP/1.1\\r\\nHost: x\\r\\nConnection: keep-alive\\r\\n\\r\\n'); });
socket.on('connect', async () => {
  console.log(await ask());
  for await (const line of require('node:readline').createInterface({ input: process.stdin })) {
    if (line === 'reset') { socket.resetAndDestroy(); console.log('reset'); break; }
    if (line === 'close') { socket.end(); console.log('closed'); break; }
    console.log(await Promise.race([ask(), new Promise((r) => setTimeout(() => r('error:timeout'), 3000))]));
  }
  setTimeout(() => process.exit(0), 100);
});
setTimeout(() => process.exit(2), 10 * 60_000).unref();
`;

/** A connection held open from kip-client (optionally from a given source address). */
class Held {
  private readonly proc: ChildProcessWithoutNullStreams;
  private readonly lines: string[] = [];
  private waiter: ((l: string) => void) | null = null;
  constructor(vip: string, source = '') {
    this.proc = spawn('ip', ['netns', 'exec', 'kip-client', process.execPath, '-e', HOLD, vip, source]);
    createInterface({ input: this.proc.stdout }).on('line', (l) => (this.waiter ? (this.waiter(l), (this.waiter = null)) : this.lines.push(l)));
  }
  next(): Promise<string> {
    const l = this.lines.shift();
    return l !== undefined ? Promise.resolve(l) : new Promise((r) => (this.waiter = r));
  }
  send(line: 'again' | 'reset' | 'close'): Promise<string> {
    this.proc.stdin.write(`${line}\n`);
    return this.next();
  }
}

/** The real servers of VIP:80 as ipvsadm reads them: address -> weight and connection counts. */
function realServers(vip: string): Map<string, { weight: number; conns: number }> {
  const out = new Map<string, { weight: number; conns: number }>();
  for (const line of sh('ipvsadm', '-Ln', '--exact', '-t', `${vip}:80`).split('\n')) {
    const m = /^\s+->\s+([\d.]+):8080\s+\w+\s+(\d+)\s+(\d+)\s+(\d+)/.exec(line);
    if (m) out.set(m[1]!, { weight: Number(m[2]), conns: Number(m[3]) + Number(m[4]) });
  }
  return out;
}

let manifests: Manifests;
let d: Daemon;

beforeAll(async () => {
  demoNetworkUp();
  for (const a of SOURCES) sh('ip', '-n', 'kip-client', 'addr', 'add', `${a}/24`, 'dev', 'eth0');
  manifests = new Manifests();
  manifests.write('draining.yaml', [service('drain', '10.96.0.70'), slice('drain', { be1: READY, be2: READY })].join(''));
  manifests.write('hashed.yaml', [service('by-sh', '10.96.0.71', 'sh'), slice('by-sh', ALL_READY), service('by-mh', '10.96.0.72', 'mh'), slice('by-mh', ALL_READY)].join(''));
  // A periodic sync and a graceful timeout far beyond the test: only the drain check can delete.
  d = new Daemon(['--manifests', manifests.dir, '--hostname-override', 'kip-node', '--cluster-cidr', '10.244.0.0/16', '--log-format', 'json',
    '--ipvs-min-sync-period', '100ms', '--ipvs-sync-period', '10m', '--graceful-termination-timeout', '10m']);
  d.start();
  await d.healthy();
});

afterAll(async () => {
  await d?.stop();
  execFileSync('sh', ['-c', `sh ${REPO}examples/demo/network.sh down; ${process.execPath} ${CLI} cleanup >/dev/null 2>&1; true`]);
  manifests?.remove();
});

describe('a drained real server', () => {
  it('is deleted within 2.5 s of its last connection, with no sync due (period 10 m)', async () => {
    const held = new Held('10.96.0.70');
    const victim = (await held.next()) as Backend;
    const ip = BACKENDS[victim];
    const keep = victim === 'be1' ? 'be2' : 'be1';
    manifests.write('draining.yaml', [service('drain', '10.96.0.70'), slice('drain', { [keep]: READY })].join(''));
    await waitFor('the removed endpoint at weight 0', () => realServers('10.96.0.70').get(ip)?.weight === 0);
    expect(await held.send('again')).toBe(victim); // the open connection still works
    // Still there while its connection is open, across several drain checks.
    await new Promise((r) => setTimeout(r, 2500));
    expect(realServers('10.96.0.70').get(ip)).toMatchObject({ weight: 0, conns: 1 });

    // A reset connection leaves IPVS's entry in CLOSE for 10 s; the count then reads 0.
    expect(await held.send('reset')).toBe('reset');
    let lastBusy = Date.now();
    let gone: number | null = null;
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      const rs = realServers('10.96.0.70').get(ip);
      const at = Date.now();
      if (rs === undefined) {
        gone = at;
        break;
      }
      if (rs.conns > 0) lastBusy = at;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(gone, `${ip} still a real server 30 s after its connection was reset`).not.toBeNull();
    expect(gone! - lastBusy).toBeLessThanOrEqual(2500);
    await waitFor('the deletion in the log', () => /"msg":"drained real servers deleted"/.test(d.log), 5000);
  });
});

describe.each(['sh', 'mh'] as const)('%s with a draining real server', (scheduler) => {
  const vip = scheduler === 'sh' ? '10.96.0.71' : '10.96.0.72';
  const name = `by-${scheduler}`;

  it(`sets ${scheduler}-fallback: no client is refused while a real server is ready, none reaches the weight-0 one`, async () => {
    const before = fanOut(vip);
    expect(Object.values(before).filter((b) => b.startsWith('ERR')), JSON.stringify(before)).toEqual([]);
    // The draining server must be one some clients hash to: the first source's backend.
    const victim = before[SOURCES[0]!] as Backend;
    const hashedToVictim = SOURCES.filter((s) => before[s] === victim);
    const held = new Held(vip, SOURCES[0]);
    expect(await held.next()).toBe(victim);

    const others = Object.fromEntries(Object.keys(BACKENDS).map((b) => [b, b === victim ? TERMINATING : READY]));
    const slices = (eps: Record<string, Conditions>) => [service('by-sh', '10.96.0.71', 'sh'), slice('by-sh', scheduler === 'sh' ? eps : ALL_READY), service('by-mh', '10.96.0.72', 'mh'), slice('by-mh', scheduler === 'mh' ? eps : ALL_READY)].join('');
    manifests.write('hashed.yaml', slices(others));
    await waitFor('the terminating endpoint at weight 0', () => realServers(vip).get(BACKENDS[victim])?.weight === 0);

    const after = fanOut(vip);
    expect(Object.values(after).filter((b) => b.startsWith('ERR')), `refused or lost while other real servers are ready: ${JSON.stringify(after)}`).toEqual([]);
    expect(Object.values(after)).not.toContain(victim);
    // Clients that hashed elsewhere stay where they were (only the draining server's are moved).
    for (const s of SOURCES.filter((x) => !hashedToVictim.includes(x))) expect(after[s], s).toBe(before[s]);
    expect(await held.send('again')).toBe(victim); // its established connection keeps working
    expect(realServers(vip).get(BACKENDS[victim])).toMatchObject({ weight: 0 });
    expect(sh('ipvsadm', '-Sn')).toContain(`-A -t ${vip}:80 -s ${scheduler} -b ${scheduler}-fallback`);

    expect(await held.send('close')).toBe('closed');
    manifests.write('hashed.yaml', slices(ALL_READY));
    await waitFor(`${name}'s real servers back at weight 1`, () => [...realServers(vip).values()].filter((r) => r.weight === 1).length === 3);
  });
});
