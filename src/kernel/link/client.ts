// The link client: the dummy interface, its addresses and local routes (batched) and the node's
// local addresses.
// Like kube-proxy's IPVS mode (pkg/proxy/ipvs/netlink_linux.go), kube-ipvs0 is left DOWN: a down
// link's addresses still get local routes (NOTE: fib_add_ifaddr in net/ipv4/fib_frontend.c;
// addrconf_f6i_alloc's fc_ignore_dev_down in net/ipv6/route.c), so traffic to them is accepted.
// IPv6 adds carry IFA_F_NODAD: kube-proxy relies on the dummy's IFF_NOARP to skip DAD
// (addrconf_dad_begin, net/ipv6/addrconf.c); NODAD keeps an address usable on any link kind.
import { constants as os } from 'node:os';

import { constantsOf, type DumpOptions, type NlRequest } from '../../native/binding.js';
import { NetlinkError, ValidationError } from '../errors.js';
import { ERRORS_ONLY, NetlinkConnection } from '../netlink.js';
import { rowReader } from '../table.js';
import {
  addressRequest,
  checkLinkName,
  deleteLinkRequest,
  dumpAddressesRequest,
  dumpLinksRequest,
  dumpLocalRoutesRequest,
  getLinkRequest,
  HOST_PREFIX,
  LOCAL_ROUTE_PROTOCOL,
  localRouteRequest,
  isIpv6LinkLocal,
  isLoopback,
  newDummyRequest,
  parseAddress,
  parseHostAddress,
  parseLink,
  parseRoute,
  setLinkUpRequest,
} from './codec.js';
import {
  DEFAULT_DUMMY_LINK,
  LinkKindError,
  type AddressResult,
  type InterfaceAddress,
  type Link,
  type LinkRef,
  type LocalAddress,
  type LocalAddressOptions,
} from './types.js';

/** Everything the proxy needs from rtnetlink; implemented over netlink (and by test fakes). */
export interface LinkClient {
  /** Creates the dummy link (left down, as kube-proxy does) unless it exists; LinkKindError if the name is another kind of link. */
  ensureDummy(name?: string): Promise<{ link: Link; created: boolean }>;
  /** The link with this name, or null. */
  getLink(name: string): Promise<Link | null>;
  /** Deletes the link; false when there was none. With `kind`, refuses (LinkKindError) a link of another kind. */
  deleteLink(name: string, opts?: { kind?: string }): Promise<boolean>;
  /** The addresses on a link, canonical, in kernel order. ENODEV when the link is missing. */
  listAddresses(link: LinkRef): Promise<string[]>;
  /** Adds host addresses (/32, /128) in one batch; one result per input (EEXIST when present). */
  addAddresses(link: LinkRef, addresses: readonly string[]): Promise<AddressResult[]>;
  /** Deletes host addresses in one batch; one result per input (EADDRNOTAVAIL when absent). */
  deleteAddresses(link: LinkRef, addresses: readonly string[]): Promise<AddressResult[]>;
  /** Sets IFF_UP on the link (IPv6 refuses a route through a link that is down). */
  setUp(link: LinkRef): Promise<void>;
  /** The host routes of type local in the local table through the link that this client adds (by their protocol), canonical. ENODEV when the link is missing. */
  listLocalRoutes(link: LinkRef): Promise<string[]>;
  /** Adds local host routes through the link in one batch; one result per input (EEXIST when present). */
  addLocalRoutes(link: LinkRef, addresses: readonly string[]): Promise<AddressResult[]>;
  /** Deletes the local host routes this client added; one result per input (ESRCH when absent). */
  deleteLocalRoutes(link: LinkRef, addresses: readonly string[]): Promise<AddressResult[]>;
  /** The node's addresses on every link but the excluded ones, filtered like kube-proxy's NodePort addresses. */
  localAddresses(opts?: LocalAddressOptions): Promise<LocalAddress[]>;
  close(): void;
}

const N = constantsOf('netlink');
const R = constantsOf('rtnl');

/** rtnl.route attributes parseRoute does not read. */
const UNREAD_ROUTE_ATTRS = ['src', 'iif', 'gateway', 'priority', 'prefsrc', 'metrics', 'multipath', 'cacheInfo', 'mark', 'pref'];

/** rtnl.addr attributes parseAddress does not read: not decoded (a JS object per attribute per address). */
const UNREAD_ADDRESS_ATTRS = ['label', 'broadcast', 'anycast', 'cacheInfo', 'multicast', 'rtPriority', 'proto'];

function noSuchLink(op: string, name: string): NetlinkError {
  return new NetlinkError({ op, code: 'ENODEV', errno: os.errno.ENODEV, object: name, message: `${op} ${name}: no such link (ENODEV)` });
}

/** Turns "Unknown device type" into what it means here. */
function explainCreate(e: NetlinkError, name: string): NetlinkError {
  if (e.code !== 'EOPNOTSUPP') return e;
  return new NetlinkError({
    op: e.op,
    code: e.code,
    errno: e.errno,
    object: name,
    ...(e.extAck ? { extAck: e.extAck } : {}),
    message: `${e.op} ${name}: the kernel cannot create dummy links (EOPNOTSUPP${e.extAck ? `: ${e.extAck}` : ''}); load the dummy module or enable CONFIG_DUMMY`,
  });
}

/** LinkClient over an rtnetlink (NETLINK_ROUTE) socket. */
export class NetlinkLinkClient implements LinkClient {
  private constructor(private readonly conn: NetlinkConnection) {}

  /** Opens an rtnetlink socket in the caller's network namespace. */
  static open(): NetlinkLinkClient {
    return new NetlinkLinkClient(new NetlinkConnection(N.NETLINK_ROUTE!));
  }

  async getLink(name: string): Promise<Link | null> {
    return this.lookup('link.get', name);
  }

  private async lookup(op: string, name: string): Promise<Link | null> {
    checkLinkName(op, name);
    try {
      const replies = await this.conn.request('rtnl.link', getLinkRequest(name), op, name);
      if (!replies[0]) throw new NetlinkError({ op, code: 'EBADMSG', errno: os.errno.EBADMSG, object: name });
      return parseLink(op, replies[0]);
    } catch (e) {
      if (e instanceof NetlinkError && e.code === 'ENODEV') return null;
      throw e;
    }
  }

  async ensureDummy(name: string = DEFAULT_DUMMY_LINK): Promise<{ link: Link; created: boolean }> {
    const op = 'link.ensureDummy';
    // A link can vanish or appear between two calls: a few rounds settle it.
    for (let round = 0; round < 3; round++) {
      const found = await this.lookup(op, name);
      if (found) {
        if (found.kind !== 'dummy') throw new LinkKindError(op, name, 'dummy', found.kind);
        return { link: found, created: false };
      }
      const [outcome] = await this.conn.batch('rtnl.link', [newDummyRequest(name)], () => ({ op, object: name }));
      if (!outcome) throw new NetlinkError({ op, code: 'EIO', errno: os.errno.EIO, object: name });
      if (!outcome.ok && outcome.error.code !== 'EEXIST') throw explainCreate(outcome.error, name);
      if (outcome.ok) {
        const link = await this.lookup(op, name);
        if (link?.kind === 'dummy') return { link, created: true };
      }
    }
    throw new NetlinkError({ op, code: 'EAGAIN', errno: os.errno.EAGAIN, object: name, message: `${op} ${name}: the link keeps changing under us` });
  }

  async deleteLink(name: string, opts: { kind?: string } = {}): Promise<boolean> {
    const op = 'link.delete';
    const link = await this.lookup(op, name);
    if (!link) return false;
    if (opts.kind !== undefined && link.kind !== opts.kind) throw new LinkKindError(op, name, opts.kind, link.kind);
    try {
      await this.conn.request('rtnl.link', deleteLinkRequest(link.index), op, name);
      return true;
    } catch (e) {
      if (e instanceof NetlinkError && e.code === 'ENODEV') return false;
      throw e;
    }
  }

  private async resolve(op: string, link: LinkRef): Promise<Pick<Link, 'index' | 'name'>> {
    if (typeof link !== 'string') {
      if (!Number.isInteger(link.index) || link.index <= 0) throw new ValidationError(op, 'link.index', 'expected a positive integer');
      return link;
    }
    const found = await this.lookup(op, link);
    if (!found) throw noSuchLink(op, link);
    return found;
  }

  /** A dump as a table (only the replies `where` keeps decoded, without `omit`), each row through `parse` (null: skipped). */
  private async dumpRows<T>(schema: string, request: NlRequest, op: string, opts: DumpOptions, parse: (op: string, row: { header: Record<string, number>; attrs: Record<string, unknown> }) => T | null): Promise<T[]> {
    const t = await this.conn.dumpTable(schema, request, op, undefined, opts);
    const header = rowReader(t, 'header') as (row: number) => Record<string, number>;
    const attrs = rowReader(t);
    const out: T[] = [];
    for (let r = 0; r < t.rows; r++) {
      const v = parse(op, { header: header(r), attrs: attrs(r) });
      if (v !== null) out.push(v);
    }
    return out;
  }

  /** Addresses of the links `where` keeps (by index; filtered before decoding: kube-ipvs0 has one per Service IP). */
  private dumpAddresses(op: string, where: DumpOptions['where']): Promise<InterfaceAddress[]> {
    return this.dumpRows('rtnl.addr', dumpAddressesRequest(), op, { where, omit: UNREAD_ADDRESS_ATTRS }, parseAddress);
  }

  async listAddresses(link: LinkRef): Promise<string[]> {
    const op = 'link.listAddresses';
    const { index } = await this.resolve(op, link);
    return (await this.dumpAddresses(op, { field: 'index', in: [index] })).map((a) => a.address);
  }

  addAddresses(link: LinkRef, addresses: readonly string[]): Promise<AddressResult[]> {
    return this.change('address', 'add', link, addresses);
  }

  deleteAddresses(link: LinkRef, addresses: readonly string[]): Promise<AddressResult[]> {
    return this.change('address', 'delete', link, addresses);
  }

  async setUp(link: LinkRef): Promise<void> {
    const op = 'link.setUp';
    const target = await this.resolve(op, link);
    await this.conn.request('rtnl.link', setLinkUpRequest(target.index), op, target.name);
  }

  async listLocalRoutes(link: LinkRef): Promise<string[]> {
    const op = 'link.listLocalRoutes';
    const { index } = await this.resolve(op, link);
    // The kernel filters the dump (dumpLocalRoutesRequest); a kernel that does not is filtered
    // here: on the protocol before decoding (the kernel's own route for each address is never
    // decoded), then on the rest.
    const where = { field: 'protocol', in: [LOCAL_ROUTE_PROTOCOL] };
    const out: string[] = [];
    for (const family of ['ipv4', 'ipv6'] as const) {
      const routes = await this.dumpRows('rtnl.route', dumpLocalRoutesRequest(family, index), op, { where, omit: UNREAD_ROUTE_ATTRS }, parseRoute).catch((e: unknown) => {
        if (e instanceof NetlinkError && e.code === 'ENOENT') return []; // no local table in this family: nothing local yet
        throw e;
      });
      const ours = (r: (typeof routes)[number]) =>
        r.family === family && r.oif === index && r.type === R.RTN_LOCAL && r.table === R.RT_TABLE_LOCAL && r.prefixLength === HOST_PREFIX[family];
      for (const r of routes) if (ours(r)) out.push(r.address);
    }
    return out;
  }

  addLocalRoutes(link: LinkRef, addresses: readonly string[]): Promise<AddressResult[]> {
    return this.change('route', 'add', link, addresses);
  }

  deleteLocalRoutes(link: LinkRef, addresses: readonly string[]): Promise<AddressResult[]> {
    return this.change('route', 'delete', link, addresses);
  }

  /** Adds or deletes host addresses, or local routes, in one batch. */
  private async change(what: 'address' | 'route', kind: 'add' | 'delete', link: LinkRef, addresses: readonly string[]): Promise<AddressResult[]> {
    const op = `link.${kind}${what === 'address' ? 'Address' : 'LocalRoute'}`;
    if (!Array.isArray(addresses)) throw new ValidationError(op, 'addresses', 'expected an array');
    const results: AddressResult[] = new Array(addresses.length);
    const parsed: Array<{ i: number; address: string }> = [];
    addresses.forEach((input, i) => {
      try {
        parsed.push({ i, address: parseHostAddress(op, `addresses[${i}]`, input).address });
      } catch (e) {
        if (!(e instanceof ValidationError)) throw e;
        results[i] = { address: String(input), ok: false, error: e };
      }
    });
    if (parsed.length > 0) {
      const target = await this.resolve(op, link);
      const request = what === 'address' ? addressRequest : localRouteRequest;
      const requests: NlRequest[] = parsed.map((p) => request(kind, target.index, p.address));
      const outcomes = await this.conn.batch(what === 'address' ? 'rtnl.addr' : 'rtnl.route', requests, (j) => ({ op, object: `${parsed[j]!.address} dev ${target.name}` }), ERRORS_ONLY);
      outcomes.forEach((o, j) => {
        const { i, address } = parsed[j]!;
        results[i] = o.ok ? { address, ok: true } : { address, ok: false, error: o.error };
      });
    }
    return results;
  }

  async localAddresses(opts: LocalAddressOptions = {}): Promise<LocalAddress[]> {
    const op = 'link.localAddresses';
    const exclude = new Set(opts.exclude ?? []);
    // Links first, so the excluded links' addresses (kube-ipvs0: one per Service IP) are never
    // decoded; an address on a link created after the link dump has no name and is skipped.
    const links = await this.conn.dump('rtnl.link', dumpLinksRequest(), op);
    const names = new Map<number, string>();
    const excluded: number[] = [];
    for (const m of links) {
      const l = parseLink(op, m);
      names.set(l.index, l.name);
      if (exclude.has(l.name)) excluded.push(l.index);
    }
    const addrs = await this.dumpAddresses(op, excluded.length > 0 ? { field: 'index', notIn: excluded } : undefined);
    const out: LocalAddress[] = [];
    for (const a of addrs) {
      const name = names.get(a.index);
      if (name === undefined || exclude.has(name)) continue;
      if (!opts.includeLoopback && isLoopback(a.address, a.family)) continue;
      if (!opts.includeLinkLocal && isIpv6LinkLocal(a.address, a.family)) continue;
      out.push({ address: a.address, family: a.family, interface: name });
    }
    return out;
  }

  close(): void {
    this.conn.close();
  }
}
