// Manifests shared by the topology end-to-end tests (IPVS in UML, iptables in a netns): the node
// `kip-node` in a zone, and the slice of Service demo/zoned over the three demo backends.

/** Node kip-node with `topology.kubernetes.io/zone: zone`. */
export const zoneNode = (zone: string) => `
apiVersion: v1
kind: Node
metadata: {name: kip-node, labels: {kubernetes.io/hostname: kip-node, topology.kubernetes.io/zone: ${zone}}}
status: {addresses: [{type: InternalIP, address: 10.250.0.1}]}
`;

/** The slice of demo/zoned; with `hints`, be1 and be2 are for zone-a and be3 for zone-b. */
export const zonedSlice = (hints: boolean) => `
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: zoned-1, namespace: demo, labels: {kubernetes.io/service-name: zoned}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
${[1, 2, 3]
  .map((i) => `- {addresses: [10.244.${i}.2], nodeName: node-${i}, conditions: {ready: true}${hints ? `, hints: {forZones: [{name: zone-${i < 3 ? 'a' : 'b'}}]}` : ''}}`)
  .join('\n')}
`;
