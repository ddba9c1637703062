// What a stopping daemon leaves programmed, for the next one (a DaemonSet rollout): one digest per
// virtual server of its observed state (parameters and real servers), in the state directory. The
// next daemon compares it with what it wants and reads the destinations of the virtual servers
// that differ first, so a change made while no daemon ran is written in the first destinations
// step of the adoption, not wherever the kernel's order puts it (at 3,000 Services the whole read
// takes about as long as a cold start's writes). Only an order: the adoption still reads and
// verifies the whole table, so a stale or missing record (a crash, an edit of the kernel while no
// daemon ran) costs time, never correctness. Reading the record removes it: a daemon that dies
// without writing a new one leaves none behind.
import type { Destination, VirtualService } from '../../kernel/ipvs/types.js';
import { flagSlots } from './desired-compare.js';
import { readStateFile, writeStateFile } from '../../state-dir.js';
import type { ObservedState, VirtualServerId } from './types.js';

const FILE = 'ipvs-handoff.json';
const VERSION = 1;

/** A virtual server as the digest sees it: parameters the kernel keeps and every real server's. */
interface Programmed {
  service: VirtualService;
  destinations: Iterable<Destination>;
}

const FNV_OFFSET = 0x811c9dc5;

/** 32-bit FNV-1a, continued from `h` over `text`'s characters and a separator. */
function str(h: number, text: string): number {
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return Math.imul(h ^ 0xff, 0x01000193);
}

/** The same, over the four bytes of a number (ports, weights, thresholds, timeouts, masks: 32-bit integers). */
function num(h: number, n: number): number {
  for (let k = 0; k < 32; k += 8) h = Math.imul(h ^ ((n >>> k) & 0xff), 0x01000193);
  return h;
}

/**
 * A digest of one virtual server: equal for two that sameService/sameDestination would call the
 * same, in any order of their real servers (their hashes are summed: nothing is sorted or built).
 * 32 bits each: a collision (about one in 4 billion per changed virtual server) only leaves that
 * one in the kernel's order. A hash in JS, not node:crypto: in UML, 3,000 virtual servers are
 * compared in 30 ms (10,000: 180 ms); with a sha256 of a sorted string each, reading the record
 * and comparing took 0.25 s at 3,000.
 */
export function digest({ service: s, destinations }: Programmed): string {
  let sum = 0;
  let n = 0;
  for (const d of destinations) {
    sum = (sum + num(num(num(num(str(str(FNV_OFFSET, d.address), d.forward), d.port), d.weight), d.upperThreshold), d.lowerThreshold)) >>> 0;
    n++;
  }
  const params = num(num(num(num(str(str(FNV_OFFSET, s.scheduler), s.pe || ''), s.timeout), s.netmask), flagSlots(s.flags)), n) >>> 0;
  return `${params.toString(36)}.${sum.toString(36)}`;
}

/** Writes the record of what `observed` holds (best effort: without it the next daemon reads in the kernel's order). */
export function writeHandoff(dir: string, observed: ObservedState): void {
  const virtualServers: Record<string, string> = {};
  for (const [id, vs] of observed.virtualServers) virtualServers[id] = digest({ service: vs.service, destinations: vs.destinations.values() });
  writeStateFile(dir, FILE, { version: VERSION, virtualServers });
}

/** Reads and removes the record; null when there is none (first start, a crash) or it is unreadable. */
export function takeHandoff(dir: string): Map<VirtualServerId, string> | null {
  const r = readStateFile(dir, FILE, { remove: true }) as { version?: unknown; virtualServers?: unknown } | null;
  if (r?.version !== VERSION || typeof r.virtualServers !== 'object' || r.virtualServers === null) return null;
  return new Map(Object.entries(r.virtualServers as Record<string, unknown>).filter((e): e is [string, string] => typeof e[1] === 'string'));
}

/** The wanted virtual servers the record says the kernel held otherwise (or not at all). */
export function differing(record: ReadonlyMap<VirtualServerId, string>, wanted: ReadonlyMap<VirtualServerId, Programmed>): Set<VirtualServerId> {
  const out = new Set<VirtualServerId>();
  for (const [id, vs] of wanted) if (record.get(id) !== digest(vs)) out.add(id);
  return out;
}
