// A hand-written twin of the zod schemas in k8s.ts for Services, EndpointSlices and Nodes, for the
// common case only: an object whose every field the proxy reads is present and well-formed (or
// absent where the schema allows it) gets exactly what the schema's parse would give, key order
// included; anything else (a wrong type, an out-of-range number, a `__proto__` key, an object
// with another prototype) returns NOT_PLAIN and the zod schema decides, with its messages.
// Why: a daemon whose objects are all plain never loads zod (zod.ts), whose import and first
// parses are a large part of a start-up (docs/decisions.md). test/unit/k8s-fast.test.ts holds the
// two equal on random objects, valid and broken.
import { familyOf } from './ip.js';
import { ADDRESS_TYPES, IP_FAMILIES, K8S_PROTOCOLS, SERVICE_TYPES, SESSION_AFFINITIES, TRAFFIC_POLICIES } from './k8s.js';
import type { EndpointSlice, Node, Service } from './k8s.js';

/** The object is not in the plain form this file decodes: let the zod schema parse it. */
export const NOT_PLAIN: unique symbol = Symbol('not plain');
type Out<T> = T | typeof NOT_PLAIN;
type Dict = Record<string, unknown>;

const OBJECT_PROTO = Object.prototype;

/** What zod's z.object accepts, narrowed to what JSON.parse and js-yaml build. */
function isDict(v: unknown): v is Dict {
  return typeof v === 'object' && v !== null && Object.getPrototypeOf(v) === OBJECT_PROTO;
}

/** z.number().int().min(min).max(max) */
const intIn = (v: unknown, min: number, max: number): v is number => Number.isSafeInteger(v) && (v as number) >= min && (v as number) <= max;
const isPort = (v: unknown): v is number => intIn(v, 1, 65535);

/** z.string().optional(): the value, or undefined when absent. */
function optString(v: unknown): Out<string | undefined> {
  return v === undefined || typeof v === 'string' ? v : NOT_PLAIN;
}

/** z.record(z.string(), z.string()).default({}) */
function stringRecord(v: unknown): Out<Record<string, string>> {
  if (v === undefined) return {};
  if (!isDict(v)) return NOT_PLAIN;
  const out: Record<string, string> = {};
  for (const k in v) {
    const x = v[k];
    if (k === '__proto__' || typeof x !== 'string') return NOT_PLAIN;
    out[k] = x;
  }
  return out;
}

/** z.array(z.string()) */
function stringArray(v: unknown): Out<string[]> {
  if (!Array.isArray(v)) return NOT_PLAIN;
  // An index loop, not for…of: a change's slice is decoded by code V8 has not optimized (or has
  // dropped after a memory release), where each step of a for…of is an object.
  for (let i = 0; i < v.length; i++) if (typeof v[i] !== 'string') return NOT_PLAIN;
  return v.slice();
}

/** z.enum(values) with .default(dflt) when given. */
function oneOf<T extends string>(v: unknown, values: readonly T[], dflt?: T): Out<T> {
  if (v === undefined && dflt !== undefined) return dflt;
  return values.includes(v as T) ? (v as T) : NOT_PLAIN;
}

/** Sets `out[key]` unless the value is undefined (an absent optional key is left out, as zod does). */
function put(out: Dict, key: string, v: unknown): void {
  if (v !== undefined) out[key] = v;
}

/** An object of optional fields, in this order (absent ones left out); NOT_PLAIN when one of them is. */
function optionals(fields: ReadonlyArray<readonly [string, unknown]>): Out<Dict> {
  const out: Dict = {};
  for (const [k, v] of fields) {
    if (v === NOT_PLAIN) return NOT_PLAIN;
    if (v !== undefined) out[k] = v;
  }
  return out;
}

/**
 * metadataSchema; `node`: nodeSchema's extension of it (namespace defaults to '' and may be
 * empty, deletionTimestamp is kept).
 */
function metadata(v: unknown, node = false): Out<Node['metadata']> {
  if (!isDict(v)) return NOT_PLAIN;
  const { name, uid, resourceVersion } = v;
  const deletionTimestamp = node ? v.deletionTimestamp : undefined;
  const namespace = v.namespace === undefined ? (node ? '' : 'default') : v.namespace;
  if (typeof name !== 'string' || name === '' || typeof namespace !== 'string' || (namespace === '' && !node)) return NOT_PLAIN;
  if (optString(uid) === NOT_PLAIN || optString(resourceVersion) === NOT_PLAIN || optString(deletionTimestamp) === NOT_PLAIN) return NOT_PLAIN;
  const labels = stringRecord(v.labels);
  const annotations = stringRecord(v.annotations);
  if (labels === NOT_PLAIN || annotations === NOT_PLAIN) return NOT_PLAIN;
  const out: Dict = { name, namespace };
  put(out, 'uid', uid);
  put(out, 'resourceVersion', resourceVersion);
  out.labels = labels;
  out.annotations = annotations;
  put(out, 'deletionTimestamp', deletionTimestamp);
  return out as Node['metadata'];
}

/** servicePortSchema */
function servicePort(v: unknown): Out<Service['spec']['ports'][number]> {
  if (!isDict(v)) return NOT_PLAIN;
  const name = v.name === undefined ? '' : v.name;
  const protocol = oneOf(v.protocol, K8S_PROTOCOLS, 'TCP');
  const { port, targetPort, nodePort } = v;
  if (typeof name !== 'string' || protocol === NOT_PLAIN || !isPort(port)) return NOT_PLAIN;
  if (targetPort !== undefined && typeof targetPort !== 'string' && !Number.isSafeInteger(targetPort)) return NOT_PLAIN;
  if (nodePort !== undefined && !isPort(nodePort)) return NOT_PLAIN;
  const out: Dict = { name, protocol, port };
  put(out, 'targetPort', targetPort);
  put(out, 'nodePort', nodePort);
  return out as Service['spec']['ports'][number];
}

/** Each element through `item`; NOT_PLAIN when `v` is not an array or an element fails. */
function arrayOf<T>(v: unknown, item: (x: unknown) => Out<T>): Out<T[]> {
  if (!Array.isArray(v)) return NOT_PLAIN;
  const out: T[] = new Array(v.length);
  for (let i = 0; i < v.length; i++) {
    const x = item(v[i]);
    if (x === NOT_PLAIN) return NOT_PLAIN;
    out[i] = x;
  }
  return out;
}

function ipString(v: unknown): Out<string> {
  return typeof v === 'string' && familyOf(v) !== null ? v : NOT_PLAIN;
}

/** z.array(z.object({ name: z.string() })).optional(): hints' forZones and forNodes. */
function names(v: unknown): Out<Array<{ name: string }> | undefined> {
  if (v === undefined) return undefined;
  return arrayOf(v, (x) => (isDict(x) && typeof x.name === 'string' ? { name: x.name } : NOT_PLAIN));
}

type AffinityConfig = NonNullable<Service['spec']['sessionAffinityConfig']>;

/** spec.sessionAffinityConfig (optional). */
function affinityConfig(v: unknown): Out<AffinityConfig | undefined> {
  if (v === undefined) return undefined;
  if (!isDict(v)) return NOT_PLAIN;
  const c = v.clientIP;
  if (c === undefined) return {};
  if (!isDict(c)) return NOT_PLAIN;
  const t = c.timeoutSeconds;
  if (t === undefined) return { clientIP: {} };
  return intIn(t, 1, 86400) ? { clientIP: { timeoutSeconds: t } } : NOT_PLAIN;
}

/** The Service's spec. */
function serviceSpec(v: unknown): Out<Service['spec']> {
  if (!isDict(v)) return NOT_PLAIN;
  const type = oneOf(v.type, SERVICE_TYPES, 'ClusterIP');
  const clusterIP = optString(v.clusterIP);
  const clusterIPs = v.clusterIPs === undefined ? undefined : stringArray(v.clusterIPs);
  const ipFamilies = v.ipFamilies === undefined ? undefined : arrayOf(v.ipFamilies, (x) => oneOf(x, IP_FAMILIES));
  const ports = v.ports === undefined ? [] : arrayOf(v.ports, servicePort);
  const externalIPs = v.externalIPs === undefined ? [] : arrayOf(v.externalIPs, ipString);
  const loadBalancerSourceRanges = v.loadBalancerSourceRanges === undefined ? [] : stringArray(v.loadBalancerSourceRanges);
  const externalTrafficPolicy = oneOf(v.externalTrafficPolicy, TRAFFIC_POLICIES, 'Cluster');
  const internalTrafficPolicy = oneOf(v.internalTrafficPolicy, TRAFFIC_POLICIES, 'Cluster');
  const { healthCheckNodePort } = v;
  const sessionAffinity = oneOf(v.sessionAffinity, SESSION_AFFINITIES, 'None');
  const sessionAffinityConfig = affinityConfig(v.sessionAffinityConfig);
  const externalName = optString(v.externalName);
  const trafficDistribution = optString(v.trafficDistribution);
  if (
    type === NOT_PLAIN || clusterIP === NOT_PLAIN || clusterIPs === NOT_PLAIN || ipFamilies === NOT_PLAIN || ports === NOT_PLAIN ||
    externalIPs === NOT_PLAIN || loadBalancerSourceRanges === NOT_PLAIN || externalTrafficPolicy === NOT_PLAIN ||
    internalTrafficPolicy === NOT_PLAIN || (healthCheckNodePort !== undefined && !isPort(healthCheckNodePort)) ||
    sessionAffinity === NOT_PLAIN || sessionAffinityConfig === NOT_PLAIN || externalName === NOT_PLAIN || trafficDistribution === NOT_PLAIN
  ) {
    return NOT_PLAIN;
  }
  const out: Dict = { type };
  put(out, 'clusterIP', clusterIP);
  put(out, 'clusterIPs', clusterIPs);
  put(out, 'ipFamilies', ipFamilies);
  out.ports = ports;
  out.externalIPs = externalIPs;
  out.loadBalancerSourceRanges = loadBalancerSourceRanges;
  out.externalTrafficPolicy = externalTrafficPolicy;
  out.internalTrafficPolicy = internalTrafficPolicy;
  put(out, 'healthCheckNodePort', healthCheckNodePort);
  out.sessionAffinity = sessionAffinity;
  put(out, 'sessionAffinityConfig', sessionAffinityConfig);
  put(out, 'externalName', externalName);
  put(out, 'trafficDistribution', trafficDistribution);
  return out as Service['spec'];
}

/** serviceSchema.parse(raw) when raw is plain (see the file comment), else NOT_PLAIN. */
export function plainService(raw: unknown): Out<Service> {
  if (!isDict(raw)) return NOT_PLAIN;
  if ((raw.apiVersion !== undefined && raw.apiVersion !== 'v1') || (raw.kind !== undefined && raw.kind !== 'Service')) return NOT_PLAIN;
  const md = metadata(raw.metadata);
  const spec = md === NOT_PLAIN ? NOT_PLAIN : serviceSpec(raw.spec);
  const status = spec === NOT_PLAIN ? NOT_PLAIN : serviceStatus(raw.status);
  if (md === NOT_PLAIN || spec === NOT_PLAIN || status === NOT_PLAIN) return NOT_PLAIN;
  return { apiVersion: 'v1', kind: 'Service', metadata: md, spec, status };
}

type Ingress = Service['status']['loadBalancer']['ingress'][number];

function ingress(v: unknown): Out<Ingress> {
  if (!isDict(v)) return NOT_PLAIN;
  return optionals([['ip', v.ip === undefined ? undefined : ipString(v.ip)], ['hostname', optString(v.hostname)], ['ipMode', optString(v.ipMode)]]) as Out<Ingress>;
}

/** status: the load balancer's ingress (defaults: no ingress). */
function serviceStatus(v: unknown): Out<Service['status']> {
  if (v === undefined) return { loadBalancer: { ingress: [] } };
  if (!isDict(v)) return NOT_PLAIN;
  const lb = v.loadBalancer;
  if (lb === undefined) return { loadBalancer: { ingress: [] } };
  if (!isDict(lb)) return NOT_PLAIN;
  const list = lb.ingress === undefined ? [] : arrayOf(lb.ingress, ingress);
  return list === NOT_PLAIN ? NOT_PLAIN : { loadBalancer: { ingress: list } };
}

type Endpoint = EndpointSlice['endpoints'][number];

function optBool(v: unknown): Out<boolean | undefined> {
  return v === undefined || typeof v === 'boolean' ? v : NOT_PLAIN;
}

type Hints = NonNullable<Endpoint['hints']>;

function hints(v: unknown): Out<Hints | undefined> {
  if (v === undefined) return undefined;
  if (!isDict(v)) return NOT_PLAIN;
  return optionals([['forZones', names(v.forZones)], ['forNodes', names(v.forNodes)]]) as Out<Hints>;
}

/** An endpoint's conditions (each optional). Not through optionals(): its pairs were ~0.5 kB per endpoint. */
function endpointConditions(c: unknown): Out<Endpoint['conditions']> {
  if (c === undefined) return {};
  if (!isDict(c)) return NOT_PLAIN;
  const { ready, serving, terminating } = c;
  if (optBool(ready) === NOT_PLAIN || optBool(serving) === NOT_PLAIN || optBool(terminating) === NOT_PLAIN) return NOT_PLAIN;
  const out: Dict = {};
  put(out, 'ready', ready);
  put(out, 'serving', serving);
  put(out, 'terminating', terminating);
  return out as Endpoint['conditions'];
}

/** An endpoint. */
function endpoint(v: unknown): Out<Endpoint> {
  if (!isDict(v)) return NOT_PLAIN;
  const addresses = stringArray(v.addresses);
  if (addresses === NOT_PLAIN || addresses.length === 0) return NOT_PLAIN;
  const conditions = endpointConditions(v.conditions);
  if (conditions === NOT_PLAIN) return NOT_PLAIN;
  const nodeName = optString(v.nodeName);
  const zone = optString(v.zone);
  const hostname = optString(v.hostname);
  const h = hints(v.hints);
  if (nodeName === NOT_PLAIN || zone === NOT_PLAIN || hostname === NOT_PLAIN || h === NOT_PLAIN) return NOT_PLAIN;
  const out: Dict = { addresses, conditions };
  put(out, 'nodeName', nodeName);
  put(out, 'zone', zone);
  put(out, 'hostname', hostname);
  put(out, 'hints', h);
  return out as Endpoint;
}

function slicePort(v: unknown): Out<EndpointSlice['ports'][number]> {
  if (!isDict(v)) return NOT_PLAIN;
  const name = v.name === undefined ? '' : v.name;
  const protocol = oneOf(v.protocol, K8S_PROTOCOLS, 'TCP');
  const { port } = v;
  if (typeof name !== 'string' || protocol === NOT_PLAIN || (port !== undefined && !isPort(port))) return NOT_PLAIN;
  const out: Dict = { name, protocol };
  put(out, 'port', port);
  return out as EndpointSlice['ports'][number];
}

/** endpointSliceSchema.parse(raw) when raw is plain (see the file comment), else NOT_PLAIN. */
export function plainEndpointSlice(raw: unknown): Out<EndpointSlice> {
  if (!isDict(raw)) return NOT_PLAIN;
  if ((raw.apiVersion !== undefined && raw.apiVersion !== 'discovery.k8s.io/v1') || (raw.kind !== undefined && raw.kind !== 'EndpointSlice')) return NOT_PLAIN;
  const md = metadata(raw.metadata);
  const addressType = oneOf(raw.addressType, ADDRESS_TYPES);
  const endpoints = raw.endpoints == null ? [] : arrayOf(raw.endpoints, endpoint);
  const ports = raw.ports == null ? [] : arrayOf(raw.ports, slicePort);
  if (md === NOT_PLAIN || addressType === NOT_PLAIN || endpoints === NOT_PLAIN || ports === NOT_PLAIN) return NOT_PLAIN;
  return { apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', metadata: md, addressType, endpoints, ports };
}

type Taint = Node['spec']['taints'][number];

function taint(v: unknown): Out<Taint> {
  if (!isDict(v) || typeof v.key !== 'string') return NOT_PLAIN;
  const rest = optionals([['value', optString(v.value)], ['effect', optString(v.effect)]]);
  return rest === NOT_PLAIN ? NOT_PLAIN : ({ key: v.key, ...rest } as Taint);
}

function nodeAddress(v: unknown): Out<Node['status']['addresses'][number]> {
  return isDict(v) && typeof v.type === 'string' && typeof v.address === 'string' ? { type: v.type, address: v.address } : NOT_PLAIN;
}

/** nodeSchema.parse(raw) when raw is plain (see the file comment), else NOT_PLAIN. */
export function plainNode(raw: unknown): Out<Node> {
  if (!isDict(raw)) return NOT_PLAIN;
  if ((raw.apiVersion !== undefined && raw.apiVersion !== 'v1') || (raw.kind !== undefined && raw.kind !== 'Node')) return NOT_PLAIN;
  const md = metadata(raw.metadata, true);
  const { spec, status } = raw;
  if (md === NOT_PLAIN || (spec !== undefined && !isDict(spec)) || (status !== undefined && !isDict(status))) return NOT_PLAIN;
  const podCIDRs = spec?.podCIDRs === undefined ? [] : stringArray(spec.podCIDRs);
  const taints = spec?.taints === undefined ? [] : arrayOf(spec.taints, taint);
  const addresses = status?.addresses === undefined ? [] : arrayOf(status.addresses, nodeAddress);
  if (podCIDRs === NOT_PLAIN || taints === NOT_PLAIN || addresses === NOT_PLAIN) return NOT_PLAIN;
  return { apiVersion: 'v1', kind: 'Node', metadata: md, spec: { podCIDRs, taints }, status: { addresses } };
}
