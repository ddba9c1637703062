// The sysctls the proxiers keep: kube-proxy's IPVS-mode ones and its conntrack settings
// (cmd/kube-proxy/app/conntrack.go), written through applySysctls into a stand-in /proc/sys.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { defaultConfig, parseArgs } from '../../src/config.js';
import { applySysctls, conntrackSysctls, ipvsSysctls } from '../../src/proxy/ipvs/sysctl.js';

const conntrack = (...argv: string[]) => parseArgs(argv, { readFile: () => '' }).config.conntrack;
const brief = (s: ReturnType<typeof conntrackSysctls>) => s.map((x) => `${x.key}=${x.value}${x.raiseOnly ? ' (raise)' : ''}${x.onlyIfWritable ? ' (if writable)' : ''}`);

describe('conntrackSysctls: kube-proxy\'s semantics', () => {
  it('defaults: nf_conntrack_max = max(32768 x CPUs, 131072), hash size a quarter of it, TCP timeouts 24h and 1h', () => {
    expect(brief(conntrackSysctls(defaultConfig().conntrack, 2))).toEqual([
      'net/netfilter/nf_conntrack_max=131072 (if writable)',
      '/sys/module/nf_conntrack/parameters/hashsize=32768 (raise) (if writable)',
      'net/netfilter/nf_conntrack_tcp_timeout_established=86400',
      'net/netfilter/nf_conntrack_tcp_timeout_close_wait=3600',
    ]);
    expect(conntrackSysctls(defaultConfig().conntrack, 8)[0]!.value).toBe('262144'); // per core wins over the minimum
  });

  it('every flag; 0 leaves a setting alone (no nf_conntrack_max at all for --conntrack-max-per-core 0)', () => {
    const c = conntrack('--conntrack-max-per-core=0', '--conntrack-tcp-timeout-established=0', '--conntrack-tcp-timeout-close-wait=90s', '--conntrack-tcp-be-liberal',
      '--conntrack-udp-timeout=10s', '--conntrack-udp-timeout-stream=2m');
    expect(brief(conntrackSysctls(c, 4))).toEqual([
      'net/netfilter/nf_conntrack_tcp_timeout_close_wait=90',
      'net/netfilter/nf_conntrack_tcp_be_liberal=1',
      'net/netfilter/nf_conntrack_udp_timeout=10',
      'net/netfilter/nf_conntrack_udp_timeout_stream=120',
    ]);
    expect(conntrackSysctls(conntrack('--conntrack-max-per-core=1000', '--conntrack-min=5000'), 2)[0]!.value).toBe('5000');
  });
});

describe('applySysctls', () => {
  let root: string;
  const proc = () => join(root, 'proc');
  const sys = () => join(root, 'sys');
  const put = (path: string, value: string) => {
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, `${value}\n`);
  };
  const read = (path: string) => readFileSync(path, 'utf8').trim();
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'kip-sysctl-'));
    put(join(proc(), 'net/netfilter/nf_conntrack_max'), '8192');
    put(join(proc(), 'net/netfilter/nf_conntrack_tcp_timeout_established'), '432000');
    put(join(proc(), 'net/netfilter/nf_conntrack_tcp_timeout_close_wait'), '60');
    put(join(sys(), 'module/nf_conntrack/parameters/hashsize'), '8192');
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('writes what differs: nf_conntrack_max, the raised hash size (a module parameter under /sys), the timeouts', () => {
    expect(applySysctls(conntrackSysctls(defaultConfig().conntrack, 1), proc(), sys())).toEqual([]);
    expect(read(join(proc(), 'net/netfilter/nf_conntrack_max'))).toBe('131072');
    expect(read(join(sys(), 'module/nf_conntrack/parameters/hashsize'))).toBe('32768');
    expect(read(join(proc(), 'net/netfilter/nf_conntrack_tcp_timeout_established'))).toBe('86400');
    expect(read(join(proc(), 'net/netfilter/nf_conntrack_tcp_timeout_close_wait'))).toBe('3600');
  });

  it('never lowers the hash size', () => {
    put(join(sys(), 'module/nf_conntrack/parameters/hashsize'), '65536');
    applySysctls(conntrackSysctls(defaultConfig().conntrack, 1), proc(), sys());
    expect(read(join(sys(), 'module/nf_conntrack/parameters/hashsize'))).toBe('65536');
  });

  it('skips nf_conntrack_max and the hash size where nf_conntrack_max is not writable (a netns), without a failure', () => {
    // procfs answers access(W_OK) from the sysctl's mode (0444 outside the initial netns); root
    // could write a 0444 file here, so the gate is stood in by a key that cannot be written.
    const settings = conntrackSysctls(defaultConfig().conntrack, 1).filter((s) => s.onlyIfWritable !== undefined);
    expect(settings).toHaveLength(2);
    const gated = settings.map((s) => ({ ...s, onlyIfWritable: 'net/netfilter/no-such-sysctl' }));
    expect(applySysctls(gated, proc(), sys())).toEqual([]);
    expect(read(join(proc(), 'net/netfilter/nf_conntrack_max'))).toBe('8192');
    expect(read(join(sys(), 'module/nf_conntrack/parameters/hashsize'))).toBe('8192');
  });

  it('reports what it cannot write, naming the key', () => {
    const failed = applySysctls([{ key: 'net/netfilter/nf_conntrack_udp_timeout', value: '10', reason: 'x' }], proc(), sys());
    expect(failed.map((f) => [f.key, /ENOENT/.test(f.error)])).toEqual([['net/netfilter/nf_conntrack_udp_timeout', true]]);
  });

  it('the IPVS-mode sysctls: strict ARP adds arp_ignore=1 and arp_announce=2 on all', () => {
    const keys = (strictARP: boolean) => ipvsSysctls({ strictARP, kernel: '6.1.0' }).map((s) => `${s.key}=${s.value}`);
    expect(keys(true).filter((k) => k.includes('/arp_'))).toEqual(['net/ipv4/conf/all/arp_ignore=1', 'net/ipv4/conf/all/arp_announce=2']);
    expect(keys(false).filter((k) => k.includes('/arp_'))).toEqual([]);
  });
});
