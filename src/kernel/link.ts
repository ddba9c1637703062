// The dummy interface (kube-ipvs0), its addresses and the node's local addresses, over rtnetlink.
export * from './link/types.js';
export { NetlinkLinkClient, type LinkClient } from './link/client.js';
export { isIpv6LinkLocal, parseHostAddress } from './link/codec.js';
export { FakeLinkClient } from './link/fake.js';
