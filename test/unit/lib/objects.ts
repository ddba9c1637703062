// Small validated objects for proxier tests: a one-port ClusterIP Service and its EndpointSlice.
import { endpointSliceSchema, serviceSchema } from '../../../src/model/k8s-schemas.js';

/** Service ns/`name` at cluster IP `ip`, port http 80 → 8080, with `annotations`. */
export const svc = (name: string, ip: string, annotations: Record<string, string> = {}) =>
  serviceSchema.parse({ metadata: { name, namespace: 'ns', annotations }, spec: { clusterIP: ip, ports: [{ name: 'http', port: 80, targetPort: 8080 }] } });

/** EndpointSlice ns/`name`-1 of Service `name`: port http 8080/TCP, one ready endpoint per IP. */
export const slice = (name: string, ips: string[]) =>
  endpointSliceSchema.parse({
    metadata: { name: `${name}-1`, namespace: 'ns', labels: { 'kubernetes.io/service-name': name } },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    endpoints: ips.map((ip) => ({ addresses: [ip], conditions: { ready: true } })),
  });
