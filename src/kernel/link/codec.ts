// Links, addresses and local routes <-> the addon's "rtnl.link" / "rtnl.addr" / "rtnl.route"
// messages, and input checks.
import { constants as os } from 'node:os';

import { constantsOf, type NlMessage, type NlRequest } from '../../native/binding.js';
import { bytesToIp, canonicalIp, familyOf, ipToBytes, type Family } from '../../model/ip.js';
import { NetlinkError, ValidationError } from '../errors.js';
import type { InterfaceAddress, Link } from './types.js';

const R = constantsOf('rtnl');
const N = constantsOf('netlink');

const AF: Record<Family, number> = { ipv4: N.AF_INET!, ipv6: N.AF_INET6! };
export const HOST_PREFIX: Record<Family, number> = { ipv4: 32, ipv6: 128 };

/** Throws a ValidationError unless `name` is a valid interface name. */
export function checkLinkName(op: string, name: unknown): asserts name is string {
  // NOTE: the kernel's rule is dev_valid_name() in net/core/dev.c: 1..IFNAMSIZ-1 bytes,
  // not "." or "..", no '/', ':' or whitespace.
  if (typeof name !== 'string') throw new ValidationError(op, 'name', 'expected a string');
  const bytes = Buffer.byteLength(name);
  if (bytes === 0 || bytes >= R.IFNAMSIZ!) throw new ValidationError(op, 'name', `"${name}" must be 1..${R.IFNAMSIZ! - 1} bytes`);
  if (name === '.' || name === '..' || /[/:\s]/.test(name)) throw new ValidationError(op, 'name', `"${name}" is not a valid interface name`);
}

/** Parses an address for the dummy link (a plain IP; a host prefix /32 or /128 is accepted too). */
export function parseHostAddress(op: string, field: string, input: unknown): { address: string; family: Family } {
  if (typeof input !== 'string') throw new ValidationError(op, field, `${JSON.stringify(input)} is not an IP address`);
  const slash = input.indexOf('/');
  const ip = slash < 0 ? input : input.slice(0, slash);
  const family = ip.includes('%') ? null : familyOf(ip);
  if (!family) throw new ValidationError(op, field, `"${input}" is not an IP address`);
  if (slash >= 0 && input.slice(slash + 1) !== String(HOST_PREFIX[family])) {
    throw new ValidationError(op, field, `"${input}": only host prefixes (/32, /128) are managed`);
  }
  return { address: canonicalIp(ip), family };
}

/** RTM_GETLINK for one link by name (answered with one RTM_NEWLINK, or ENODEV). */
export function getLinkRequest(name: string): NlRequest {
  return { type: R.RTM_GETLINK!, header: { family: N.AF_UNSPEC! }, attrs: { ifname: name, extMask: R.RTEXT_FILTER_SKIP_STATS! } };
}

/** RTM_GETLINK dump of every link, without statistics. */
export function dumpLinksRequest(): NlRequest {
  return { type: R.RTM_GETLINK!, header: { family: N.AF_UNSPEC! }, attrs: { extMask: R.RTEXT_FILTER_SKIP_STATS! } };
}

/** RTM_NEWLINK creating a dummy link; EEXIST when the name is taken. Left down, as kube-proxy leaves it. */
export function newDummyRequest(name: string): NlRequest {
  return {
    type: R.RTM_NEWLINK!,
    flags: N.NLM_F_CREATE! | N.NLM_F_EXCL!,
    header: { family: N.AF_UNSPEC! },
    attrs: { ifname: name, linkInfo: { kind: 'dummy' } },
  };
}

/** RTM_NEWLINK setting IFF_UP on an existing link (ifi_change masks the one flag). */
export function setLinkUpRequest(index: number): NlRequest {
  return { type: R.RTM_NEWLINK!, header: { family: N.AF_UNSPEC!, index, flags: R.IFF_UP!, change: R.IFF_UP! } };
}

/** RTM_DELLINK by index. */
export function deleteLinkRequest(index: number): NlRequest {
  return { type: R.RTM_DELLINK!, header: { family: N.AF_UNSPEC!, index } };
}

/**
 * RTM_NEWADDR / RTM_DELADDR of a host address (/32, /128) on link `index`. IPv6 gets
 * IFA_F_NODAD so the address is usable at once even on a link that does DAD.
 */
export function addressRequest(kind: 'add' | 'delete', index: number, address: string): NlRequest {
  const family = familyOf(address);
  if (!family) throw new Error(`invalid IP address ${JSON.stringify(address)}`);
  const bytes = Buffer.from(ipToBytes(address));
  const add = kind === 'add';
  // NOTE: both IFA_LOCAL and IFA_ADDRESS, as iproute2 sends them. A delete matches the
  // prefix length too (inet_rtm_deladdr in net/ipv4/devinet.c, inet6_addr_del in net/ipv6/addrconf.c).
  return {
    type: add ? R.RTM_NEWADDR! : R.RTM_DELADDR!,
    ...(add ? { flags: N.NLM_F_CREATE! | N.NLM_F_EXCL! } : {}),
    header: {
      family: AF[family],
      prefixLen: HOST_PREFIX[family],
      flags: add && family === 'ipv6' ? R.IFA_F_NODAD! : 0,
      scope: R.RT_SCOPE_UNIVERSE!,
      index,
    },
    attrs: { local: bytes, address: bytes },
  };
}

/**
 * The protocol (rtm_protocol) of the local routes the link client adds: tells them from the
 * kernel's own for a bound address (RTPROT_KERNEL) and from anyone else's. Not RTPROT_STATIC:
 * `ip route add … proto static` and systemd-networkd give an operator's routes that one, and the
 * routes this client lists are the ones the proxy deletes. The kernel does not read values above
 * RTPROT_STATIC; this one is in no `/etc/iproute2/rt_protos`.
 */
export const LOCAL_ROUTE_PROTOCOL = 107;

/**
 * RTM_NEWROUTE / RTM_DELROUTE of a host route of type `local` in the local table through link
 * `index` (`ip route prepend local 10.96.0.1/32 dev kube-ipvs0 table local proto 107 scope
 * host`): the address is the node's without being an address of any link.
 */
export function localRouteRequest(kind: 'add' | 'delete', index: number, address: string): NlRequest {
  const family = familyOf(address);
  if (!family) throw new Error(`invalid IP address ${JSON.stringify(address)}`);
  const add = kind === 'add';
  // NOTE: CREATE without EXCL: a route that differs from the kernel's own for an address of the
  // same IP only by its protocol is inserted ahead of it instead of refused (fib_table_insert in
  // net/ipv4/fib_trie.c; IPv6 tells them apart by metric), so an address can become a route with
  // no gap; our own route again is EEXIST. No preferred source: the node's connections to a local
  // destination come from that destination (ip_route_output_key_hash_rcu), and a route with one
  // goes when an address of it is deleted (fib_sync_down_addr). A delete names the protocol, so
  // the kernel's route for an address is left alone.
  return {
    type: add ? R.RTM_NEWROUTE! : R.RTM_DELROUTE!,
    ...(add ? { flags: N.NLM_F_CREATE! } : {}),
    header: {
      family: AF[family],
      dstLen: HOST_PREFIX[family],
      table: R.RT_TABLE_LOCAL!,
      protocol: LOCAL_ROUTE_PROTOCOL,
      scope: R.RT_SCOPE_HOST!,
      type: R.RTN_LOCAL!,
    },
    attrs: { dst: Buffer.from(ipToBytes(address)), oif: index },
  };
}

/**
 * RTM_GETROUTE dump of one family's local routes of ours through link `index`. The kernel walks
 * only the local table and sends only the routes of our protocol, type and link when the socket
 * asks for strict checking (the addon's rtnetlink sockets do): one pass over a node's full routing
 * table per verification otherwise. ENOENT when the family has no local table yet.
 */
export function dumpLocalRoutesRequest(family: Family, index: number): NlRequest {
  return {
    type: R.RTM_GETROUTE!,
    header: { family: AF[family], table: R.RT_TABLE_LOCAL!, protocol: LOCAL_ROUTE_PROTOCOL, type: R.RTN_LOCAL! },
    attrs: { oif: index },
  };
}

/** A route as parseRoute reads it: a host route's destination, the link it goes out of, its type and protocol. */
export interface LocalRoute {
  address: string;
  family: Family;
  prefixLength: number;
  oif: number;
  table: number;
  type: number;
  protocol: number;
}

interface RouteAttrs {
  dst?: Uint8Array;
  oif?: number;
  table?: number;
}

/** A route from an RTM_NEWROUTE message; null for other families and routes without a destination or link. Throws EBADMSG on a bad length. */
export function parseRoute(op: string, msg: Pick<NlMessage, 'header' | 'attrs'>): LocalRoute | null {
  const h = msg.header;
  const family = headerFamily(h);
  const a = msg.attrs as RouteAttrs;
  if (!family || !a.dst || a.oif === undefined) return null;
  if (a.dst.length !== (family === 'ipv4' ? 4 : 16)) throw malformed(op, `${family} route destination of ${a.dst.length} bytes`);
  return {
    address: bytesToIp(a.dst, family),
    family,
    prefixLength: h.dstLen ?? 0,
    oif: a.oif,
    table: a.table ?? h.table ?? 0,
    type: h.type ?? 0,
    protocol: h.protocol ?? 0,
  };
}

/** RTM_GETADDR dump of every address of both families (the kernel does not filter by link unless asked strictly). */
export function dumpAddressesRequest(): NlRequest {
  return { type: R.RTM_GETADDR!, header: { family: N.AF_UNSPEC! } };
}

/** The IP family of a reply's fixed header (ifaddrmsg, rtmsg), or null for another family. */
function headerFamily(h: NlMessage['header']): Family | null {
  return h.family === N.AF_INET ? 'ipv4' : h.family === N.AF_INET6 ? 'ipv6' : null;
}

function malformed(op: string, what: string): NetlinkError {
  return new NetlinkError({ op, code: 'EBADMSG', errno: os.errno.EBADMSG, message: `${op}: malformed reply: ${what}` });
}

interface LinkAttrs {
  ifname?: string;
  linkInfo?: { kind?: string };
}

/** A link from an RTM_NEWLINK message; throws EBADMSG when it has no name. */
export function parseLink(op: string, msg: NlMessage): Link {
  const a = msg.attrs as LinkAttrs;
  if (typeof a.ifname !== 'string' || a.ifname === '') throw malformed(op, 'link without IFLA_IFNAME');
  const h = msg.header;
  return { index: h.index ?? 0, name: a.ifname, kind: a.linkInfo?.kind ?? null, up: ((h.flags ?? 0) & R.IFF_UP!) !== 0 };
}

interface AddrAttrs {
  address?: Uint8Array;
  local?: Uint8Array;
  flags?: number;
}

/** An address from an RTM_NEWADDR message; null for families other than IPv4/IPv6. Throws EBADMSG on a bad length. */
export function parseAddress(op: string, msg: Pick<NlMessage, 'header' | 'attrs'>): InterfaceAddress | null {
  const h = msg.header;
  const family = headerFamily(h);
  if (!family) return null;
  const a = msg.attrs as AddrAttrs;
  const bytes = a.local ?? a.address;
  const want = family === 'ipv4' ? 4 : 16;
  if (!bytes || bytes.length !== want) throw malformed(op, `${family} address of ${bytes?.length ?? 0} bytes`);
  return {
    address: bytesToIp(bytes, family),
    family,
    prefixLength: h.prefixLen ?? 0,
    index: h.index ?? 0,
    flags: a.flags ?? h.flags ?? 0,
    scope: h.scope ?? 0,
  };
}

/** True for 127.0.0.0/8 and ::1 (kube-proxy: net.IP.IsLoopback). */
export function isLoopback(address: string, family: Family): boolean {
  return family === 'ipv4' ? address.startsWith('127.') : address === '::1';
}

/** True for IPv6 link-local unicast fe80::/10 (kube-proxy: net.IP.IsLinkLocalUnicast, IPv6 only). */
export function isIpv6LinkLocal(address: string, family: Family): boolean {
  return family === 'ipv6' && /^fe[89ab][0-9a-f]:/.test(address);
}
