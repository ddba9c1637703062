// Links and addresses as the rest of the program sees them.
import type { Family } from '../../model/ip.js';
import type { NetlinkError, ValidationError } from '../errors.js';

/** The dummy interface that holds service addresses, named as kube-proxy's IPVS mode names it. */
export const DEFAULT_DUMMY_LINK = 'kube-ipvs0';

/** A network interface: its index, name, kind (`dummy`, `veth`, ...; null for links without one, like lo) and IFF_UP. */
export interface Link {
  index: number;
  name: string;
  kind: string | null;
  up: boolean;
}

/** A link given by name, or as returned by getLink/ensureDummy (saves the name lookup). */
export type LinkRef = string | Pick<Link, 'index' | 'name'>;

/** One address of an interface, as an RTM_GETADDR dump reports it. */
export interface InterfaceAddress {
  address: string;
  family: Family;
  prefixLength: number;
  /** The interface index. */
  index: number;
  /** IFA_F_* bits (IFA_FLAGS when present, else ifa_flags). */
  flags: number;
  /** RT_SCOPE_* (0 universe, 253 link, 254 host). */
  scope: number;
}

/** A node address with the name of its interface (NodePort services listen on these). */
export interface LocalAddress {
  address: string;
  family: Family;
  interface: string;
}

/** What adding or deleting one address came to; `address` is canonical when it parsed. */
export type AddressResult =
  | { address: string; ok: true }
  | { address: string; ok: false; error: NetlinkError | ValidationError };

/** Filters of localAddresses(); the defaults are kube-proxy's (pkg/proxy/ipvs/netlink_linux.go isValidForSet). */
export interface LocalAddressOptions {
  /** Interfaces whose addresses are left out (missing names are ignored), e.g. the dummy link. */
  exclude?: readonly string[];
  /** Keep 127.0.0.0/8 and ::1 (default false). */
  includeLoopback?: boolean;
  /** Keep IPv6 link-local fe80::/10 (default false; IPv4 169.254/16 is always kept, as kube-proxy does). */
  includeLinkLocal?: boolean;
}

/** A link exists under the wanted name but is of another kind: it is neither reused nor deleted. */
export class LinkKindError extends Error {
  override readonly name = 'LinkKindError';
  readonly code = 'ERR_LINK_KIND';
  constructor(
    readonly op: string,
    readonly link: string,
    readonly expected: string,
    readonly actual: string | null,
  ) {
    super(`${op} ${link}: a link named ${link} exists but is ${actual ? `a ${actual}` : 'not a virtual link (no kind)'}, not a ${expected}`);
  }
}
