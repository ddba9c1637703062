// Health-check node ports (externalTrafficPolicy: Local Services) inside UML, in IPVS mode:
// `--once` exits after its sync although it opened one, and a port something else already holds
// on an IPv6 node address (kubernetes#109052: a panic in kube-proxy's IPVS mode) is one line
// naming the Service, while IPv4 clients of that port, every other Service's port and the
// virtual servers are still served.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { fromClient } from '../lib/clients.js';
import { CLI, Daemon, Manifests, demoNetworkUp, demoTeardown, waitFor } from '../lib/daemon.js';
import { backendIP, demoService, demoSlice, docs } from '../lib/demo-manifests.js';
import { assertIsolated } from '../lib/guard.js';

assertIsolated();

const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const ARGS = ['--hostname-override', 'kip-node', '--cluster-cidr', '10.244.0.0/16', '--log-format', 'json'];
const NODE6 = 'fd00:250::1';
const CLIENT6 = 'fd00:250::2';

/** An eTP Local LoadBalancer Service with its health-check node port, and its endpoints (be1, on this node). */
const localLb = (name: string, ip: string, lb: string, nodePort: number, hcPort: number) =>
  docs(
    demoService(
      name,
      { type: 'LoadBalancer', clusterIP: ip, clusterIPs: [ip], externalTrafficPolicy: 'Local', healthCheckNodePort: hcPort, ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080, nodePort }] },
      { lb },
    ),
    demoSlice(name, [{ address: backendIP(1) }]),
  );

/** GET http://HOST:PORT/ from kip-client: status and the JSON body, or ERR:<code>. */
function probe(host: string, port: number): { status: number; body: { service?: { name: string }; localEndpoints?: number } } | string {
  const js = `require('node:http').get({ host: process.argv[1], port: Number(process.argv[2]), timeout: 3000 }, (r) => { let b = ''; r.on('data', (d) => (b += d)).on('end', () => process.stdout.write(JSON.stringify({ status: r.statusCode, body: JSON.parse(b) }))); }).on('error', (e) => process.stdout.write(JSON.stringify('ERR:' + e.code))).on('timeout', function () { this.destroy(Object.assign(new Error('t'), { code: 'TIMEOUT' })); });`;
  return JSON.parse(sh('ip', 'netns', 'exec', 'kip-client', process.execPath, '-e', js, host, String(port))) as ReturnType<typeof probe>;
}

let manifests: Manifests;

beforeAll(() => {
  demoNetworkUp();
  sh('ip', 'addr', 'add', `${NODE6}/64`, 'dev', 'kc0', 'nodad');
  sh('ip', '-n', 'kip-client', 'addr', 'add', `${CLIENT6}/64`, 'dev', 'eth0', 'nodad');
  manifests = new Manifests();
  manifests.write('local.yaml', localLb('hc-taken', '10.96.0.80', '10.250.0.210', 30180, 32011) + localLb('hc-free', '10.96.0.81', '10.250.0.211', 30181, 32012));
});

afterAll(() => demoTeardown({ manifests }));

describe('--once with a health-check node port', () => {
  it('programs, then exits 0 (the health-check listener is closed)', async () => {
    const child = spawn(process.execPath, [CLI, '--once', '--manifests', manifests.dir, ...ARGS], { stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    child.stdout.on('data', (d) => (log += d));
    child.stderr.on('data', (d) => (log += d));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    const timer = setTimeout(() => child.kill('SIGKILL'), 45_000);
    const code = await exited;
    clearTimeout(timer);
    expect(child.signalCode, `--once still running after 45 s:\n${log.slice(-2000)}`).toBeNull();
    expect(code).toBe(0);
    expect(sh('ipvsadm', '-Sn')).toContain('-A -t 10.250.0.210:80 -s rr');
  });
});

describe('a health-check node port already bound on an IPv6 node address', () => {
  let holder: ChildProcess;
  let d: Daemon;
  beforeAll(async () => {
    // Something else on the node listens on [fd00:250::1]:32011 before the daemon starts.
    holder = spawn(process.execPath, ['-e', `require('node:net').createServer((s) => s.end('holder')).listen(32011, '${NODE6}', () => console.log('ready'))`], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve) => holder.stdout!.on('data', (b) => String(b).includes('ready') && resolve()));
    d = new Daemon(['--manifests', manifests.dir, ...ARGS, '--ipvs-min-sync-period', '100ms', '--ipvs-sync-period', '5s']);
    d.start();
    await d.healthy();
  });
  afterAll(async () => {
    await d?.stop();
    holder?.kill();
  });

  const reports = () =>
    d.log.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { level: number; msg: string; object?: string; reason?: string }).filter((l) => l.object === 'Service demo/hc-taken');

  it('is reported once, in one line naming the Service and the reason; the daemon keeps running', async () => {
    await waitFor('the report', () => reports().length > 0);
    expect(reports()).toEqual([expect.objectContaining({ level: 50, reason: 'failed to start healthcheck on port 32011: [::]:32011: address already in use (EADDRINUSE)' })]);
    // Later syncs (a change, a periodic one) try again without reporting it again.
    manifests.write('other.yaml', localLb('hc-other', '10.96.0.82', '10.250.0.212', 30182, 32013));
    await waitFor('the new Service programmed', () => sh('ipvsadm', '-Sn').includes('-A -t 10.96.0.82:80'));
    await new Promise((r) => setTimeout(r, 6000));
    expect(reports()).toHaveLength(1);
    expect(d.exitCode()).toBeNull();
  });

  it('IPv4 clients of that port are answered; the other ports answer on both families', () => {
    expect(probe('10.250.0.1', 32011)).toEqual({ status: 200, body: expect.objectContaining({ service: { namespace: 'demo', name: 'hc-taken' }, localEndpoints: 1 }) });
    for (const host of ['10.250.0.1', NODE6]) {
      expect(probe(host, 32012), host).toEqual({ status: 200, body: expect.objectContaining({ service: { namespace: 'demo', name: 'hc-free' } }) });
    }
  });

  it('every Service is still served through IPVS, the one with the taken port included', () => {
    expect(fromClient(9, 'tcp:10.96.0.10:80')).toEqual({ be1: 3, be2: 3, be3: 3 });
    expect(fromClient(3, 'tcp:10.250.0.210:80')).toEqual({ be1: 3 });
    expect(fromClient(3, 'tcp:10.250.0.211:80')).toEqual({ be1: 3 });
  });
});
