// kube-proxy's conntrack settings on the host kernel, in a fresh network namespace: the timeouts
// and tcp_be_liberal are per netns (written here, by flags and by a KubeProxyConfiguration file),
// nf_conntrack_max and the hash size are global and read-only outside the initial netns (skipped,
// no error, the host's values untouched; test/kernel/uml/conntrack.test.ts sets them). The IPVS
// proxier puts back a timeout changed behind its back at its periodic verification.
import { assertIsolated } from '../lib/guard.js';
assertIsolated();

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';

import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ConfigSchema } from '../../../src/config.js';
import { FakeIpsetClient } from '../../../src/kernel/ipset/fake.js';
import { FakeIpvsClient } from '../../../src/kernel/ipvs/fake.js';
import { FakeLinkClient } from '../../../src/kernel/link.js';
import { IpvsProxier } from '../../../src/proxy/ipvs/proxier.js';
import { CLI } from '../lib/daemon.js';
import { fakeIptables } from '../../unit/lib/fake-iptables.js';

const NF = '/proc/sys/net/netfilter';
const KEYS = ['nf_conntrack_tcp_timeout_established', 'nf_conntrack_tcp_timeout_close_wait', 'nf_conntrack_tcp_be_liberal', 'nf_conntrack_udp_timeout', 'nf_conntrack_udp_timeout_stream'];
const read = (path: string) => readFileSync(path, 'utf8').trim();
const values = () => Object.fromEntries(KEYS.map((k) => [k, Number(read(`${NF}/${k}`))]));
const write = (key: string, value: number) => writeFileSync(`${NF}/${key}`, String(value));
const globals = () => ({ max: read(`${NF}/nf_conntrack_max`), hashsize: read('/sys/module/nf_conntrack/parameters/hashsize') });

let before: Record<string, number>;
let host: ReturnType<typeof globals>;
let dir: string;
beforeAll(() => {
  before = values();
  host = globals();
  dir = mkdtempSync(join(tmpdir(), 'kip-ct-'));
  writeFileSync(join(dir, 'none.yaml'), '');
});
afterAll(() => {
  for (const [k, v] of Object.entries(before ?? {})) write(k, v);
  // What the --once runs programmed in this namespace (the netns phase shares it between files).
  execFileSync(process.execPath, [CLI, 'cleanup'], { stdio: 'ignore', env: { ...process.env, KUBE_IPVS_PROXY_STATE_DIR: dir } });
  rmSync(dir, { recursive: true, force: true });
});

/** `--once` of the built daemon (iptables mode here: the host has no IPVS); its output. */
function once(...args: string[]): string {
  return execFileSync(process.execPath, [CLI, '--once', '--manifests', join(dir, 'none.yaml'), '--hostname-override', 'kip-node', '--log-format', 'text', '--healthz-bind-address=', '--metrics-bind-address=', ...args], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, KUBE_IPVS_PROXY_STATE_DIR: dir },
  });
}

describe('conntrack settings, per network namespace', () => {
  it('the flags set the timeouts and tcp_be_liberal; nf_conntrack_max and the hash size (global, read-only here) are skipped without an error', () => {
    const out = once('--conntrack-tcp-timeout-established=2h', '--conntrack-tcp-timeout-close-wait=90s', '--conntrack-tcp-be-liberal',
      '--conntrack-udp-timeout=7s', '--conntrack-udp-timeout-stream=70s', '--conntrack-max-per-core=65536');
    expect(values()).toEqual({ nf_conntrack_tcp_timeout_established: 7200, nf_conntrack_tcp_timeout_close_wait: 90, nf_conntrack_tcp_be_liberal: 1, nf_conntrack_udp_timeout: 7, nf_conntrack_udp_timeout_stream: 70 });
    expect(globals()).toEqual(host);
    expect(out).not.toMatch(/nf_conntrack_max|hashsize|cannot set/);
  });

  it('a KubeProxyConfiguration file sets the same fields; 0 leaves a setting as it is; without either, kube-proxy\'s defaults (24h, 1h)', () => {
    write('nf_conntrack_udp_timeout', 30);
    const file = join(dir, 'kube-proxy.yaml');
    writeFileSync(file, ['apiVersion: kubeproxy.config.k8s.io/v1alpha1', 'kind: KubeProxyConfiguration', 'conntrack:', '  tcpEstablishedTimeout: 3h', '  tcpCloseWaitTimeout: 0s', '  udpStreamTimeout: 100s', ''].join('\n'));
    once('--config', file);
    expect(values()).toMatchObject({ nf_conntrack_tcp_timeout_established: 10800, nf_conntrack_tcp_timeout_close_wait: 90, nf_conntrack_udp_timeout: 30, nf_conntrack_udp_timeout_stream: 100 });
    once();
    expect(values()).toMatchObject({ nf_conntrack_tcp_timeout_established: 86400, nf_conntrack_tcp_timeout_close_wait: 3600 });
    expect(globals()).toEqual(host);
  });

  it('the IPVS proxier re-ensures them at its periodic verification', async () => {
    const logs: Array<Record<string, unknown>> = [];
    const logger = pino({ level: 'info' }, new Writable({ write: (c: Buffer, _e, done) => (logs.push(JSON.parse(c.toString())), done()) }));
    const config = ConfigSchema.parse({ conntrack: { udpTimeoutMs: 11_000 }, syncPeriodMs: 3_600_000, metricsBindAddress: null, healthzBindAddress: null });
    const proxier = new IpvsProxier({
      config,
      nodeName: 'kip-node',
      logger,
      dummyName: 'kube-ipvs0',
      clients: { ipvs: new FakeIpvsClient(), ipset: new FakeIpsetClient(), link: new FakeLinkClient(), iptables: { ipv4: fakeIptables().ipt, ipv6: null } },
      conntrack: async () => undefined,
    });
    try {
      proxier.handler(() => {}).onSynced();
      await proxier.sync();
      expect(values()).toMatchObject({ nf_conntrack_tcp_timeout_established: 86400, nf_conntrack_udp_timeout: 11 });
      write('nf_conntrack_udp_timeout', 30);
      write('nf_conntrack_tcp_timeout_established', 432000);
      await proxier.sync({ periodic: true });
      await proxier.verified();
      expect(values()).toMatchObject({ nf_conntrack_tcp_timeout_established: 86400, nf_conntrack_udp_timeout: 11 });
      const reported = logs.filter((l) => /nf_conntrack|hashsize/.test(String(l.object ?? '')));
      expect(reported).toEqual([]);
      expect(globals()).toEqual(host);
    } finally {
      proxier.close();
    }
  });
});
