// Manifest text for the demo's Services and EndpointSlices in the kernel end-to-end tests: the
// backends be1..be3 (10.244.N.2, HTTP on 8080) in namespace demo unless told otherwise.
import { dump } from 'js-yaml';

/** `object` as YAML: the top two levels in block style, what is below them in flow style; undefined members left out. */
const yaml = (object: object): string => dump(object, { flowLevel: 2, skipInvalid: true, noRefs: true, lineWidth: -1 }).trimEnd();

/** Documents as one manifest file, each behind its `---`. */
export const docs = (...texts: string[]): string => texts.map((t) => `---\n${t}\n`).join('');

/** The address of demo backend `n` (be1: 10.244.1.2). */
export const backendIP = (n: number): string => `10.244.${n}.2`;

/** One endpoint of a slice. */
export interface Endpoint {
  address: string;
  /** Its nodeName (kip-node unless given); null for none. */
  node?: string | null;
  /** Its conditions; {ready: true} unless given. */
  conditions?: Record<string, boolean>;
  /** The zone hinted for it (hints.forZones), if any. */
  zone?: string;
}

/** The three demo backends, on `node`. */
export const demoEndpoints = (node = 'kip-node'): Endpoint[] => [1, 2, 3].map((n) => ({ address: backendIP(n), node }));

/** The EndpointSlice `<service>-1` of `service` (namespace demo, port http 8080/TCP unless told otherwise). */
export function demoSlice(service: string, endpoints: Endpoint[], opts: { namespace?: string; name?: string; portName?: string } = {}): string {
  const { namespace = 'demo', name = `${service}-1`, portName = 'http' } = opts;
  return yaml({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name, namespace, labels: { 'kubernetes.io/service-name': service } },
    addressType: 'IPv4',
    ports: [{ name: portName, port: 8080, protocol: 'TCP' }],
    endpoints: endpoints.map((e) => ({
      addresses: [e.address],
      nodeName: e.node === null ? undefined : (e.node ?? 'kip-node'),
      conditions: e.conditions ?? { ready: true },
      hints: e.zone === undefined ? undefined : { forZones: [{ name: e.zone }] },
    })),
  });
}

/** Port http 80 → the backends' 8080, every demo Service's unless its spec says otherwise. */
export const HTTP_PORTS = [{ name: 'http', port: 80, targetPort: 8080 }];

/**
 * The Service `name` (namespace demo unless told otherwise) with `spec` (its ports HTTP_PORTS
 * unless given), its annotations, and `lb` as its status's load-balancer ingress IP.
 */
export function demoService(name: string, spec: Record<string, unknown>, opts: { namespace?: string; annotations?: Record<string, string>; lb?: string } = {}): string {
  const { namespace = 'demo', annotations, lb } = opts;
  return yaml({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace, annotations },
    spec: { ...spec, ports: spec.ports ?? HTTP_PORTS },
    status: lb === undefined ? undefined : { loadBalancer: { ingress: [{ ip: lb }] } },
  });
}
