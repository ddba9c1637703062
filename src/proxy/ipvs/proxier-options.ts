// What the IPVS proxier is built from (its kernel clients and options, and how they close) and what a sync reports.
import type { Config } from '../../config.js';
import type { IpsetClient } from '../../kernel/ipset/types.js';
import type { IpvsClient } from '../../kernel/ipvs/client.js';
import type { Iptables } from '../../kernel/iptables.js';
import type { LinkClient } from '../../kernel/link.js';
import type { Logger } from '../../log.js';
import type { ProxyHealth } from '../../server/health.js';
import type { ProxyMetrics } from '../../server/metrics.js';
import type { ServiceHealthServers } from '../../server/servicehealth.js';
import type { EventSink } from '../../source/events.js';
import type { ChangeTracker } from '../changetracker.js';
import type { ConntrackRunner } from '../conntrack.js';
import type { Plan } from './plan.js';
import type { applySysctls } from './sysctl.js';

/** The iptables drivers of both families (IPv6: none on a node without it). */
export interface IptablesPair {
  ipv4: Iptables;
  ipv6: Iptables | null;
}

/** The kernel clients the proxier programs through. */
export interface ProxierClients {
  ipvs: IpvsClient;
  ipset: IpsetClient;
  link: LinkClient;
  /**
   * The iptables drivers, or their promise: the daemon's first sync programs IPVS, ipsets and
   * addresses while the backend is still being detected; only the iptables step waits for it.
   */
  iptables: IptablesPair | Promise<IptablesPair>;
  /** Separate sockets for the periodic verification's reads, so they never queue partial syncs' writes (default: the above). */
  read?: { ipvs: IpvsClient; ipset: IpsetClient; link: LinkClient };
}

/** Closes every socket of `c` (the verification's own, and the one IPVS socket they may share). */
export function closeClients(c: ProxierClients): void {
  c.ipvs.close();
  c.ipset.close();
  c.link.close();
  if (c.read && c.read.ipvs !== c.ipvs) c.read.ipvs.close();
  c.read?.ipset.close();
  c.read?.link.close();
}

/** What the proxier is built from. */
export interface ProxierOptions {
  config: Config;
  nodeName: string;
  logger: Logger;
  dummyName: string;
  clients: ProxierClients;
  metrics?: ProxyMetrics;
  health?: ProxyHealth;
  serviceHealth?: ServiceHealthServers;
  /** Where per-Service problems are also recorded as Events (API mode). */
  events?: EventSink;
  /** The change tracker the source already fed (DeferredHandler.feed); a new one by default. */
  tracker?: ChangeTracker;
  /** Where --dry-run prints the plan. */
  out?: (text: string) => void;
  /** Writes sysctls (default: /proc/sys); returns the ones that failed. Tests pass a recorder. */
  sysctl?: typeof applySysctls;
  /** Runs `conntrack ARGS` (default: the binary; its failures are ignored). */
  conntrack?: ConntrackRunner;
  /** Where state that should survive a restart is kept (the last iptables restore's hashes, handoff.ts's record); none by default. */
  stateDir?: string;
  /** Milliseconds until the runner may start the next sync (the verification keeps its reads out of the syncs' way). */
  nextSyncIn?: () => number;
  now?: () => number;
}

/** What one sync did. */
export interface SyncReport {
  full: boolean;
  durationMs: number;
  changedServices: number;
  ops: Plan['counts'];
  errors: number;
  /** Ops that found the kernel had lost what observed held (ApplyResult.drift): compared again by the next sync. */
  drift?: number;
  /** Milliseconds spent per phase (prepare, read, plan, apply, iptables, health). */
  phases: Record<string, number>;
  /** This sync first adopted the kernel through a whole verification (the daemon's first sync). */
  adopted?: boolean;
}
