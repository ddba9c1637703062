// The command-line flags: kube-proxy's names and defaults, plus ours. One table drives both
// parsing and --help.

import { toBool, toHostname, toHostPort, toInt, toList } from './convert.js';
import { parseDuration } from './duration.js';
import { HEALTHZ_PORT, METRICS_PORT, SCHEDULERS } from './schema.js';

/** How a flag takes its value: bool (`--f`, `--f=false`), value (`--f=v`, `--f v`), list (comma lists, repeatable). */
export type FlagKind = 'bool' | 'value' | 'list';

/** One flag as --help shows it. */
export interface FlagSpec {
  /** Name without dashes, e.g. "ipvs-scheduler". */
  readonly name: string;
  /** Other accepted names, e.g. "v" for "-v". */
  readonly aliases: readonly string[];
  readonly kind: FlagKind;
  /** Value placeholder for help, e.g. "DURATION"; empty for bools. */
  readonly arg: string;
  /** Default as shown in help; empty if none. */
  readonly default: string;
  readonly help: string;
  /** True for flags kube-proxy also has (same name and meaning). */
  readonly kubeProxy: boolean;
}

/** A flag with what it does: `path` stores the converted value in ConfigInput; `special` is handled by parseArgs. */
export interface FlagDef extends FlagSpec {
  readonly path?: string;
  readonly convert?: (text: string) => unknown;
  readonly special?: 'config' | 'cleanup' | 'json' | 'help' | 'version' | 'no-fallback' | 'inspect';
}

type Extra = Partial<Pick<FlagDef, 'aliases' | 'path' | 'convert' | 'special'>> & { ours?: boolean };

const identity = (s: string): string => s;

function def(name: string, kind: FlagKind, arg: string, dflt: string, help: string, extra: Extra = {}): FlagDef {
  const { ours, ...rest } = extra;
  return { name, aliases: [], kind, arg, default: dflt, help, kubeProxy: !ours, convert: identity, ...rest };
}

const DUR = 'DURATION';

/** Every flag, in --help order. */
export const FLAG_DEFS: readonly FlagDef[] = [
  def('config', 'value', 'FILE', '', 'KubeProxyConfiguration file (kubeproxy.config.k8s.io/v1alpha1, YAML or JSON); explicit flags override it.', { special: 'config' }),
  def('kubeconfig', 'value', 'FILE', '', 'Path to a kubeconfig file with authorization information.', { path: 'kubeconfig' }),
  def('master', 'value', 'URL', '', 'Address of the Kubernetes API server (overrides any value in kubeconfig).', { path: 'master' }),
  def('manifests', 'value', 'FILE|DIR', '', 'Standalone mode: read Services and EndpointSlices from YAML files instead of the API server (watched).', { path: 'manifests', ours: true }),
  def('hostname-override', 'value', 'NAME', '', 'Name of this Node (default: the hostname).', { path: 'hostnameOverride', convert: toHostname }),
  def('bind-address', 'value', 'IP', '', "Overrides the node's primary IP; nothing binds to it. An IPv6 value makes the server defaults IPv6.", { path: 'bindAddress' }),
  def('proxy-mode', 'value', 'MODE', 'ipvs', "Proxy mode: 'ipvs' or 'iptables'.", { path: 'mode' }),
  def('ipvs-fallback', 'bool', '', 'true', 'Fall back to the iptables proxier when IPVS is not available.', { path: 'fallback', convert: toBool, ours: true }),
  def('no-fallback', 'bool', '', '', 'Same as --ipvs-fallback=false.', { special: 'no-fallback', convert: toBool, ours: true }),
  def('ipvs-scheduler', 'value', 'NAME', 'rr', `IPVS scheduler: ${SCHEDULERS.join(', ')}.`, { path: 'ipvs.scheduler' }),
  def('ipvs-sync-period', 'value', DUR, '30s', 'Longest interval between syncs (a full resync of the kernel state). Must be > 0.', { path: 'ipvs.syncPeriodMs', convert: parseDuration }),
  def('ipvs-min-sync-period', 'value', DUR, '1s', 'Shortest interval between the starts of two syncs; changes arriving faster are coalesced. 0 = sync at once.', { path: 'ipvs.minSyncPeriodMs', convert: parseDuration }),
  def('iptables-sync-period', 'value', DUR, '30s', 'As --ipvs-sync-period, in iptables mode.', { path: 'iptables.syncPeriodMs', convert: parseDuration }),
  def('iptables-min-sync-period', 'value', DUR, '1s', 'As --ipvs-min-sync-period, in iptables mode.', { path: 'iptables.minSyncPeriodMs', convert: parseDuration }),
  def('ipvs-exclude-cidrs', 'list', 'CIDR,...', '', 'CIDRs whose IPVS virtual servers cleanup must not touch.', { path: 'ipvs.excludeCIDRs' }),
  def('ipvs-address-binding', 'value', 'MODE', 'route', "How Service IPs are made local on kube-ipvs0: route (a local route each) or address (an address each, as kube-proxy; slow past ~10,000 IPs).", { path: 'ipvs.addressBinding' }),
  def('ipvs-strict-arp', 'bool', '', '', 'Set arp_ignore=1 and arp_announce=2 (needed by some load balancers, e.g. MetalLB L2).', { path: 'ipvs.strictARP', convert: toBool }),
  def('ipvs-tcp-timeout', 'value', DUR, '0s', 'Idle timeout of IPVS TCP connections; 0 leaves the kernel value.', { path: 'ipvs.tcpTimeoutMs', convert: parseDuration }),
  def('ipvs-tcpfin-timeout', 'value', DUR, '0s', 'Timeout of IPVS TCP connections after a FIN; 0 leaves the kernel value.', { path: 'ipvs.tcpFinTimeoutMs', convert: parseDuration }),
  def('ipvs-udp-timeout', 'value', DUR, '0s', 'Timeout of IPVS UDP entries; 0 leaves the kernel value.', { path: 'ipvs.udpTimeoutMs', convert: parseDuration }),
  def('conntrack-max-per-core', 'value', 'N', '32768', 'NAT connections to track per CPU core: nf_conntrack_max = max(this × CPUs, --conntrack-min), initial network namespace only; 0 leaves nf_conntrack_max as it is.', { path: 'conntrack.maxPerCore', convert: toInt }),
  def('conntrack-min', 'value', 'N', '131072', 'The smallest nf_conntrack_max --conntrack-max-per-core sets.', { path: 'conntrack.min', convert: toInt }),
  def('conntrack-tcp-timeout-established', 'value', DUR, '24h', 'Idle timeout of established TCP conntrack entries (nf_conntrack_tcp_timeout_established); 0 leaves the kernel value.', { path: 'conntrack.tcpEstablishedTimeoutMs', convert: parseDuration }),
  def('conntrack-tcp-timeout-close-wait', 'value', DUR, '1h', 'Timeout of TCP conntrack entries in CLOSE_WAIT (nf_conntrack_tcp_timeout_close_wait); 0 leaves the kernel value.', { path: 'conntrack.tcpCloseWaitTimeoutMs', convert: parseDuration }),
  def('conntrack-tcp-be-liberal', 'bool', '', '', 'nf_conntrack_tcp_be_liberal=1: out-of-window TCP packets are not marked INVALID.', { path: 'conntrack.tcpBeLiberal', convert: toBool }),
  def('conntrack-udp-timeout', 'value', DUR, '0s', 'Timeout of UDP conntrack entries without replies (nf_conntrack_udp_timeout); 0 leaves the kernel value.', { path: 'conntrack.udpTimeoutMs', convert: parseDuration }),
  def('conntrack-udp-timeout-stream', 'value', DUR, '0s', 'Timeout of UDP conntrack entries that saw replies (nf_conntrack_udp_timeout_stream); 0 leaves the kernel value.', { path: 'conntrack.udpStreamTimeoutMs', convert: parseDuration }),
  def('cluster-cidr', 'list', 'CIDR[,CIDR]', '', 'Pod CIDR(s), one per IP family; traffic from outside them is masqueraded.', { path: 'clusterCIDRs' }),
  def('masquerade-all', 'bool', '', '', 'SNAT all traffic sent to Service cluster IPs.', { path: 'masqueradeAll', convert: toBool }),
  def('iptables-masquerade-bit', 'value', 'BIT', '14', 'Bit of the fwmark space that marks packets to SNAT, 0..31.', { path: 'masqueradeBit', convert: toInt, aliases: ['masquerade-bit'] }),
  def('nodeport-addresses', 'list', 'CIDR,...', '', "NodePorts are served only on node IPs in these CIDRs (an IP family with none: all of its IPs), or 'primary' for the Node's primary IPs (default: every local IP).", { path: 'nodePortAddresses' }),
  def('healthz-bind-address', 'value', 'IP[:PORT]', `0.0.0.0:${HEALTHZ_PORT}`, 'Address of the health server (/healthz, /livez); empty disables it.', { path: 'healthzBindAddress', convert: toHostPort(HEALTHZ_PORT) }),
  def('metrics-bind-address', 'value', 'IP[:PORT]', `127.0.0.1:${METRICS_PORT}`, 'Address of the metrics server (/metrics); empty disables it.', { path: 'metricsBindAddress', convert: toHostPort(METRICS_PORT) }),
  def('metrics-service-stats', 'bool', '', '', 'Export per-Service-port traffic from IPVS counters on /metrics (kube_ipvs_proxy_service_*; one IPVS dump per --metrics-service-stats-period).', { path: 'serviceStats.enabled', convert: toBool, ours: true }),
  def('metrics-service-stats-max', 'value', 'N', '500', 'Most Service ports --metrics-service-stats exports (7 series each); the rest are counted in kube_ipvs_proxy_service_stats_omitted.', { path: 'serviceStats.maxServices', convert: toInt, ours: true }),
  def('metrics-service-stats-period', 'value', DUR, '15s', 'A scrape reuses the IPVS dump of --metrics-service-stats for this long (at least 1s).', { path: 'serviceStats.periodMs', convert: parseDuration, ours: true }),
  def('graceful-termination-timeout', 'value', DUR, '15m', "Longest wait for a removed endpoint's IPVS connections to drain before it is deleted (15m = the kernel's established-TCP timeout); 0 = no limit, as kube-proxy.", { path: 'gracefulTerminationTimeoutMs', convert: parseDuration, ours: true }),
  def('once', 'bool', '', '', 'Sync once, then exit.', { path: 'once', convert: toBool, ours: true }),
  def('dry-run', 'bool', '', '', 'Compute and print what would change; never touch the kernel.', { path: 'dryRun', convert: toBool, ours: true }),
  def('cleanup', 'bool', '', '', 'Remove the IPVS, ipset and iptables state this proxy creates, then exit (same as the cleanup command).', { special: 'cleanup', convert: toBool }),
  def('logging-format', 'value', 'FORMAT', 'text', "Log format: 'text' (one line per event, as kube-proxy's klog) or 'json'.", { path: 'log.format', aliases: ['log-format'] }),
  def('record-events', 'bool', '', 'true', 'Record per-Service problems as Kubernetes Events on the Service (API mode; needs create/patch on events.k8s.io events).', { path: 'events', convert: toBool, ours: true }),
  def('v', 'value', 'LEVEL', '0', 'Log verbosity: 0 info, 2 debug, 4 and above trace.', { path: 'log.verbosity', convert: toInt }),
  def('json', 'bool', '', '', 'inspect: print JSON.', { special: 'json', convert: toBool, ours: true }),
  def('service', 'value', 'NS/NAME', '', 'inspect: only the virtual servers of this Service (needs the daemon\'s desired state).', { special: 'inspect', ours: true }),
  def('vip', 'value', 'IP[:PORT]', '', 'inspect: only the virtual servers on this address (and port).', { special: 'inspect', ours: true }),
  def('stats', 'bool', '', '', 'inspect: add IPVS traffic counters and rates, and traffic per Service.', { special: 'inspect', convert: toBool, ours: true }),
  def('help', 'bool', '', '', 'Print this help.', { special: 'help', convert: toBool, aliases: ['h'] }),
  def('version', 'bool', '', '', 'Print the version and exit.', { special: 'version', convert: toBool }),
];

/** The flags, for --help and the README. */
export const FLAGS: readonly FlagSpec[] = FLAG_DEFS;

/** kube-proxy flags this proxy does not implement: refused with a clearer message than "unknown flag". */
export const UNSUPPORTED_KUBE_PROXY_FLAGS: ReadonlySet<string> = new Set([
  'write-config-to', 'feature-gates', 'kube-api-content-type', 'kube-api-burst', 'kube-api-qps',
  'bind-address-hard-fail', 'profiling', 'show-hidden-metrics-for-version', 'init-only',
  'iptables-localhost-nodeports', 'detect-local-mode', 'pod-bridge-interface', 'pod-interface-name-prefix',
  'oom-score-adj', 'config-sync-period', 'healthz-port', 'metrics-port',
  'vmodule', 'log-flush-frequency', 'cleanup-iptables', 'proxy-port-range', 'udp-timeout',
]);

const BY_NAME: ReadonlyMap<string, FlagDef> = new Map(FLAG_DEFS.flatMap((f) => [f.name, ...f.aliases].map((n) => [n, f] as const)));

/** The flag with this name or alias (without dashes). */
export function findFlag(name: string): FlagDef | undefined {
  return BY_NAME.get(name);
}

/** The closest flag name to a misspelt one (edit distance ≤ 2), for "did you mean". */
export function suggestFlag(name: string): string | undefined {
  let best: string | undefined;
  let bestDistance = 3;
  for (const candidate of BY_NAME.keys()) {
    const d = editDistance(name, candidate);
    if (d < bestDistance) [best, bestDistance] = [candidate, d];
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = row;
  }
  return prev[b.length]!;
}

/** --help text: usage, commands, then one entry per flag. */
export function formatHelp(program = 'kube-ipvs-proxy'): string {
  const lines = [
    `Usage: ${program} [command] [flags]`,
    '',
    'Commands:',
    '  (none)     run the proxy (like kube-proxy [flags])',
    '  inspect    print the IPVS state this proxy manages, attributed to Services (--json, --stats, --service, --vip)',
    '  cleanup    remove the state this proxy creates, then exit',
    '',
    'Flags:',
  ];
  for (const f of FLAGS) {
    const names = [f.name, ...f.aliases].map((n) => (n.length === 1 ? `-${n}` : `--${n}`)).join(', ');
    const head = f.arg === '' ? names : `${names} ${f.arg}`;
    const dflt = f.default === '' ? '' : ` (default ${f.default})`;
    lines.push(`  ${head}`, `        ${f.help}${dflt}`);
  }
  return lines.join('\n') + '\n';
}
