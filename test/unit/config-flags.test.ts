import { describe, expect, it } from 'vitest';
import { ConfigError, FLAGS, UNSUPPORTED_KUBE_PROXY_FLAGS, defaultConfig, formatHelp, parseArgs } from '../../src/config.js';

const noFile = { readFile: (p: string): string => { throw new Error(`unexpected read of ${p}`); } };
const config = (...argv: string[]) => parseArgs(argv, noFile).config;

/** The issues parseArgs reports for argv (fails the test if it accepts it). */
function issues(...argv: string[]): readonly string[] {
  try {
    parseArgs(argv, noFile);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).issues;
  }
  throw new Error(`accepted ${JSON.stringify(argv)}`);
}

describe('parseArgs: values', () => {
  it('with no arguments runs the daemon with the defaults', () => {
    expect(parseArgs([], noFile)).toEqual({ command: 'run', config: defaultConfig(), json: false, inspect: { stats: false }, help: false, version: false, warnings: [] });
  });

  it('maps every kube-proxy flag to its Config field', () => {
    const c = config(
      '--proxy-mode=iptables', '--ipvs-scheduler=wrr', '--iptables-sync-period=1m', '--iptables-min-sync-period=2s',
      '--ipvs-tcp-timeout=15m', '--ipvs-tcpfin-timeout=2m', '--ipvs-udp-timeout=300s', '--ipvs-exclude-cidrs=10.0.0.0/8',
      '--ipvs-strict-arp', '--cluster-cidr=10.244.0.0/16,fd00:10:244::/56', '--masquerade-all', '--iptables-masquerade-bit=3',
      '--nodeport-addresses=primary', '--hostname-override=  Node-1.Example ', '--healthz-bind-address=127.0.0.1:1',
      '--metrics-bind-address=0.0.0.0', '--kubeconfig=/etc/kube/kubeconfig', '--master=https://10.0.0.1:6443',
      '--v=3', '--bind-address=10.1.2.3', '--conntrack-max-per-core=0', '--conntrack-min=1000', '--conntrack-tcp-timeout-established=2h',
      '--conntrack-tcp-timeout-close-wait=0', '--conntrack-tcp-be-liberal', '--conntrack-udp-timeout=15s', '--conntrack-udp-timeout-stream=1m',
    );
    expect(c).toMatchObject({
      mode: 'iptables',
      syncPeriodMs: 60_000,
      minSyncPeriodMs: 2_000,
      ipvs: { scheduler: 'wrr', excludeCIDRs: ['10.0.0.0/8'], strictARP: true, tcpTimeoutMs: 900_000, tcpFinTimeoutMs: 120_000, udpTimeoutMs: 300_000 },
      clusterCIDRs: ['10.244.0.0/16', 'fd00:10:244::/56'],
      masqueradeAll: true,
      masqueradeBit: 3,
      nodePortAddresses: ['primary'],
      hostnameOverride: 'node-1.example',
      healthzBindAddress: { host: '127.0.0.1', port: 1 },
      metricsBindAddress: { host: '0.0.0.0', port: 10249 },
      kubeconfig: '/etc/kube/kubeconfig',
      master: 'https://10.0.0.1:6443',
      log: { verbosity: 3 },
      bindAddress: '10.1.2.3',
      conntrack: { maxPerCore: 0, min: 1000, tcpEstablishedTimeoutMs: 7_200_000, tcpCloseWaitTimeoutMs: 0, tcpBeLiberal: true, udpTimeoutMs: 15_000, udpStreamTimeoutMs: 60_000 },
    });
  });

  it('maps our own flags', () => {
    expect(config('--manifests', '/etc/services', '--once', '--dry-run', '--graceful-termination-timeout=90s', '--log-format=text')).toMatchObject({
      manifests: '/etc/services', once: true, dryRun: true, gracefulTerminationTimeoutMs: 90_000, log: { format: 'text' },
    });
    expect(config('--logging-format', 'json').log.format).toBe('json');
    expect(config('--log-format=json').log.format).toBe('json');
    expect(config().log.format).toBe('text');
    expect([config().events, config('--record-events=false').events]).toEqual([true, false]);
    expect(config('--masquerade-bit=0').masqueradeBit).toBe(0);
  });

  it('takes values as --flag=value and --flag value, the last one winning', () => {
    expect(config('--ipvs-scheduler', 'lc').ipvs.scheduler).toBe('lc');
    expect(config('--ipvs-scheduler=lc', '--ipvs-scheduler', 'sh').ipvs.scheduler).toBe('sh');
    expect(config('--hostname-override=a=b').hostnameOverride).toBe('a=b');
  });

  it('reads booleans like pflag: bare, =true/false and Go spellings, never the next argument', () => {
    expect(config('--masquerade-all').masqueradeAll).toBe(true);
    expect(config('--masquerade-all=false').masqueradeAll).toBe(false);
    expect(config('--masquerade-all=1', '--ipvs-strict-arp=T').ipvs.strictARP).toBe(true);
    expect(config('--masquerade-all', '--masquerade-all=FALSE').masqueradeAll).toBe(false);
    expect(issues('--masquerade-all', 'false')).toEqual(['unknown command "false" (valid: inspect, cleanup)']);
    expect(issues('--once=yes')).toEqual(['--once: invalid boolean "yes" (use true or false)']);
  });

  it('turns the iptables fallback off with --no-fallback or --ipvs-fallback=false', () => {
    expect(config().fallback).toBe(true);
    expect(config('--no-fallback').fallback).toBe(false);
    expect(config('--ipvs-fallback=false').fallback).toBe(false);
    expect(config('--no-fallback', '--ipvs-fallback').fallback).toBe(true);
  });

  it('splits comma lists, trims them, and appends repeated list flags', () => {
    expect(config('--ipvs-exclude-cidrs=10.0.0.0/8, 192.168.0.0/16,', '--ipvs-exclude-cidrs', 'fd00::/8').ipvs.excludeCIDRs)
      .toEqual(['10.0.0.0/8', '192.168.0.0/16', 'fd00::/8']);
    expect(config('--nodeport-addresses=').nodePortAddresses).toEqual([]);
  });

  it('accepts -v N, -vN, -v=N and --v N', () => {
    for (const argv of [['-v', '4'], ['-v4'], ['-v=4'], ['--v', '4'], ['--v=4']]) expect(config(...argv).log.verbosity).toBe(4);
    expect(issues('-v', 'x')).toEqual(['-v: invalid integer "x"']);
    expect(issues('-v=-1')).toEqual(['--v: must not be negative']);
  });

  it('disables a server with an empty bind address', () => {
    expect(config('--metrics-bind-address=').metricsBindAddress).toBeNull();
    expect(config('--healthz-bind-address', '').healthzBindAddress).toBeNull();
  });

  it('uses IPv6 server defaults when --bind-address is IPv6, as kube-proxy', () => {
    const c = config('--bind-address=fd00::5');
    expect(c.healthzBindAddress).toEqual({ host: '::', port: 10256 });
    expect(c.metricsBindAddress).toEqual({ host: '::1', port: 10249 });
    expect(config('--bind-address=fd00::5', '--metrics-bind-address=[::]:9000').metricsBindAddress).toEqual({ host: '::', port: 9000 });
  });

  it('applies the sync-period flags of the mode in use and warns about the others', () => {
    const ipvs = parseArgs(['--ipvs-sync-period=10s', '--iptables-sync-period=20s', '--ipvs-min-sync-period=0s'], noFile);
    expect(ipvs.config).toMatchObject({ syncPeriodMs: 10_000, minSyncPeriodMs: 0 });
    expect(ipvs.warnings).toEqual(['--iptables-sync-period: ignored in ipvs mode']);
    const ipt = parseArgs(['--proxy-mode', 'iptables', '--ipvs-min-sync-period=5s'], noFile);
    expect(ipt.config).toMatchObject({ syncPeriodMs: 30_000, minSyncPeriodMs: 1_000 });
    expect(ipt.warnings).toEqual(['--ipvs-min-sync-period: ignored in iptables mode']);
  });

  it('stops parsing flags at --', () => {
    expect(issues('--', '--once')).toEqual(['unknown command "--once" (valid: inspect, cleanup)']);
    expect(parseArgs(['--once', '--', 'inspect'], noFile).command).toBe('inspect');
  });
});

describe('parseArgs: commands', () => {
  it('recognises inspect [--json] and cleanup, before or after the flags', () => {
    expect(parseArgs(['inspect'], noFile)).toMatchObject({ command: 'inspect', json: false });
    expect(parseArgs(['--kubeconfig=/k', 'inspect', '--json'], noFile)).toMatchObject({ command: 'inspect', json: true, config: { kubeconfig: '/k' } });
    expect(parseArgs(['inspect', '--stats', '--service', 'demo/web', '--vip=[fd00::1]:80'], noFile).inspect).toEqual({ stats: true, service: 'demo/web', vip: '[fd00::1]:80' });
    expect(() => parseArgs(['inspect', '--service', 'web', '--vip', '10.0.0.1:99999'], noFile)).toThrow(/--service: expected NAMESPACE\/NAME[\s\S]*--vip: expected IP/);
    expect(() => parseArgs(['--stats'], noFile)).toThrow(/--stats: only valid with the inspect command/);
    expect(parseArgs(['--metrics-service-stats', '--metrics-service-stats-max=20', '--metrics-service-stats-period', '5s'], noFile).config.serviceStats).toEqual({ enabled: true, maxServices: 20, periodMs: 5000 });
    expect(() => parseArgs(['--metrics-service-stats-period=100ms'], noFile)).toThrow(/--metrics-service-stats-period: must be at least 1s/);
    expect(parseArgs(['cleanup', '--ipvs-exclude-cidrs=10.0.0.0/8'], noFile).command).toBe('cleanup');
    expect(parseArgs(['run', '--once'], noFile).command).toBe('run');
  });

  it('maps kube-proxy --cleanup to the cleanup command', () => {
    expect(parseArgs(['--cleanup'], noFile).command).toBe('cleanup');
    expect(parseArgs(['cleanup', '--cleanup'], noFile).command).toBe('cleanup');
    expect(parseArgs(['--cleanup=false'], noFile).command).toBe('run');
    expect(issues('inspect', '--cleanup')).toEqual(['--cleanup: conflicts with the inspect command']);
  });

  it('refuses unknown and extra commands, and --json outside inspect', () => {
    expect(issues('serve')).toEqual(['unknown command "serve" (valid: inspect, cleanup)']);
    expect(issues('inspect', 'cleanup')).toEqual(['cleanup: conflicts with the inspect command']);
    expect(issues('inspect', 'inspect')).toEqual(['unexpected argument "inspect"']);
    expect(issues('--json')).toEqual(['--json: only valid with the inspect command']);
  });

  it('answers --version without validating anything else', () => {
    expect(parseArgs(['--version', '--bogus'], noFile)).toMatchObject({ version: true, help: false, command: 'run', config: defaultConfig() });
  });

  it('answers --help and -h without validating anything else', () => {
    expect(parseArgs(['--help', '--bogus'], noFile)).toMatchObject({ help: true, command: 'run', config: defaultConfig() });
    expect(parseArgs(['inspect', '-h'], noFile)).toMatchObject({ help: true, command: 'inspect' });
  });
});

describe('parseArgs: errors name the flag and the reason', () => {
  it.each([
    [['--ipvs-scheduler=foo'], '--ipvs-scheduler: unknown scheduler "foo" (valid: rr, wrr, lc, wlc, lblc, lblcr, dh, sh, sed, nq, mh, fo, ovf, twos)'],
    [['--proxy-mode=userspace'], '--proxy-mode: unknown proxy mode "userspace" (valid: ipvs, iptables)'],
    [['--ipvs-sync-period=30'], '--ipvs-sync-period: invalid duration "30" (use Go syntax, e.g. 30s, 1m30s, 500ms)'],
    [['--ipvs-sync-period=0s'], '--ipvs-sync-period: must be greater than 0'],
    [['--ipvs-udp-timeout=-5s'], '--ipvs-udp-timeout: duration "-5s" must not be negative'],
    [['--ipvs-min-sync-period=1m'], '--ipvs-min-sync-period: 1m must not exceed the sync period (30s)'],
    [['--ipvs-sync-period=500ms'], '--ipvs-min-sync-period: 1s must not exceed the sync period (500ms)'],
    [['--ipvs-exclude-cidrs=10.0.0.0/8,10.0.0.0/33'], '--ipvs-exclude-cidrs: invalid CIDR "10.0.0.0/33"'],
    [['--cluster-cidr=10.0.0.0/8,10.1.0.0/16'], '--cluster-cidr: at most one CIDR per IP family (a dual-stack pair)'],
    [['--cluster-cidr=10.0.0.0'], '--cluster-cidr: invalid CIDR "10.0.0.0"'],
    [['--nodeport-addresses=primary,10.0.0.0/8'], '--nodeport-addresses: "primary" must be the only value'],
    [['--nodeport-addresses=all'], '--nodeport-addresses: invalid CIDR "all" (or use "primary")'],
    [['--masquerade-bit=32'], '--iptables-masquerade-bit: must be within [0, 31]'],
    [['--conntrack-max-per-core=-1'], '--conntrack-max-per-core: must be within [0, 2147483647]'],
    [['--conntrack-udp-timeout=500ms'], '--conntrack-udp-timeout: must be 0 or at least 1s'],
    [['--iptables-masquerade-bit=x'], '--iptables-masquerade-bit: invalid integer "x"'],
    [['--healthz-bind-address=localhost:10256'], '--healthz-bind-address: invalid address "localhost:10256": "localhost" is not an IP address'],
    [['--metrics-bind-address=127.0.0.1:99999'], '--metrics-bind-address: invalid address "127.0.0.1:99999": port 99999 out of range'],
    [['--bind-address=10.0.0'], '--bind-address: invalid IP address "10.0.0"'],
    [['--hostname-override= '], '--hostname-override: must not be empty'],
    [['--logging-format=xml'], '--logging-format: unknown log format "xml" (valid: json, text)'],
    [['--kubeconfig='], '--kubeconfig: must not be empty'],
    [['--config='], '--config: must not be empty'],
    [['--manifests=/m', '--master=https://a'], '--manifests: standalone mode cannot be combined with a kubeconfig or master'],
    [['--kubeconfig'], '--kubeconfig: missing value'],
    [['--kubeconfig', '--once'], '--kubeconfig: missing value'],
  ])('%j → %s', (argv, message) => {
    expect(issues(...argv)).toEqual([message]);
  });

  it('refuses unknown flags, suggesting a near name', () => {
    expect(issues('--bogus')).toEqual(['unknown flag --bogus']);
    expect(issues('--ipvs-schedulr=rr')).toEqual(['unknown flag --ipvs-schedulr (did you mean --ipvs-scheduler?)']);
    expect(issues('-ipvs-scheduler=rr')).toEqual(['unknown flag -ipvs-scheduler (did you mean --ipvs-scheduler?)']);
    expect(issues('-help')).toEqual(['unknown flag -help (did you mean --help?)']);
    expect(issues('--h')).toEqual(['unknown flag --h (did you mean -h?)']);
    expect(issues('-x')).toEqual(['unknown flag -x (did you mean -v?)']);
  });

  it('names kube-proxy flags it does not implement', () => {
    expect(issues('--oom-score-adj=-999', '--feature-gates', 'A=true')).toEqual([
      '--oom-score-adj: kube-proxy flag not supported by kube-ipvs-proxy',
      '--feature-gates: kube-proxy flag not supported by kube-ipvs-proxy',
      'unknown command "A=true" (valid: inspect, cleanup)',
    ]);
  });

  it('reports every problem at once, as one ConfigError', () => {
    let err: unknown;
    try {
      parseArgs(['--ipvs-scheduler=foo', '--bogus', '--masquerade-bit=99', '--ipvs-sync-period=x'], noFile);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).issues).toEqual([
      'unknown flag --bogus',
      '--ipvs-sync-period: invalid duration "x" (use Go syntax, e.g. 30s, 1m30s, 500ms)',
      expect.stringMatching(/^--ipvs-scheduler: unknown scheduler "foo"/),
      '--iptables-masquerade-bit: must be within [0, 31]',
    ]);
    expect((err as Error).message).toBe((err as ConfigError).issues.join('\n'));
  });
});

describe('FLAGS and --help', () => {
  it('has unique names, help text and a value placeholder for every non-boolean flag', () => {
    const names = FLAGS.flatMap((f) => [f.name, ...f.aliases]);
    expect(new Set(names).size).toBe(names.length);
    for (const f of FLAGS) {
      expect(f.help, f.name).not.toBe('');
      expect(f.arg === '', f.name).toBe(f.kind === 'bool');
      expect(UNSUPPORTED_KUBE_PROXY_FLAGS.has(f.name), f.name).toBe(false);
    }
  });

  it('states defaults that match the parsed defaults', () => {
    const shown = Object.fromEntries(FLAGS.map((f) => [f.name, f.default]));
    expect(shown).toMatchObject({
      'proxy-mode': 'ipvs', 'ipvs-scheduler': 'rr', 'ipvs-sync-period': '30s', 'ipvs-min-sync-period': '1s',
      'iptables-masquerade-bit': '14', 'healthz-bind-address': '0.0.0.0:10256', 'metrics-bind-address': '127.0.0.1:10249',
      'graceful-termination-timeout': '15m', 'logging-format': 'text', v: '0',
      'conntrack-max-per-core': '32768', 'conntrack-min': '131072', 'conntrack-tcp-timeout-established': '24h', 'conntrack-tcp-timeout-close-wait': '1h',
      'conntrack-udp-timeout': '0s', 'conntrack-udp-timeout-stream': '0s',
    });
    const d = defaultConfig();
    expect([d.mode, d.ipvs.scheduler, d.syncPeriodMs, d.minSyncPeriodMs, d.masqueradeBit, d.gracefulTerminationTimeoutMs])
      .toEqual(['ipvs', 'rr', 30_000, 1_000, 14, 900_000]);
    expect(d.conntrack).toEqual({ maxPerCore: 32768, min: 131072, tcpEstablishedTimeoutMs: 86_400_000, tcpCloseWaitTimeoutMs: 3_600_000, tcpBeLiberal: false, udpTimeoutMs: 0, udpStreamTimeoutMs: 0 });
  });

  it('prints every flag with its help', () => {
    const help = formatHelp('kp');
    expect(help.startsWith('Usage: kp [command] [flags]\n')).toBe(true);
    for (const f of FLAGS) expect(help).toContain(f.help);
    expect(help).toContain('  --ipvs-scheduler NAME\n');
    expect(help).toContain('  --iptables-masquerade-bit, --masquerade-bit BIT\n');
    expect(help).toContain('  --help, -h\n');
    expect(help).toContain('(default 30s)');
    expect(help).not.toContain('(default false)');
  });
});
