// What a stopping daemon leaves programmed, for the next one (a DaemonSet rollout): one digest per
// virtual server of its observed state (parameters and real servers), in the state directory. The
// next daemon compares it with what it wants and reads the destinations of the virtual servers
// that differ first, so a change made while no daemon ran is written in the first destinations
// step of the adoption, not wherever the kernel's order puts it (at 3,000 Services the whole read
// takes about as long as a cold start's writes). Only an order: the adoption still reads and
// verifies the whole table, so a stale or missing record (a crash, an edit of the kernel while no
// daemon ran) costs time, never correctness. Reading the record removes it: a daemon that dies
// without writing a new one leaves none behind.
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import type { Destination, VirtualService } from '../../kernel/ipvs/types.js';
import { flagSlots } from './desired-index.js';
import type { ObservedState, VirtualServerId } from './types.js';

const FILE = 'ipvs-handoff.json';
const VERSION = 1;

/** A virtual server as the digest sees it: parameters the kernel keeps and every real server's. */
interface Programmed {
  service: VirtualService;
  destinations: Iterable<Destination>;
}

/** A digest of one virtual server: equal for two that sameService/sameDestination would call the same. */
export function digest({ service: s, destinations }: Programmed): string {
  const dests: string[] = [];
  for (const d of destinations) dests.push(`${d.address} ${d.port} ${d.forward} ${d.weight} ${d.upperThreshold} ${d.lowerThreshold}`);
  const text = `${s.scheduler} ${s.timeout} ${s.netmask} ${s.pe || ''} ${flagSlots(s.flags)}\n${dests.sort().join('\n')}`;
  return createHash('sha256').update(text).digest('base64').slice(0, 16);
}

/** Writes the record of what `observed` holds (best effort: without it the next daemon reads in the kernel's order). */
export function writeHandoff(dir: string, observed: ObservedState): void {
  const virtualServers: Record<string, string> = {};
  for (const [id, vs] of observed.virtualServers) virtualServers[id] = digest({ service: vs.service, destinations: vs.destinations.values() });
  try {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, FILE), JSON.stringify({ version: VERSION, virtualServers }));
  } catch {
    // e.g. a read-only state directory: the next adoption reads in the kernel's order
  }
}

/** Reads and removes the record; null when there is none (first start, a crash) or it is unreadable. */
export function takeHandoff(dir: string): Map<VirtualServerId, string> | null {
  const file = join(dir, FILE);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return null;
  }
  rmSync(file, { force: true });
  try {
    const r = JSON.parse(text) as { version?: unknown; virtualServers?: unknown };
    if (r.version !== VERSION || typeof r.virtualServers !== 'object' || r.virtualServers === null) return null;
    return new Map(Object.entries(r.virtualServers as Record<string, unknown>).filter((e): e is [string, string] => typeof e[1] === 'string'));
  } catch {
    return null;
  }
}

/** The wanted virtual servers the record says the kernel held otherwise (or not at all). */
export function differing(record: ReadonlyMap<VirtualServerId, string>, wanted: ReadonlyMap<VirtualServerId, Programmed>): Set<VirtualServerId> {
  const out = new Set<VirtualServerId>();
  for (const [id, vs] of wanted) if (record.get(id) !== digest(vs)) out.add(id);
  return out;
}
