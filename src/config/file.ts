// Loading a kube-proxy KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1) file into a
// Layer. Every v1alpha1 field is accepted (kubeadm writes them all); fields with no meaning
// here are ignored, with a warning when set to something that changes the datapath. Zero
// values mean "default", as kube-proxy's defaulting does.

import { loadYaml, yamlReason } from '../yaml.js';
import { toHostname, toHostPort, toList } from './convert.js';
import { parseDuration } from './duration.js';
import { ConfigError, Layer } from './layer.js';
import { anything, check, either, integer, listOf, literal, nullable, object, optional, recordOf, typed, type Field, type Rule } from './rules.js';
import { HEALTHZ_PORT, METRICS_PORT } from './schema.js';

/** The only API version understood. */
export const KUBE_PROXY_API_VERSION = 'kubeproxy.config.k8s.io/v1alpha1';

/** A field that may be absent or null. */
const nullish = <T>(rule: Rule<T>): Field<T | null | undefined> => optional(nullable(rule));
const str = nullish(typed('string'));
const dur = str;
const bool = nullish(typed('boolean'));
const int = nullish(integer(Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER, 'expected an integer'));
const strs = nullish(listOf(typed('string')));
/** A section: an object of known fields only. */
const section = <T extends object>(shape: { [K in keyof T]-?: Field<T[K]> }) => nullish(object<T>(shape, { strict: true }));

/** The KubeProxyConfiguration v1alpha1 document: types only; values are checked by ConfigSchema. */
const kubeProxyConfiguration = object(
  {
    apiVersion: { rule: literal(KUBE_PROXY_API_VERSION) },
    kind: { rule: literal('KubeProxyConfiguration') },
    featureGates: nullish(recordOf(typed('boolean'))),
    clientConnection: section({ kubeconfig: str, acceptContentTypes: str, contentType: str, qps: nullish(typed('number')), burst: int }),
    logging: section({ format: str, flushFrequency: nullish(either(typed('string'), typed('number'))), verbosity: int, vmodule: optional(anything), options: optional(anything) }),
    hostnameOverride: str,
    bindAddress: str,
    healthzBindAddress: str,
    metricsBindAddress: str,
    bindAddressHardFail: bool,
    enableProfiling: bool,
    showHiddenMetricsForVersion: str,
    mode: str,
    iptables: section({ masqueradeBit: int, masqueradeAll: bool, localhostNodePorts: bool, snatNodeInternalIP: bool, syncPeriod: dur, minSyncPeriod: dur }),
    ipvs: section({ syncPeriod: dur, minSyncPeriod: dur, scheduler: str, excludeCIDRs: strs, strictARP: bool, tcpTimeout: dur, tcpFinTimeout: dur, udpTimeout: dur }),
    nftables: section({ masqueradeBit: int, masqueradeAll: bool, syncPeriod: dur, minSyncPeriod: dur }),
    winkernel: section({ networkName: str, sourceVip: str, enableDSR: bool, rootHnsEndpointName: str, forwardHealthCheckVip: bool }),
    detectLocalMode: str,
    detectLocal: section({ bridgeInterface: str, interfaceNamePrefix: str }),
    clusterCIDR: str,
    nodePortAddresses: strs,
    oomScoreAdj: int,
    conntrack: section({ maxPerCore: int, min: int, tcpEstablishedTimeout: dur, tcpCloseWaitTimeout: dur, tcpBeLiberal: bool, udpTimeout: dur, udpStreamTimeout: dur }),
    configSyncPeriod: dur,
    portRange: str,
    windowsRunAsService: bool,
    // Removed from v1alpha1 in later releases; older kubeadm still writes them.
    udpIdleTimeout: dur,
    resourceContainer: str,
  },
  { strict: true },
);

/** A parsed KubeProxyConfiguration document. */
export type KubeProxyConfiguration = typeof kubeProxyConfiguration extends Rule<infer T> ? T : never;

/** What a config file contributes: its values and the warnings about fields it ignores. */
export interface FileLayer {
  layer: Layer;
  warnings: string[];
}

// Ignored fields worth a warning when set, with the value that matches what we do anyway.
const WARN_ROOTS = ['featureGates', 'detectLocalMode', 'detectLocal', 'nftables', 'winkernel', 'oomScoreAdj', 'iptables.localhostNodePorts', 'iptables.snatNodeInternalIP'];
const HARMLESS: Readonly<Record<string, unknown>> = { detectLocalMode: 'ClusterCIDR', 'iptables.localhostNodePorts': true };

/** Parses the text of a KubeProxyConfiguration file (YAML or JSON) into a Layer; throws ConfigError naming each bad field. */
export function parseKubeProxyConfiguration(text: string, fileName: string): FileLayer {
  const fail = (msg: string): never => {
    throw new ConfigError([`${fileName}: ${msg}`]);
  };
  let doc: unknown;
  try {
    doc = loadYaml(text, fileName);
  } catch (err) {
    fail(`invalid YAML: ${yamlReason(err)}`);
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) fail('expected a KubeProxyConfiguration object');
  const parsed = check(kubeProxyConfiguration, doc);
  if (!parsed.success) throw new ConfigError(parsed.error.issues.map((iss) => `${fileName}: ${fieldPath(iss.path)}: ${iss.message}`));
  return { layer: toLayer(parsed.data, fileName), warnings: ignoredFieldWarnings(parsed.data, fileName) };
}

function fieldPath(path: readonly PropertyKey[]): string {
  return path.map((k, i) => (typeof k === 'number' ? `[${k}]` : i === 0 ? String(k) : `.${String(k)}`)).join('') || '(document)';
}

function toLayer(c: KubeProxyConfiguration, fileName: string): Layer {
  const layer = new Layer();
  const issues: string[] = [];
  const put = <T>(field: string, path: string, raw: T | null | undefined, convert: (v: T) => unknown, indexed = false): void => {
    if (raw === null || raw === undefined) return;
    try {
      layer.set(path, convert(raw), { label: `${fileName}: ${field}`, indexed });
    } catch (err) {
      issues.push(`${fileName}: ${field}: ${(err as Error).message}`);
    }
  };
  const str = (v: string | null | undefined): string | undefined => (v === '' ? undefined : v ?? undefined);
  // A zero duration means "unset" for the sync periods, as kube-proxy's defaulting.
  const period = (v: string | null | undefined): string | undefined => (v === undefined || v === null || parseDurationOrNaN(v) === 0 ? undefined : v);
  const same = <T>(v: T): T => v;

  put('mode', 'mode', str(c.mode), same);
  put('hostnameOverride', 'hostnameOverride', str(c.hostnameOverride), toHostname);
  put('bindAddress', 'bindAddress', str(c.bindAddress), same);
  put('healthzBindAddress', 'healthzBindAddress', str(c.healthzBindAddress), toHostPort(HEALTHZ_PORT));
  put('metricsBindAddress', 'metricsBindAddress', str(c.metricsBindAddress), toHostPort(METRICS_PORT));
  put('clusterCIDR', 'clusterCIDRs', str(c.clusterCIDR), toList);
  put('nodePortAddresses', 'nodePortAddresses', c.nodePortAddresses, same, true);
  put('clientConnection.kubeconfig', 'kubeconfig', str(c.clientConnection?.kubeconfig), same);
  put('logging.format', 'log.format', str(c.logging?.format), same);
  put('logging.verbosity', 'log.verbosity', c.logging?.verbosity, same);
  put('iptables.masqueradeAll', 'masqueradeAll', c.iptables?.masqueradeAll, same);
  put('iptables.masqueradeBit', 'masqueradeBit', c.iptables?.masqueradeBit, same);
  put('iptables.syncPeriod', 'iptables.syncPeriodMs', period(c.iptables?.syncPeriod), parseDuration);
  put('iptables.minSyncPeriod', 'iptables.minSyncPeriodMs', period(c.iptables?.minSyncPeriod), parseDuration);
  const ipvs = c.ipvs;
  put('ipvs.scheduler', 'ipvs.scheduler', str(ipvs?.scheduler), same);
  put('ipvs.syncPeriod', 'ipvs.syncPeriodMs', period(ipvs?.syncPeriod), parseDuration);
  put('ipvs.minSyncPeriod', 'ipvs.minSyncPeriodMs', period(ipvs?.minSyncPeriod), parseDuration);
  put('ipvs.excludeCIDRs', 'ipvs.excludeCIDRs', ipvs?.excludeCIDRs, same, true);
  put('ipvs.strictARP', 'ipvs.strictARP', ipvs?.strictARP, same);
  put('ipvs.tcpTimeout', 'ipvs.tcpTimeoutMs', ipvs?.tcpTimeout, parseDuration);
  put('ipvs.tcpFinTimeout', 'ipvs.tcpFinTimeoutMs', ipvs?.tcpFinTimeout, parseDuration);
  put('ipvs.udpTimeout', 'ipvs.udpTimeoutMs', ipvs?.udpTimeout, parseDuration);
  // null keeps kube-proxy's default; 0 leaves the kernel's value, as kube-proxy's pointer fields.
  const ct = c.conntrack;
  put('conntrack.maxPerCore', 'conntrack.maxPerCore', ct?.maxPerCore, same);
  put('conntrack.min', 'conntrack.min', ct?.min, same);
  put('conntrack.tcpEstablishedTimeout', 'conntrack.tcpEstablishedTimeoutMs', ct?.tcpEstablishedTimeout, parseDuration);
  put('conntrack.tcpCloseWaitTimeout', 'conntrack.tcpCloseWaitTimeoutMs', ct?.tcpCloseWaitTimeout, parseDuration);
  put('conntrack.tcpBeLiberal', 'conntrack.tcpBeLiberal', ct?.tcpBeLiberal, same);
  put('conntrack.udpTimeout', 'conntrack.udpTimeoutMs', ct?.udpTimeout, parseDuration);
  put('conntrack.udpStreamTimeout', 'conntrack.udpStreamTimeoutMs', ct?.udpStreamTimeout, parseDuration);
  if (issues.length > 0) throw new ConfigError(issues);
  return layer;
}

function parseDurationOrNaN(text: string): number {
  try {
    return parseDuration(text);
  } catch {
    return Number.NaN; // reported by the conversion itself
  }
}

function ignoredFieldWarnings(c: KubeProxyConfiguration, fileName: string): string[] {
  const warnings: string[] = [];
  const visit = (path: string, value: unknown): void => {
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
      for (const [k, v] of Object.entries(value)) visit(`${path}.${k}`, v);
    } else if (isSet(value) && HARMLESS[path] !== value) {
      warnings.push(`${fileName}: ${path}: not supported by kube-ipvs-proxy, ignored`);
    }
  };
  for (const root of WARN_ROOTS) {
    const [a, b] = root.split('.') as [keyof KubeProxyConfiguration, string | undefined];
    const top = c[a] as Record<string, unknown> | null | undefined;
    visit(root, b === undefined ? top : top?.[b]);
  }
  return warnings;
}

function isSet(v: unknown): boolean {
  return !(v === undefined || v === null || v === '' || v === false || v === 0 || v === '0' || v === '0s' || (Array.isArray(v) && v.length === 0));
}
