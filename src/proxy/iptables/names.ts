// Chain names of kube-proxy's iptables mode (pkg/proxy/iptables/proxier.go): the fixed top-level
// chains, and per service port KUBE-SVC/SVL/EXT/FW-<hash> and per endpoint KUBE-SEP-<hash>, where
// <hash> is the first 16 base32 characters of sha256(port name + protocol [+ endpoint]). The
// names depend only on the Service, so they are stable across restarts and equal kube-proxy's.
import { createHash } from 'node:crypto';

import type { EndpointInfo, ServicePortName } from '../../model/service.js';

/** The fixed chains of the iptables mode. */
export const CHAIN = {
  SERVICES: 'KUBE-SERVICES',
  EXTERNAL_SERVICES: 'KUBE-EXTERNAL-SERVICES',
  NODEPORTS: 'KUBE-NODEPORTS',
  POSTROUTING: 'KUBE-POSTROUTING',
  MARK_MASQ: 'KUBE-MARK-MASQ',
  FORWARD: 'KUBE-FORWARD',
  PROXY_FIREWALL: 'KUBE-PROXY-FIREWALL',
} as const;

/** Prefixes of the per-service and per-endpoint chains (kube-proxy's isServiceChainName). */
export const SERVICE_CHAIN_PREFIXES = ['KUBE-SVC-', 'KUBE-SVL-', 'KUBE-EXT-', 'KUBE-FW-', 'KUBE-SEP-'] as const;

/** True for a per-service or per-endpoint chain name. */
export function isServiceChain(name: string): boolean {
  return SERVICE_CHAIN_PREFIXES.some((p) => name.startsWith(p));
}

const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** RFC 4648 base32 (Go's base32.StdEncoding), without padding. */
export function base32(bytes: Uint8Array): string {
  let out = '';
  let value = 0;
  let bits = 0;
  for (const b of bytes) {
    value = ((value << 8) | b) & 0xffff;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += BASE32[(value << (5 - bits)) & 31];
  return out;
}

/** The first 16 base32 characters of sha256(text) (80 bits: the first 10 bytes of the digest). */
function hash16(text: string): string {
  return base32(createHash('sha256').update(text).digest().subarray(0, 10));
}

/** kube-proxy's ServicePortName.String(): `ns/name:port`, or `ns/name` for an unnamed port. */
export function portNameString(p: ServicePortName): string {
  return `${p.namespace}/${p.name}${p.port === '' ? '' : `:${p.port}`}`;
}

/** `ip:port`, `[ip6]:port` (Go's net.JoinHostPort), as DNAT's --to-destination takes it. */
export function endpointString(ep: Pick<EndpointInfo, 'address' | 'port'>): string {
  return ep.address.includes(':') ? `[${ep.address}]:${ep.port}` : `${ep.address}:${ep.port}`;
}

/** The per-service chains of one service port. */
export interface ServiceChains {
  /** Cluster traffic policy: every usable endpoint. */
  svc: string;
  /** Local traffic policy: the local endpoints. */
  svl: string;
  /** External destinations (NodePort, external IPs, load-balancer IPs). */
  ext: string;
  /** loadBalancerSourceRanges firewall. */
  fw: string;
}

/** The KUBE-SVC/SVL/EXT/FW chain names of a service port. */
export function serviceChains(p: ServicePortName): ServiceChains {
  const h = hash16(portNameString(p) + p.protocol);
  return { svc: `KUBE-SVC-${h}`, svl: `KUBE-SVL-${h}`, ext: `KUBE-EXT-${h}`, fw: `KUBE-FW-${h}` };
}

/** The KUBE-SEP chain of one endpoint of a service port. */
export function endpointChain(p: ServicePortName, ep: Pick<EndpointInfo, 'address' | 'port'>): string {
  return `KUBE-SEP-${hash16(portNameString(p) + p.protocol + endpointString(ep))}`;
}
