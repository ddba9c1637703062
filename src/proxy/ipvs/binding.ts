// How Service IPs are made local through the dummy link (docs/decisions.md): a local route each
// in the local table (`route`, the default), or an address each on the link (`address`, as
// kube-proxy). The kernel binds N addresses to one link in O(N²) (each add walks the link's
// list); N routes go into the FIB trie in O(N log N). The other form found on the link is a
// stray: at each node step the wanted ones are bound this way first, then every stray removed,
// so switching forms (or taking over from kube-proxy) never leaves a Service IP unbound.
import type { AddressBinding } from '../../config.js';
import { isExist } from '../../kernel/errors.js';
import { isIpv6LinkLocal, type AddressResult, type LinkClient, type LinkRef } from '../../kernel/link.js';
import { inCidr } from '../../model/ip.js';
import type { ObjectError } from '../../model/service.js';

/** One form of binding: how its IPs are listed, added and deleted. */
export interface BindingForm {
  /** What the log and errors call one of them. */
  readonly noun: string;
  list(link: LinkClient, dummy: LinkRef): Promise<string[]>;
  change(link: LinkClient, kind: 'add' | 'delete', dummy: LinkRef, addresses: readonly string[]): Promise<AddressResult[]>;
}

const FORMS: Record<AddressBinding, BindingForm> = {
  route: {
    noun: 'local route',
    list: (link, dummy) => link.listLocalRoutes(dummy),
    change: (link, kind, dummy, addresses) => (kind === 'add' ? link.addLocalRoutes(dummy, addresses) : link.deleteLocalRoutes(dummy, addresses)),
  },
  address: {
    noun: 'address',
    list: (link, dummy) => link.listAddresses(dummy),
    change: (link, kind, dummy, addresses) => (kind === 'add' ? link.addAddresses(dummy, addresses) : link.deleteAddresses(dummy, addresses)),
  },
};

/** The form Service IPs are bound in. */
export function boundForm(how: AddressBinding): BindingForm {
  return FORMS[how];
}

/** True for what is never a stray: IPv6 link-local (the kernel's own on an up link) and --ipvs-exclude-cidrs. */
function kept(address: string, excludeCIDRs: readonly string[]): boolean {
  return isIpv6LinkLocal(address, 'ipv6') || excludeCIDRs.some((c) => inCidr(address, c));
}

/** The link a conversion bridges through: always up, and it never loses its last IPv4 address. */
export const BRIDGE_LINK = 'lo';

/**
 * Finds the dummy's IPs bound in the other form; binds the wanted ones in `how`'s form, then
 * removes every stray (an IP that could not be bound the new way keeps its old one). `bound`: the
 * IPs now bound in `how`'s form (or already were); `errors`: one per IP that failed.
 *
 * NOTE: when the dummy's last IPv4 address is deleted, the kernel flushes every IPv4 route
 * through it (fib_inetaddr_event → fib_disable_ip, net/ipv4/fib_frontend.c). So addresses become
 * routes over a bridge: each wanted IP gets a local route through lo first, the addresses go, the
 * routes through the dummy are added, and then the bridge goes. No moment leaves one unbound.
 */
export async function convertStrays(
  link: LinkClient,
  dummy: LinkRef,
  how: AddressBinding,
  wanted: ReadonlyMap<string, number>,
  excludeCIDRs: readonly string[],
): Promise<{ bound: string[]; errors: ObjectError[] }> {
  const stray = FORMS[how === 'route' ? 'address' : 'route'];
  const found = (await stray.list(link, dummy)).filter((a) => !kept(a, excludeCIDRs));
  if (found.length === 0) return { bound: [], errors: [] };
  const name = typeof dummy === 'string' ? dummy : dummy.name;
  const errors: ObjectError[] = [];
  const fail = (form: BindingForm, r: { address: string; error: Error }, dev = name) => errors.push({ object: `${form.noun} ${r.address} dev ${dev}`, reason: r.error.message });
  const taken = (r: AddressResult) => r.ok || isExist(r.error);
  type Failed = AddressResult & { ok: false };
  const wantedStrays = found.filter((a) => wanted.has(a));
  const bridged: string[] = [];
  const keep = new Set<string>();
  // Route: the bridge through lo. Address: the addresses themselves (a route through the dummy goes with nothing).
  const first = how === 'route' ? FORMS.route.change(link, 'add', BRIDGE_LINK, wantedStrays) : FORMS.address.change(link, 'add', dummy, wantedStrays);
  for (const r of await first) {
    if (taken(r)) bridged.push(r.address);
    else {
      keep.add(r.address);
      fail(FORMS[how], r as Failed, how === 'route' ? BRIDGE_LINK : name);
    }
  }
  for (const r of await stray.change(link, 'delete', dummy, found.filter((a) => !keep.has(a)))) if (!r.ok) fail(stray, r);
  if (how === 'address') return { bound: bridged, errors };
  const bound = (await FORMS.route.change(link, 'add', dummy, [...wanted.keys()])).filter(taken).map((r) => r.address);
  for (const r of await FORMS.route.change(link, 'delete', BRIDGE_LINK, bridged)) if (!r.ok) fail(FORMS.route, r, BRIDGE_LINK);
  return { bound, errors };
}

/** Deletes local routes of ours through lo: a bridge a conversion stopped half-way left. */
export async function dropBridges(link: LinkClient): Promise<ObjectError[]> {
  const left = await link.listLocalRoutes(BRIDGE_LINK);
  const results = left.length === 0 ? [] : await link.deleteLocalRoutes(BRIDGE_LINK, left);
  return results.filter((r): r is AddressResult & { ok: false } => !r.ok).map((r) => ({ object: `local route ${r.address} dev ${BRIDGE_LINK}`, reason: r.error.message }));
}
