// An in-memory LinkClient with the kernel's answers (EEXIST, EADDRNOTAVAIL, ENODEV), held to the
// kernel by the case table both run (test/kernel/lib/cases/link-cases.ts), with error injection,
// for unit tests of code that drives the dummy link.
import { constants as os } from 'node:os';

import type { Family } from '../../model/ip.js';
import { NetlinkError, ValidationError } from '../errors.js';
import type { LinkClient } from './client.js';
import { checkLinkName, isIpv6LinkLocal, isLoopback, parseHostAddress } from './codec.js';
import {
  DEFAULT_DUMMY_LINK,
  LinkKindError,
  type AddressResult,
  type Link,
  type LinkRef,
  type LocalAddress,
  type LocalAddressOptions,
} from './types.js';

interface FakeLink extends Link {
  /** By address, in the order added (a map: tens of thousands of addresses stay cheap). */
  addresses: Map<string, { address: string; family: Family }>;
  /** The local routes through it that the client added, by address, in the order added. */
  routes: Map<string, { address: string; family: Family }>;
}

function kernelError(op: string, code: string, object: string): NetlinkError {
  const errno = (os.errno as Record<string, number>)[code] ?? 0;
  return new NetlinkError({ op, code, errno, object });
}

/**
 * True for an address no link but lo takes (EADDRNOTAVAIL): IPv6 ::, multicast, and ::1 off lo.
 * NOTE: ipv6_add_addr() in net/ipv6/addrconf.c; IPv4 takes any address (0.0.0.0 is acknowledged
 * and not added: __inet_insert_ifa in net/ipv4/devinet.c).
 */
function unassignable(address: string, family: Family, link: string): boolean {
  return family === 'ipv6' && (address === '::' || address.startsWith('ff') || (address === '::1' && link !== 'lo'));
}

/** IPv6 address scope as the kernel ranks it (ipv6_addr_src_scope): global 14, site 5, link 2, host 1. */
function scopeRank(address: string): number {
  if (address === '::1') return 1;
  if (isIpv6LinkLocal(address, 'ipv6')) return 2;
  return /^fe[c-f][0-9a-f]:/.test(address) ? 5 : 14;
}

/**
 * A link's addresses in the kernel's dump order: IPv4 in the order added, then IPv6 by scope
 * (global first), the newest first within a scope (ipv6_link_dev_addr).
 */
function inKernelOrder(l: FakeLink, family?: Family): Array<{ address: string; family: Family }> {
  const all = [...l.addresses.values()];
  const v4 = all.filter((a) => a.family === 'ipv4');
  const v6 = all.filter((a) => a.family === 'ipv6').reverse().sort((a, b) => scopeRank(b.address) - scopeRank(a.address));
  return family === 'ipv4' ? v4 : family === 'ipv6' ? v6 : [...v4, ...v6];
}

/** LinkClient over a map of links; starts with `lo` (127.0.0.1, ::1) unless told otherwise. */
export class FakeLinkClient implements LinkClient {
  private readonly links = new Map<string, FakeLink>();
  private nextIndex = 1;
  private readonly addressFaults = new Map<string, string>();
  private readonly callFaults = new Map<string, Error>();
  /** Every call, as `method name` or `method name address`, in order. */
  readonly calls: string[] = [];

  constructor(withLoopback = true) {
    if (withLoopback) this.addLink('lo', null, true, ['127.0.0.1', '::1']);
  }

  /** Adds a link as if another program made it. */
  addLink(name: string, kind: string | null, up = true, addresses: readonly string[] = []): Link {
    const link: FakeLink = { index: this.nextIndex++, name, kind, up, addresses: new Map(), routes: new Map() };
    for (const a of addresses) {
      const p = parseHostAddress('fake', 'address', a);
      link.addresses.set(p.address, p);
    }
    this.links.set(name, link);
    return { index: link.index, name, kind, up };
  }

  /** The next add or delete of `address` fails with this errno code (e.g. 'EPERM'). */
  failAddress(address: string, code: string): void {
    this.addressFaults.set(parseHostAddress('fake', 'address', address).address, code);
  }

  /** The next call of `method` (e.g. 'ensureDummy') throws `error`. */
  failCall(method: keyof LinkClient, error: Error): void {
    this.callFaults.set(method, error);
  }

  private enter(method: string, detail?: string): void {
    this.calls.push(detail === undefined ? method : `${method} ${detail}`);
    const fault = this.callFaults.get(method);
    if (fault) {
      this.callFaults.delete(method);
      throw fault;
    }
  }

  private view(l: FakeLink): Link {
    return { index: l.index, name: l.name, kind: l.kind, up: l.up };
  }

  /**
   * The link a ref names: by name (ENODEV when missing), or by index as the kernel reads a ref
   * (undefined when no link has it: the real client then gets ENODEV per address, and an empty dump).
   */
  private find(op: string, ref: LinkRef): FakeLink | undefined {
    if (typeof ref !== 'string') return [...this.links.values()].find((l) => l.index === ref.index);
    const l = this.links.get(ref);
    if (!l) throw kernelError(op, 'ENODEV', ref);
    return l;
  }

  async ensureDummy(name: string = DEFAULT_DUMMY_LINK): Promise<{ link: Link; created: boolean }> {
    this.enter('ensureDummy', name);
    checkLinkName('link.ensureDummy', name);
    const found = this.links.get(name);
    if (found) {
      if (found.kind !== 'dummy') throw new LinkKindError('link.ensureDummy', name, 'dummy', found.kind);
      return { link: this.view(found), created: false };
    }
    return { link: this.addLink(name, 'dummy', false), created: true };
  }

  async getLink(name: string): Promise<Link | null> {
    this.enter('getLink', name);
    checkLinkName('link.get', name);
    const l = this.links.get(name);
    return l ? this.view(l) : null;
  }

  async deleteLink(name: string, opts: { kind?: string } = {}): Promise<boolean> {
    this.enter('deleteLink', name);
    checkLinkName('link.delete', name);
    const l = this.links.get(name);
    if (!l) return false;
    if (opts.kind !== undefined && l.kind !== opts.kind) throw new LinkKindError('link.delete', name, opts.kind, l.kind);
    return this.links.delete(name);
  }

  async listAddresses(link: LinkRef): Promise<string[]> {
    this.enter('listAddresses', typeof link === 'string' ? link : link.name);
    const l = this.find('link.listAddresses', link);
    return l ? inKernelOrder(l).map((a) => a.address) : [];
  }

  async addAddresses(link: LinkRef, addresses: readonly string[]): Promise<AddressResult[]> {
    return this.change('address', 'add', link, addresses);
  }

  async deleteAddresses(link: LinkRef, addresses: readonly string[]): Promise<AddressResult[]> {
    return this.change('address', 'delete', link, addresses);
  }

  async setUp(link: LinkRef): Promise<void> {
    this.enter('setUp', typeof link === 'string' ? link : link.name);
    const l = this.find('link.setUp', link);
    if (!l) throw kernelError('link.setUp', 'ENODEV', typeof link === 'string' ? link : link.name);
    l.up = true;
  }

  async listLocalRoutes(link: LinkRef): Promise<string[]> {
    this.enter('listLocalRoutes', typeof link === 'string' ? link : link.name);
    const l = this.find('link.listLocalRoutes', link);
    return l ? [...l.routes.keys()] : [];
  }

  async addLocalRoutes(link: LinkRef, addresses: readonly string[]): Promise<AddressResult[]> {
    return this.change('route', 'add', link, addresses);
  }

  async deleteLocalRoutes(link: LinkRef, addresses: readonly string[]): Promise<AddressResult[]> {
    return this.change('route', 'delete', link, addresses);
  }

  /** Adds or deletes addresses or local routes with the kernel's answers. */
  private change(what: 'address' | 'route', kind: 'add' | 'delete', link: LinkRef, addresses: readonly string[]): AddressResult[] {
    const noun = what === 'address' ? 'Address' : 'LocalRoute';
    const op = `link.${kind}${noun}`;
    this.enter(`${kind}${noun}${what === 'address' ? 'es' : 's'}`, typeof link === 'string' ? link : link.name);
    const parsed = addresses.map((input, i) => {
      try {
        return parseHostAddress(op, `addresses[${i}]`, input);
      } catch (e) {
        if (e instanceof ValidationError) return e;
        throw e;
      }
    });
    const target = parsed.some((p) => !(p instanceof ValidationError)) ? this.find(op, link) : undefined;
    const name = typeof link === 'string' ? link : link.name;
    return parsed.map((p, i): AddressResult => {
      if (p instanceof ValidationError) return { address: String(addresses[i]), ok: false, error: p };
      const object = `${p.address} dev ${target?.name ?? name}`;
      if (!target) return { address: p.address, ok: false, error: kernelError(op, 'ENODEV', object) };
      const fault = this.addressFaults.get(p.address);
      if (fault) {
        this.addressFaults.delete(p.address);
        return { address: p.address, ok: false, error: kernelError(op, fault, object) };
      }
      const fail = (code: string): AddressResult => ({ address: p.address, ok: false, error: kernelError(op, code, object) });
      if (what === 'route') {
        // NOTE: IPv6 refuses a route through a link that is down (fib6_nh_init, net/ipv6/route.c); a missing route is ESRCH.
        if (kind === 'add' && p.family === 'ipv6' && !target.up) return fail('ENETDOWN');
        if (kind === 'add' && target.routes.has(p.address)) return fail('EEXIST');
        if (kind === 'delete' && !target.routes.delete(p.address)) return fail('ESRCH');
        if (kind === 'add') target.routes.set(p.address, p);
        return { address: p.address, ok: true };
      }
      const have = target.addresses.has(p.address);
      if (kind === 'add') {
        if (unassignable(p.address, p.family, target.name)) return fail('EADDRNOTAVAIL');
        if (have) return fail('EEXIST');
        if (p.address !== '0.0.0.0') target.addresses.set(p.address, p);
      } else {
        if (!have) return fail('EADDRNOTAVAIL');
        target.addresses.delete(p.address);
        // NOTE: a link's last IPv4 address gone, the kernel flushes its IPv4 routes (fib_inetaddr_event → fib_disable_ip).
        if (p.family === 'ipv4' && ![...target.addresses.values()].some((a) => a.family === 'ipv4')) {
          for (const [a, r] of target.routes) if (r.family === 'ipv4') target.routes.delete(a);
        }
      }
      return { address: p.address, ok: true };
    });
  }

  async localAddresses(opts: LocalAddressOptions = {}): Promise<LocalAddress[]> {
    this.enter('localAddresses');
    const exclude = new Set(opts.exclude ?? []);
    const out: LocalAddress[] = [];
    // The kernel dumps every link's IPv4 addresses, then every link's IPv6 ones (links by index).
    const links = [...this.links.values()].filter((l) => !exclude.has(l.name)).sort((a, b) => a.index - b.index);
    for (const [l, family] of (['ipv4', 'ipv6'] as const).flatMap((f) => links.map((l) => [l, f] as const))) {
      for (const a of inKernelOrder(l, family)) {
        if (!opts.includeLoopback && isLoopback(a.address, a.family)) continue;
        if (!opts.includeLinkLocal && isIpv6LinkLocal(a.address, a.family)) continue;
        out.push({ address: a.address, family: a.family, interface: l.name });
      }
    }
    return out;
  }

  close(): void {}
}
