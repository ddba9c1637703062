// The full read of kernel state: at start-up and every sync period (drift repair). Every other
// sync works from the observed state that apply() keeps up to date from acknowledged ops.
import { isNotFound } from '../../kernel/errors.js';
import type { IpvsClient } from '../../kernel/ipvs/client.js';
import { observedDestination, serviceId } from '../../kernel/ipvs/types.js';
import type { IpsetClient } from '../../kernel/ipset/types.js';
import type { AddressBinding } from '../../config.js';
import type { LinkClient } from '../../kernel/link.js';
import { boundForm } from './binding.js';
import { DestinationTable } from './destination-table.js';
import { capacityOf, GROW_PREFIX } from './ipsets.js';
import type { ObservedState } from './types.js';

/** The kernel clients a sync uses, and the dummy link's name. */
export interface KernelClients {
  ipvs: IpvsClient;
  ipset: IpsetClient;
  link: LinkClient;
  dummyName: string;
  /** How Service IPs are bound on the dummy link (binding.ts). */
  binding: AddressBinding;
}

/** kube-proxy's prefix of the sets it owns. */
const OWNED_PREFIX = 'KUBE-';

/** A set this proxy keeps in the observed state: `KUBE-*`, except a larger copy being built (apply.ts). */
export function isOwnedSetName(name: string): boolean {
  return name.startsWith(OWNED_PREFIX) && !name.startsWith(GROW_PREFIX);
}

/** An empty observed state (nothing known). */
export function emptyObserved(): ObservedState {
  return { virtualServers: new Map(), ipsets: new Map(), ipsetCapacity: new Map(), addresses: new Set(), iptables: new Map() };
}

/** The element of a listed entry, without options (` timeout N`, ` comment "…"`, counters). */
export function element(entry: string): string {
  const space = entry.indexOf(' ');
  return space < 0 ? entry : entry.slice(0, space);
}

/**
 * Reads everything the proxy owns: every IPVS service with its destinations (one dumpAll), the
 * owned ipsets only (one list each; a missing set is simply absent; by default every set named
 * `KUBE-*`, as kube-proxy names its sets), and the addresses of the
 * dummy link (none when the link is missing). `iptables` is carried over from `previous`
 * (the iptables stage keeps it). Read errors other than "not found" are thrown.
 */
export async function readObserved(clients: KernelClients & { ownedSets?: readonly string[] }, previous?: ObservedState): Promise<ObservedState> {
  const observed = emptyObserved();
  if (previous) for (const [k, v] of previous.iptables) observed.iptables.set(k, v);

  for (const s of await clients.ipvs.dumpAll()) {
    const { destinations, stats: _stats, ...service } = s;
    observed.virtualServers.set(serviceId(service), { service, destinations: new DestinationTable(destinations.map(observedDestination)) });
  }

  const owned = clients.ownedSets ?? (await clients.ipset.listNames()).filter(isOwnedSetName);
  for (const name of owned) {
    try {
      const [info] = await clients.ipset.list(name);
      if (!info) continue;
      observed.ipsets.set(name, new Set(info.entries.map(element)));
      const capacity = capacityOf(info);
      if (capacity !== null) observed.ipsetCapacity.set(name, capacity);
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
  }

  try {
    for (const a of await boundForm(clients.binding).list(clients.link, clients.dummyName)) observed.addresses.add(a);
  } catch (e) {
    if (!isNotFound(e)) throw e;
  }
  return observed;
}
