// The link case table: each case a sequence of LinkClient calls and what each must come to. It
// runs against FakeLinkClient (test/unit/link-fake.test.ts) and against the kernel through
// NetlinkLinkClient in UML (test/kernel/uml/link.test.ts), so the fake cannot drift from the
// kernel. Cases use only links named kube-ipvs0 or kipc*, which the kernel run deletes after
// each case; `lo` is there (with 127.0.0.1 and ::1) in both. Link indexes are left out.
import { expect } from 'vitest';

import type { Link, LinkClient, LinkRef, LocalAddressOptions } from '../../../../src/kernel/link.js';
import { attempt, expectOutcomes, outcomeOf, type Outcome } from './outcome.js';

/** What a case needs done by "another program": the kernel run uses iproute2, the fake its addLink. */
export interface LinkWorld {
  /** Creates a link (down), as `ip link add NAME type KIND` does (a veth gets a peer). */
  addLink(name: string, kind: 'dummy' | 'veth'): Promise<void>;
  /** Adds a local host route through `dev` as an operator would (`ip route add local IP dev DEV table local proto static`). */
  addStaticRoute(dev: string, address: string): Promise<void>;
}

/** A link by name, or the link a step saved (`as`), by its index. */
type Ref = string | { saved: string };

/** One call and what it must come to. */
export type LinkStep =
  /** ensureDummy(name): created or adopted, and the link (saved under `as`), or the error. */
  | { ensureDummy: string; created: boolean; link: Omit<Link, 'index'>; as?: string }
  | { ensureDummy: string; is: Outcome }
  /** getLink(name): the link, null, or the error. */
  | { getLink: string; is: Omit<Link, 'index'> | null | Outcome }
  /** deleteLink(name, { kind }): true, false, or the error. */
  | { deleteLink: string; kind?: string; is: boolean | Outcome }
  /** listAddresses(link): the addresses (sorted, or in the kernel's order when `ordered`), or the error. */
  | { listAddresses: Ref; are: string[]; ordered?: boolean }
  | { listAddresses: Ref; is: Outcome }
  /** addAddresses / deleteAddresses: one outcome per input (with its canonical address when `addresses`), or the error. */
  | { addAddresses: Ref; of: string[]; results: Outcome[]; addresses?: string[] }
  | { addAddresses: Ref; of: string[]; is: Outcome }
  | { deleteAddresses: Ref; of: string[]; results: Outcome[] }
  | { deleteAddresses: Ref; of: string[]; is: Outcome }
  /** setUp(link). */
  | { setUp: Ref }
  /** listLocalRoutes(link): the routes' addresses (sorted), or the error. */
  | { listLocalRoutes: Ref; are: string[] }
  | { listLocalRoutes: Ref; is: Outcome }
  /** addLocalRoutes / deleteLocalRoutes: one outcome per input. */
  | { addLocalRoutes: Ref; of: string[]; results: Outcome[] }
  | { deleteLocalRoutes: Ref; of: string[]; results: Outcome[] }
  /** localAddresses(options), kept to the interfaces in `on`: `address interface` lines (sorted unless `ordered`). */
  | { localAddresses: LocalAddressOptions; on: string[]; are: string[]; ordered?: boolean }
  /** Done by another program. */
  | { outside: { addLink: string; kind: 'dummy' | 'veth' } }
  | { outside: { staticRoute: string; dev: string } };

export interface LinkCase {
  name: string;
  steps: LinkStep[];
}

const view = (l: Link | null) => (l ? { name: l.name, kind: l.kind, up: l.up } : null);

/** Runs one case against `client`, asserting every step; `world` does what another program would. */
export async function runLinkCase(client: LinkClient, world: LinkWorld, c: LinkCase): Promise<void> {
  const saved = new Map<string, Link>();
  const ref = (r: Ref): LinkRef => (typeof r === 'string' ? r : saved.get(r.saved)!);
  for (const [i, step] of c.steps.entries()) {
    const where = `${c.name}: step ${i + 1} (${Object.keys(step)[0]})`;
    if ('outside' in step) {
      if ('addLink' in step.outside) await world.addLink(step.outside.addLink, step.outside.kind);
      else await world.addStaticRoute(step.outside.dev, step.outside.staticRoute);
    }
    else if ('ensureDummy' in step) {
      const r = await attempt(() => client.ensureDummy(step.ensureDummy));
      if ('is' in step) expect(r.ok ? view(r.value.link) : outcomeOf(r, step.is), where).toEqual(step.is);
      else {
        expect(r.ok ? { created: r.value.created, link: view(r.value.link) } : outcomeOf(r, 'error'), where).toEqual({ created: step.created, link: step.link });
        if (r.ok && step.as) saved.set(step.as, r.value.link);
      }
    } else if ('getLink' in step) {
      const r = await attempt(() => client.getLink(step.getLink));
      const want = step.is;
      const wantsError = typeof want === 'string' || (want !== null && 'code' in want);
      expect(r.ok ? view(r.value) : outcomeOf(r, wantsError ? (want as Outcome) : 'error'), where).toEqual(want);
    } else if ('deleteLink' in step) {
      const r = await attempt(() => client.deleteLink(step.deleteLink, step.kind === undefined ? {} : { kind: step.kind }));
      expect(r.ok ? r.value : outcomeOf(r, typeof step.is === 'boolean' ? 'error' : step.is), where).toEqual(step.is);
    } else if ('listAddresses' in step) {
      const r = await attempt(() => client.listAddresses(ref(step.listAddresses)));
      const order = (a: string[]) => ('ordered' in step && step.ordered ? a : [...a].sort());
      if ('are' in step) expect(r.ok ? order(r.value) : outcomeOf(r, 'error'), where).toEqual(order(step.are));
      else expect(r.ok ? r.value : outcomeOf(r, step.is), where).toEqual(step.is);
    } else if ('addAddresses' in step || 'deleteAddresses' in step) {
      const call = () => ('addAddresses' in step ? client.addAddresses(ref(step.addAddresses), step.of) : client.deleteAddresses(ref(step.deleteAddresses), step.of));
      const r = await attempt(call);
      if ('is' in step) expect(r.ok ? 'ok' : outcomeOf(r, step.is), where).toEqual(step.is);
      else {
        if (!r.ok) throw r.error;
        expectOutcomes(r.value, step.results, where);
        if ('addresses' in step && step.addresses) expect(r.value.map((a) => a.address), where).toEqual(step.addresses);
      }
    } else if ('setUp' in step) {
      await client.setUp(ref(step.setUp));
    } else if ('listLocalRoutes' in step) {
      const r = await attempt(() => client.listLocalRoutes(ref(step.listLocalRoutes)));
      if ('are' in step) expect(r.ok ? [...r.value].sort() : outcomeOf(r, 'error'), where).toEqual([...step.are].sort());
      else expect(r.ok ? r.value : outcomeOf(r, step.is), where).toEqual(step.is);
    } else if ('addLocalRoutes' in step || 'deleteLocalRoutes' in step) {
      const r = await attempt(() => ('addLocalRoutes' in step ? client.addLocalRoutes(ref(step.addLocalRoutes), step.of) : client.deleteLocalRoutes(ref(step.deleteLocalRoutes), step.of)));
      if (!r.ok) throw r.error;
      expectOutcomes(r.value, step.results, where);
    } else {
      const all = await client.localAddresses(step.localAddresses);
      const lines = all.filter((a) => step.on.includes(a.interface)).map((a) => `${a.address} ${a.interface}`);
      if (step.ordered) expect(lines, where).toEqual(step.are);
      else expect(lines.sort(), where).toEqual([...step.are].sort());
    }
  }
}

const DUMMY = { name: 'kube-ipvs0', kind: 'dummy', up: false };

export const LINK_CASES: LinkCase[] = [
  {
    name: 'ensureDummy creates kube-ipvs0 as a dummy, left down; a second call adopts it',
    steps: [
      { getLink: 'kube-ipvs0', is: null },
      { ensureDummy: 'kube-ipvs0', created: true, link: DUMMY },
      { ensureDummy: 'kube-ipvs0', created: false, link: DUMMY },
      { getLink: 'kube-ipvs0', is: DUMMY },
    ],
  },
  {
    name: 'getLink: lo; null for a missing link; invalid names are refused',
    steps: [
      { getLink: 'lo', is: { name: 'lo', kind: null, up: true } },
      { getLink: 'kipc-none', is: null },
      { getLink: 'bad/name', is: 'ERR_INVALID_INPUT' },
      { getLink: 'x'.repeat(16), is: 'ERR_INVALID_INPUT' },
      { ensureDummy: 'bad/name', is: { code: 'ERR_INVALID_INPUT', op: 'link.ensureDummy' } },
    ],
  },
  {
    name: 'a link of another kind under the name: neither adopted nor deleted as a dummy',
    steps: [
      { outside: { addLink: 'kipc1', kind: 'veth' } },
      { ensureDummy: 'kipc1', is: { code: 'ERR_LINK_KIND', message: /kipc1 exists but is a veth, not a dummy/ } },
      { deleteLink: 'kipc1', kind: 'dummy', is: 'ERR_LINK_KIND' },
      { getLink: 'kipc1', is: { name: 'kipc1', kind: 'veth', up: false } },
      { deleteLink: 'kipc1', is: true },
      { deleteLink: 'kipc1', is: false },
      { getLink: 'kipc1', is: null },
      { deleteLink: 'lo', kind: 'dummy', is: { code: 'ERR_LINK_KIND', op: 'link.delete' } },
    ],
  },
  {
    name: 'a dummy another program made is adopted, and deleted as a dummy',
    steps: [
      { outside: { addLink: 'kipc2', kind: 'dummy' } },
      { ensureDummy: 'kipc2', created: false, link: { name: 'kipc2', kind: 'dummy', up: false } },
      { deleteLink: 'kipc2', kind: 'dummy', is: true },
      { getLink: 'kipc2', is: null },
    ],
  },
  {
    name: 'addresses: one result per input, canonical; EEXIST when added again, EADDRNOTAVAIL when deleted again',
    steps: [
      { ensureDummy: 'kube-ipvs0', created: true, link: DUMMY },
      {
        addAddresses: 'kube-ipvs0',
        of: ['10.96.0.1', 'FD00::1', 'bad', '10.96.0.2/32', '10.96.0.0/24', '2001:DB8:0::A/128'],
        results: ['ok', 'ok', { code: 'ERR_INVALID_INPUT', message: /addresses\[2\]: "bad"/ }, 'ok', 'ERR_INVALID_INPUT', 'ok'],
        addresses: ['10.96.0.1', 'fd00::1', 'bad', '10.96.0.2', '10.96.0.0/24', '2001:db8::a'],
      },
      { addAddresses: 'kube-ipvs0', of: ['10.96.0.1', '10.96.0.3', 'fd00::1'], results: [{ code: 'EEXIST', errno: 17, op: 'link.addAddress', object: '10.96.0.1 dev kube-ipvs0' }, 'ok', 'EEXIST'] },
      { listAddresses: 'kube-ipvs0', are: ['10.96.0.1', '10.96.0.2', '10.96.0.3', 'fd00::1', '2001:db8::a'] },
      { deleteAddresses: 'kube-ipvs0', of: ['fd00::1', 'fd00::9', '10.96.0.9', '10.96.0.1'], results: ['ok', 'EADDRNOTAVAIL', { code: 'EADDRNOTAVAIL', op: 'link.deleteAddress', object: '10.96.0.9 dev kube-ipvs0' }, 'ok'] },
      { deleteAddresses: 'kube-ipvs0', of: ['10.96.0.1'], results: ['EADDRNOTAVAIL'] },
      { listAddresses: 'kube-ipvs0', are: ['10.96.0.2', '10.96.0.3', '2001:db8::a'] },
      { addAddresses: 'kube-ipvs0', of: [], results: [] },
    ],
  },
  {
    name: 'addresses a link cannot take: IPv6 ::, multicast, ::1 off lo are EADDRNOTAVAIL; IPv4 0.0.0.0 is acknowledged and not added',
    steps: [
      { ensureDummy: 'kube-ipvs0', created: true, link: DUMMY },
      {
        addAddresses: 'kube-ipvs0',
        of: ['::', 'ff02::1', 'ff05::2', '::1', '0.0.0.0', '255.255.255.255', '224.0.0.1', '127.0.0.2', '169.254.1.1', '::2', 'fe80::1', 'fec0::1', '::ffff:1.2.3.4'],
        results: ['EADDRNOTAVAIL', 'EADDRNOTAVAIL', 'EADDRNOTAVAIL', 'EADDRNOTAVAIL', 'ok', 'ok', 'ok', 'ok', 'ok', 'ok', 'ok', 'ok', 'ok'],
      },
      { listAddresses: 'kube-ipvs0', are: ['255.255.255.255', '224.0.0.1', '127.0.0.2', '169.254.1.1', '::2', 'fe80::1', 'fec0::1', '::ffff:1.2.3.4'] },
      { deleteAddresses: 'kube-ipvs0', of: ['0.0.0.0', '::'], results: ['EADDRNOTAVAIL', 'EADDRNOTAVAIL'] },
      { addAddresses: 'lo', of: ['::1'], results: ['EEXIST'] },
    ],
  },
  {
    name: 'the kernel lists IPv4 addresses in the order added, then IPv6 by scope (global first), the newest first',
    steps: [
      { ensureDummy: 'kipc4', created: true, link: { name: 'kipc4', kind: 'dummy', up: false } },
      { addAddresses: 'kipc4', of: ['10.96.0.3', 'fec0::1', 'fd00::1', '10.96.0.1', 'fe80::1', '2001:db8::1', '10.96.0.2', 'fe80::2'], results: ['ok', 'ok', 'ok', 'ok', 'ok', 'ok', 'ok', 'ok'] },
      { listAddresses: 'kipc4', are: ['10.96.0.3', '10.96.0.1', '10.96.0.2', '2001:db8::1', 'fd00::1', 'fec0::1', 'fe80::2', 'fe80::1'], ordered: true },
      { deleteAddresses: 'kipc4', of: ['10.96.0.3', 'fd00::1'], results: ['ok', 'ok'] },
      { addAddresses: 'kipc4', of: ['10.96.0.3', 'fd00::1'], results: ['ok', 'ok'] },
      {
        localAddresses: { includeLoopback: true, includeLinkLocal: true },
        on: ['kipc4', 'lo'],
        are: ['127.0.0.1 lo', '10.96.0.1 kipc4', '10.96.0.2 kipc4', '10.96.0.3 kipc4', '::1 lo', 'fd00::1 kipc4', '2001:db8::1 kipc4', 'fec0::1 kipc4', 'fe80::2 kipc4', 'fe80::1 kipc4'],
        ordered: true,
      },
    ],
  },
  {
    name: 'a missing link: ENODEV for its addresses; an invalid address alone is refused without a lookup',
    steps: [
      { addAddresses: 'kipc-none', of: ['10.0.0.1'], is: { code: 'ENODEV', op: 'link.addAddress' } },
      { deleteAddresses: 'kipc-none', of: ['10.0.0.1'], is: 'ENODEV' },
      { listAddresses: 'kipc-none', is: { code: 'ENODEV', op: 'link.listAddresses' } },
      { addAddresses: 'kipc-none', of: ['x'], results: ['ERR_INVALID_INPUT'] },
      { deleteLink: 'kipc-none', is: false },
    ],
  },
  {
    name: 'a link given by an index that is gone (deleted and made again): ENODEV per address, an empty list',
    steps: [
      { ensureDummy: 'kube-ipvs0', created: true, link: DUMMY, as: 'first' },
      { addAddresses: { saved: 'first' }, of: ['10.96.0.1'], results: ['ok'] },
      { deleteLink: 'kube-ipvs0', kind: 'dummy', is: true },
      { ensureDummy: 'kube-ipvs0', created: true, link: DUMMY },
      { listAddresses: 'kube-ipvs0', are: [] },
      { addAddresses: { saved: 'first' }, of: ['10.96.0.2', 'bad'], results: [{ code: 'ENODEV', op: 'link.addAddress', object: '10.96.0.2 dev kube-ipvs0' }, 'ERR_INVALID_INPUT'] },
      { deleteAddresses: { saved: 'first' }, of: ['10.96.0.1'], results: ['ENODEV'] },
      { listAddresses: { saved: 'first' }, are: [] },
      { listAddresses: 'kube-ipvs0', are: [] },
    ],
  },
  {
    name: 'local addresses: every link but the excluded ones; loopback and IPv6 link-local only when asked',
    steps: [
      { ensureDummy: 'kipc3', created: true, link: { name: 'kipc3', kind: 'dummy', up: false } },
      { ensureDummy: 'kube-ipvs0', created: true, link: DUMMY },
      { addAddresses: 'kipc3', of: ['10.96.4.1', 'fd00:96:4::1', 'fe80::5', '169.254.1.1', '127.0.0.5'], results: ['ok', 'ok', 'ok', 'ok', 'ok'] },
      { addAddresses: 'kube-ipvs0', of: ['10.96.5.1'], results: ['ok'] },
      { localAddresses: { exclude: ['kube-ipvs0'] }, on: ['kipc3', 'kube-ipvs0', 'lo'], are: ['10.96.4.1 kipc3', 'fd00:96:4::1 kipc3', '169.254.1.1 kipc3'] },
      { localAddresses: {}, on: ['kipc3', 'kube-ipvs0', 'lo'], are: ['10.96.4.1 kipc3', 'fd00:96:4::1 kipc3', '169.254.1.1 kipc3', '10.96.5.1 kube-ipvs0'] },
      {
        localAddresses: { exclude: ['kube-ipvs0', 'kipc-none'], includeLoopback: true, includeLinkLocal: true },
        on: ['kipc3', 'kube-ipvs0', 'lo'],
        are: ['10.96.4.1 kipc3', 'fd00:96:4::1 kipc3', '169.254.1.1 kipc3', 'fe80::5 kipc3', '127.0.0.5 kipc3', '127.0.0.1 lo', '::1 lo'],
      },
    ],
  },
  {
    name: 'deleting a link takes its addresses with it',
    steps: [
      { ensureDummy: 'kube-ipvs0', created: true, link: DUMMY },
      { addAddresses: 'kube-ipvs0', of: ['10.96.0.1', 'fd00::1'], results: ['ok', 'ok'] },
      { deleteLink: 'kube-ipvs0', kind: 'dummy', is: true },
      { localAddresses: {}, on: ['kube-ipvs0'], are: [] },
      { ensureDummy: 'kube-ipvs0', created: true, link: DUMMY },
      { listAddresses: 'kube-ipvs0', are: [] },
    ],
  },
  {
    name: 'local routes: IPv6 refused through a link that is down (ENETDOWN); once up, both families; EEXIST again, ESRCH when gone; not addresses',
    steps: [
      { ensureDummy: 'kube-ipvs0', created: true, link: DUMMY },
      { addLocalRoutes: 'kube-ipvs0', of: ['10.96.0.1', 'fd00::1'], results: ['ok', { code: 'ENETDOWN', op: 'link.addLocalRoute', object: 'fd00::1 dev kube-ipvs0' }] },
      { setUp: 'kube-ipvs0' },
      { getLink: 'kube-ipvs0', is: { ...DUMMY, up: true } },
      { addLocalRoutes: 'kube-ipvs0', of: ['10.96.0.1', 'FD00::1', 'bad', '10.96.0.2', '2001:db8::a'], results: ['EEXIST', 'ok', 'ERR_INVALID_INPUT', 'ok', 'ok'] },
      { listLocalRoutes: 'kube-ipvs0', are: ['10.96.0.1', '10.96.0.2', 'fd00::1', '2001:db8::a'] },
      { localAddresses: {}, on: ['kube-ipvs0'], are: [] },
      { deleteLocalRoutes: 'kube-ipvs0', of: ['10.96.0.1', '10.96.0.9', 'fd00::1', 'fd00::9'], results: ['ok', { code: 'ESRCH', op: 'link.deleteLocalRoute' }, 'ok', 'ESRCH'] },
      { listLocalRoutes: 'kube-ipvs0', are: ['10.96.0.2', '2001:db8::a'] },
      { listLocalRoutes: 'kipc-none', is: { code: 'ENODEV', op: 'link.listLocalRoutes' } },
    ],
  },
  {
    name: 'a local route and an address of the same IP coexist (the kernel keeps its own route for the address apart); deleting the link takes the routes',
    steps: [
      { ensureDummy: 'kipc5', created: true, link: { name: 'kipc5', kind: 'dummy', up: false } },
      { setUp: 'kipc5' },
      { addAddresses: 'kipc5', of: ['10.96.0.5', '10.96.0.6', 'fd00::5'], results: ['ok', 'ok', 'ok'] },
      { addLocalRoutes: 'kipc5', of: ['10.96.0.5', 'fd00::5'], results: ['ok', 'ok'] },
      { listLocalRoutes: 'kipc5', are: ['10.96.0.5', 'fd00::5'] },
      { deleteAddresses: 'kipc5', of: ['10.96.0.5', 'fd00::5'], results: ['ok', 'ok'] },
      { listLocalRoutes: 'kipc5', are: ['10.96.0.5', 'fd00::5'] },
      { addAddresses: 'kipc5', of: ['10.96.0.5', 'fd00::5'], results: ['ok', 'ok'] },
      { deleteLocalRoutes: 'kipc5', of: ['10.96.0.5', 'fd00::5'], results: ['ok', 'ok'] },
      { localAddresses: {}, on: ['kipc5'], are: ['10.96.0.5 kipc5', '10.96.0.6 kipc5', 'fd00::5 kipc5'] },
      { addLocalRoutes: 'kipc5', of: ['10.96.0.7'], results: ['ok'] },
      { deleteLink: 'kipc5', kind: 'dummy', is: true },
      { ensureDummy: 'kipc5', created: true, link: { name: 'kipc5', kind: 'dummy', up: false } },
      { listLocalRoutes: 'kipc5', are: [] },
    ],
  },
  {
    name: "an operator's static local routes through the link are not the client's: not listed, never deleted (ESRCH)",
    steps: [
      { ensureDummy: 'kipc7', created: true, link: { name: 'kipc7', kind: 'dummy', up: false } },
      { setUp: 'kipc7' },
      { outside: { staticRoute: '10.96.0.8', dev: 'kipc7' } },
      { outside: { staticRoute: 'fd00::8', dev: 'kipc7' } },
      { addLocalRoutes: 'kipc7', of: ['10.96.0.9', 'fd00::9'], results: ['ok', 'ok'] },
      { listLocalRoutes: 'kipc7', are: ['10.96.0.9', 'fd00::9'] },
      { deleteLocalRoutes: 'kipc7', of: ['10.96.0.8', 'fd00::8', '10.96.0.9', 'fd00::9'], results: ['ESRCH', 'ESRCH', 'ok', 'ok'] },
      { listLocalRoutes: 'kipc7', are: [] },
    ],
  },
  {
    name: 'deleting the last IPv4 address of a link drops the IPv4 local routes through it (not the IPv6 ones)',
    steps: [
      { ensureDummy: 'kipc6', created: true, link: { name: 'kipc6', kind: 'dummy', up: false } },
      { setUp: 'kipc6' },
      { addAddresses: 'kipc6', of: ['10.96.0.5', '10.96.0.6'], results: ['ok', 'ok'] },
      { addLocalRoutes: 'kipc6', of: ['10.96.0.5', '10.96.0.7', 'fd00::7'], results: ['ok', 'ok', 'ok'] },
      { deleteAddresses: 'kipc6', of: ['10.96.0.5'], results: ['ok'] },
      { listLocalRoutes: 'kipc6', are: ['10.96.0.5', '10.96.0.7', 'fd00::7'] },
      { deleteAddresses: 'kipc6', of: ['10.96.0.6'], results: ['ok'] },
      { listLocalRoutes: 'kipc6', are: ['fd00::7'] },
    ],
  },
];
