import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, defaultConfig, parseArgs, parseKubeProxyConfiguration } from '../../src/config.js';

const HEAD = 'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n';

// What `kubeadm init` writes to the kube-proxy ConfigMap (config.conf), zero values included.
const KUBEADM = `${HEAD}bindAddress: 0.0.0.0
bindAddressHardFail: false
clientConnection:
  acceptContentTypes: ""
  burst: 0
  contentType: ""
  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
  qps: 0
clusterCIDR: 10.244.0.0/16
configSyncPeriod: 0s
conntrack:
  maxPerCore: null
  min: null
  tcpBeLiberal: false
  tcpCloseWaitTimeout: null
  tcpEstablishedTimeout: null
  udpStreamTimeout: 0s
  udpTimeout: 0s
detectLocal:
  bridgeInterface: ""
  interfaceNamePrefix: ""
detectLocalMode: ""
enableProfiling: false
healthzBindAddress: ""
hostnameOverride: ""
iptables:
  localhostNodePorts: null
  masqueradeAll: false
  masqueradeBit: null
  minSyncPeriod: 0s
  syncPeriod: 0s
ipvs:
  excludeCIDRs: null
  minSyncPeriod: 0s
  scheduler: ""
  strictARP: false
  syncPeriod: 0s
  tcpFinTimeout: 0s
  tcpTimeout: 0s
  udpTimeout: 0s
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
metricsBindAddress: ""
mode: ""
nftables:
  masqueradeAll: false
  masqueradeBit: null
  minSyncPeriod: 0s
  syncPeriod: 0s
nodePortAddresses: null
oomScoreAdj: null
portRange: ""
showHiddenMetricsForVersion: ""
winkernel:
  enableDSR: false
  forwardHealthCheckVip: false
  networkName: ""
  rootHnsEndpointName: ""
  sourceVip: ""
`;

const TUNED = `${HEAD}mode: ipvs
hostnameOverride: Worker-7
bindAddress: 10.0.0.7
healthzBindAddress: 0.0.0.0:20256
metricsBindAddress: "[::]:20249"
clusterCIDR: 10.244.0.0/16,fd00:10:244::/56
nodePortAddresses: [10.0.0.0/24]
clientConnection:
  kubeconfig: /etc/kp/kubeconfig
logging:
  format: text
  verbosity: 2
iptables:
  masqueradeAll: true
  masqueradeBit: 12
ipvs:
  scheduler: lc
  syncPeriod: 1m
  minSyncPeriod: 5s
  excludeCIDRs: [192.168.0.0/16]
  strictARP: true
  tcpTimeout: 2h
  tcpFinTimeout: 30s
  udpTimeout: 10s
conntrack:
  maxPerCore: 0
  min: 1000
  tcpEstablishedTimeout: 2h
  tcpCloseWaitTimeout: 0s
  tcpBeLiberal: true
  udpTimeout: 15s
  udpStreamTimeout: 1m
`;

/** parseArgs with an in-memory file system. */
function withFiles(files: Record<string, string>, ...argv: string[]) {
  return parseArgs(argv, { readFile: (p) => {
    const text = files[p];
    if (text === undefined) throw new Error(`ENOENT: no such file or directory, open '${p}'`);
    return text;
  } });
}

function issues(files: Record<string, string>, ...argv: string[]): readonly string[] {
  try {
    withFiles(files, ...argv);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).issues;
  }
  throw new Error('accepted');
}

const fileIssues = (body: string) => issues({ '/kp.yaml': HEAD + body }, '--config=/kp.yaml');

describe('--config KubeProxyConfiguration', () => {
  it("accepts kubeadm's file, zero values meaning the defaults, without warnings", () => {
    const r = withFiles({ '/c.conf': KUBEADM }, '--config', '/c.conf');
    expect(r.warnings).toEqual([]);
    expect(r.config).toEqual({
      ...defaultConfig(),
      bindAddress: '0.0.0.0',
      clusterCIDRs: ['10.244.0.0/16'],
      kubeconfig: '/var/lib/kube-proxy/kubeconfig.conf',
      configFile: '/c.conf',
    });
  });

  it('maps every corresponding field', () => {
    expect(withFiles({ '/t.yaml': TUNED }, '--config=/t.yaml').config).toEqual({
      ...defaultConfig(),
      mode: 'ipvs',
      hostnameOverride: 'worker-7',
      bindAddress: '10.0.0.7',
      healthzBindAddress: { host: '0.0.0.0', port: 20256 },
      metricsBindAddress: { host: '::', port: 20249 },
      clusterCIDRs: ['10.244.0.0/16', 'fd00:10:244::/56'],
      nodePortAddresses: ['10.0.0.0/24'],
      kubeconfig: '/etc/kp/kubeconfig',
      log: { format: 'text', verbosity: 2 },
      masqueradeAll: true,
      masqueradeBit: 12,
      syncPeriodMs: 60_000,
      minSyncPeriodMs: 5_000,
      ipvs: { scheduler: 'lc', excludeCIDRs: ['192.168.0.0/16'], strictARP: true, addressBinding: 'route', tcpTimeoutMs: 7_200_000, tcpFinTimeoutMs: 30_000, udpTimeoutMs: 10_000 },
      // 0 is kept (leave the kernel's value), as kube-proxy's pointer fields; null would be the default.
      conntrack: { maxPerCore: 0, min: 1000, tcpEstablishedTimeoutMs: 7_200_000, tcpCloseWaitTimeoutMs: 0, tcpBeLiberal: true, udpTimeoutMs: 15_000, udpStreamTimeoutMs: 60_000 },
      configFile: '/t.yaml',
    });
  });

  it('reads JSON as well', () => {
    const json = JSON.stringify({ apiVersion: 'kubeproxy.config.k8s.io/v1alpha1', kind: 'KubeProxyConfiguration', ipvs: { scheduler: 'sh', excludeCIDRs: ['10.0.0.0/8'] } });
    expect(withFiles({ '/c.json': json }, '--config=/c.json').config.ipvs).toMatchObject({ scheduler: 'sh', excludeCIDRs: ['10.0.0.0/8'] });
  });

  it('lets explicit flags override the file, field by field, whatever their order', () => {
    const c = withFiles({ '/t.yaml': TUNED }, '--ipvs-scheduler=wrr', '--config=/t.yaml', '--ipvs-exclude-cidrs=10.9.0.0/16', '--masquerade-all=false', '-v', '0', '--metrics-bind-address=').config;
    expect(c.ipvs).toMatchObject({ scheduler: 'wrr', excludeCIDRs: ['10.9.0.0/16'], strictARP: true });
    expect(c).toMatchObject({ masqueradeAll: false, masqueradeBit: 12, log: { format: 'text', verbosity: 0 }, metricsBindAddress: null, syncPeriodMs: 60_000 });
  });

  it("uses iptables.syncPeriod in iptables mode and ipvs.syncPeriod otherwise, as kube-proxy", () => {
    const body = 'ipvs:\n  syncPeriod: 10s\n  minSyncPeriod: 2s\niptables:\n  syncPeriod: 20s\n  minSyncPeriod: 3s\n';
    expect(withFiles({ '/a': HEAD + body }, '--config=/a').config).toMatchObject({ syncPeriodMs: 10_000, minSyncPeriodMs: 2_000 });
    expect(withFiles({ '/a': `${HEAD}mode: iptables\n${body}` }, '--config=/a').config).toMatchObject({ syncPeriodMs: 20_000, minSyncPeriodMs: 3_000 });
    expect(withFiles({ '/a': HEAD + body }, '--config=/a', '--proxy-mode=iptables', '--iptables-sync-period=40s').config).toMatchObject({ syncPeriodMs: 40_000, minSyncPeriodMs: 3_000 });
  });

  it('warns about set fields it ignores, and names them', () => {
    const r = withFiles({ '/w': `${HEAD}detectLocalMode: InterfaceNamePrefix\ndetectLocal:\n  interfaceNamePrefix: veth\nfeatureGates:\n  SomeGate: true\niptables:\n  localhostNodePorts: true\noomScoreAdj: -999\n` }, '--config=/w');
    expect(r.warnings).toEqual([
      '/w: featureGates.SomeGate: not supported by kube-ipvs-proxy, ignored',
      '/w: detectLocalMode: not supported by kube-ipvs-proxy, ignored',
      '/w: detectLocal.interfaceNamePrefix: not supported by kube-ipvs-proxy, ignored',
      '/w: oomScoreAdj: not supported by kube-ipvs-proxy, ignored',
    ]);
    expect(withFiles({ '/w': `${HEAD}detectLocalMode: ClusterCIDR\n` }, '--config=/w').warnings).toEqual([]);
  });

  it('reads a real file from disk', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kp-config-'));
    try {
      const file = join(dir, 'config.yaml');
      writeFileSync(file, `${HEAD}ipvs:\n  scheduler: mh\n`);
      expect(parseArgs([`--config=${file}`]).config).toMatchObject({ ipvs: { scheduler: 'mh' }, configFile: file });
      expect(() => parseArgs([`--config=${join(dir, 'missing.yaml')}`])).toThrow(/^--config: cannot read .*missing\.yaml: ENOENT/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('--config errors name the file and the field path', () => {
  it.each([
    ['ipvs:\n  scheduler: foo\n', '/kp.yaml: ipvs.scheduler: unknown scheduler "foo" (valid: rr, wrr, lc, wlc, lblc, lblcr, dh, sh, sed, nq, mh, fo, ovf, twos)'],
    ['ipvs:\n  excludeCIDRs: [10.0.0.0/8, nope]\n', '/kp.yaml: ipvs.excludeCIDRs[1]: invalid CIDR "nope"'],
    ['nodePortAddresses: [10.0.0.0/8, primary]\n', '/kp.yaml: nodePortAddresses[1]: "primary" must be the only value'],
    ['clusterCIDR: 10.0.0.0/8,10.1.0.0/8\n', '/kp.yaml: clusterCIDR: at most one CIDR per IP family (a dual-stack pair)'],
    ['ipvs:\n  syncPeriod: 1x\n', '/kp.yaml: ipvs.syncPeriod: invalid duration "1x" (use Go syntax, e.g. 30s, 1m30s, 500ms)'],
    ['ipvs:\n  syncPeriod: 30\n', '/kp.yaml: ipvs.syncPeriod: expected string, got 30'],
    ['ipvs:\n  minSyncPeriod: 1m\n', '/kp.yaml: ipvs.minSyncPeriod: 1m must not exceed the sync period (30s)'],
    ['ipvs:\n  tcpTimeout: -1s\n', '/kp.yaml: ipvs.tcpTimeout: duration "-1s" must not be negative'],
    ['ipvs:\n  strictARP: "yes"\n', '/kp.yaml: ipvs.strictARP: expected boolean, got "yes"'],
    ['iptables:\n  masqueradeBit: 40\n', '/kp.yaml: iptables.masqueradeBit: must be within [0, 31]'],
    ['healthzBindAddress: localhost:1\n', '/kp.yaml: healthzBindAddress: invalid address "localhost:1": "localhost" is not an IP address'],
    ['mode: nftables\n', '/kp.yaml: mode: unknown proxy mode "nftables" (valid: ipvs, iptables)'],
    ['logging:\n  format: xml\n', '/kp.yaml: logging.format: unknown log format "xml" (valid: json, text)'],
    ['ipvs:\n  excludeCIDRs: 10.0.0.0/8\n', '/kp.yaml: ipvs.excludeCIDRs: expected array, got "10.0.0.0/8"'],
    ['ipvs: []\n', '/kp.yaml: ipvs: expected object, got []'],
  ])('%j', (body, message) => {
    expect(fileIssues(body)).toEqual([message]);
  });

  it('rejects unknown fields with their path', () => {
    expect(fileIssues('ipvs:\n  schedular: rr\n  bogus: 1\nconntrack:\n  maxPerCore: 0\n  nope: 1\ntopLevel: 1\n')).toEqual([
      '/kp.yaml: ipvs.schedular: unknown field',
      '/kp.yaml: ipvs.bogus: unknown field',
      '/kp.yaml: conntrack.nope: unknown field',
      '/kp.yaml: topLevel: unknown field',
    ]);
  });

  it('requires the v1alpha1 apiVersion and kind', () => {
    expect(issues({ '/a': 'apiVersion: v1\nkind: ConfigMap\n' }, '--config=/a')).toEqual([
      '/a: apiVersion: expected "kubeproxy.config.k8s.io/v1alpha1", got "v1"',
      '/a: kind: expected "KubeProxyConfiguration", got "ConfigMap"',
    ]);
    expect(issues({ '/a': 'kind: KubeProxyConfiguration\n' }, '--config=/a')).toEqual(['/a: apiVersion: expected "kubeproxy.config.k8s.io/v1alpha1", got nothing']);
  });

  it('reports malformed documents', () => {
    expect(issues({ '/a': 'ipvs: [\n' }, '--config=/a')[0]).toMatch(/^\/a: invalid YAML: .* at line 2, column 1$/);
    expect(issues({ '/a': `${HEAD}mode: a\nmode: b\n` }, '--config=/a')[0]).toBe('/a: invalid YAML: duplicated mapping key at line 4, column 1');
    expect(issues({ '/a': '' }, '--config=/a')).toEqual(['/a: expected a KubeProxyConfiguration object']);
    expect(issues({ '/a': '- 1\n' }, '--config=/a')).toEqual(['/a: expected a KubeProxyConfiguration object']);
  });

  it('reports file and flag problems together', () => {
    expect(issues({ '/kp.yaml': `${HEAD}ipvs:\n  scheduler: foo\n` }, '--config=/kp.yaml', '--masquerade-bit=99', '--bogus')).toEqual([
      'unknown flag --bogus',
      expect.stringMatching(/^\/kp\.yaml: ipvs\.scheduler: unknown scheduler "foo"/),
      '--iptables-masquerade-bit: must be within [0, 31]',
    ]);
  });

  it('can be used without parseArgs', () => {
    const { layer, warnings } = parseKubeProxyConfiguration(`${HEAD}ipvs:\n  scheduler: dh\n`, 'x.yaml');
    expect(warnings).toEqual([]);
    expect(layer.toInput()).toEqual({ ipvs: { scheduler: 'dh' } });
  });
});
