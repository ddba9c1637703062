// Manifests shared by the topology end-to-end tests (IPVS in UML, iptables in a netns): the node
// `kip-node` in a zone, and the slice of Service demo/zoned over the three demo backends.
import { backendIP, demoSlice } from './demo-manifests.js';

/** Node kip-node with `topology.kubernetes.io/zone: zone`. */
export const zoneNode = (zone: string) => `
apiVersion: v1
kind: Node
metadata: {name: kip-node, labels: {kubernetes.io/hostname: kip-node, topology.kubernetes.io/zone: ${zone}}}
status: {addresses: [{type: InternalIP, address: 10.250.0.1}]}
`;

/** The slice of demo/zoned; with `hints`, be1 and be2 are for zone-a and be3 for zone-b. */
export const zonedSlice = (hints: boolean) => `
${demoSlice('zoned', [1, 2, 3].map((n) => ({ address: backendIP(n), node: `node-${n}`, zone: hints ? `zone-${n < 3 ? 'a' : 'b'}` : undefined })))}
`;
