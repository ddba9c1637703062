// Traffic per Service port from IPVS's own counters (STATS64), summed over the port's virtual
// servers: used by `inspect --stats` and, behind --metrics-service-stats, exported to Prometheus
// from one cached dump per period (a scrape never triggers more than one dump per period).
import { Counter, Gauge, type Registry } from 'prom-client';

import type { ServiceWithDestinations } from '../kernel/ipvs/client.js';
import { serviceId, type IpvsStats, type ServiceKey } from '../kernel/ipvs/types.js';
import { parsePortKey } from './desired.js';

/** Counters of one Service port: the sums over its virtual servers and their real servers. */
export interface ServiceTraffic extends IpvsStats {
  /** The owner key (`ns/name:port/protocol`). */
  key: string;
  virtualServers: number;
  activeConns: number;
  inactiveConns: number;
}

/** What trafficByService reads of a dumped virtual server. */
export type StatsSource = { [K in keyof ServiceKey]: ServiceKey[K] | string | null } & { stats?: IpvsStats; destinations: ReadonlyArray<{ activeConns: number; inactiveConns: number }> };

const COUNTERS = ['conns', 'inPkts', 'outPkts', 'inBytes', 'outBytes', 'cps', 'inPps', 'outPps', 'inBps', 'outBps'] as const;

/**
 * Sums a dump taken with `{ stats: true }` per owner; virtual servers `ownerOf` does not know are
 * left out. Sorted by key.
 */
export function trafficByService(dump: readonly StatsSource[], ownerOf: (vsId: string) => string | undefined): ServiceTraffic[] {
  const out = new Map<string, ServiceTraffic>();
  for (const s of dump) {
    const key = ownerOf(serviceId(s as ServiceKey));
    if (key === undefined) continue;
    let t = out.get(key);
    if (!t) {
      t = { key, virtualServers: 0, conns: 0, inPkts: 0, outPkts: 0, inBytes: 0, outBytes: 0, cps: 0, inPps: 0, outPps: 0, inBps: 0, outBps: 0, activeConns: 0, inactiveConns: 0 };
      out.set(key, t);
    }
    t.virtualServers++;
    for (const c of COUNTERS) t[c] += s.stats?.[c] ?? 0;
    for (const d of s.destinations) {
      t.activeConns += d.activeConns;
      t.inactiveConns += d.inactiveConns;
    }
  }
  return [...out.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

/** Options of ServiceTrafficMetrics. */
export interface ServiceTrafficOptions {
  /** One IPVS dump with counters (`dumpAll({ stats: true })`). */
  dump: () => Promise<ServiceWithDestinations[]>;
  /** The Service port key owning a virtual server id, from the desired state. */
  ownerOf: (vsId: string) => string | undefined;
  /** At most this many Service ports are exported (the first by key); the rest are counted as omitted. */
  maxServices: number;
  /** A dump is reused for this long (milliseconds). */
  periodMs: number;
  now?: () => number;
  /** A failed dump (the metrics then show no Service for one period). */
  onError?: (err: Error) => void;
}

/** Series per exported Service port (see the README: cost of --metrics-service-stats). */
export const SERIES_PER_SERVICE_PORT = 7;

const LABELS = ['namespace', 'service', 'port', 'protocol'] as const;
type Label = (typeof LABELS)[number];

function labelsOf(key: string): Record<Label, string> {
  const k = parsePortKey(key);
  return { namespace: k.namespace, service: k.name, port: k.portName, protocol: k.protocol };
}

/**
 * The kube_ipvs_proxy_service_* metrics. Each scrape reads the cached per-Service traffic; the
 * cache is refreshed by one dump when older than `periodMs` (concurrent scrapes share it).
 */
export class ServiceTrafficMetrics {
  #cache: { at: number; traffic: ServiceTraffic[]; omitted: number } | null = null;
  #pending: Promise<{ traffic: ServiceTraffic[]; omitted: number }> | null = null;
  #dumps = 0;
  readonly #now: () => number;

  constructor(
    registry: Registry,
    private readonly o: ServiceTrafficOptions,
  ) {
    this.#now = o.now ?? (() => performance.now());
    const self = this;
    const counter = (name: string, help: string, pick: (t: ServiceTraffic) => Array<[Record<string, string>, number]>, extra: string[] = []) =>
      new Counter({
        name, help, labelNames: [...LABELS, ...extra], registers: [registry],
        async collect() {
          const { traffic } = await self.read();
          this.reset();
          for (const t of traffic) for (const [l, v] of pick(t)) this.inc({ ...labelsOf(t.key), ...l }, v);
        },
      });
    const gauge = (name: string, help: string, pick: (t: ServiceTraffic) => number) =>
      new Gauge({
        name, help, labelNames: [...LABELS], registers: [registry],
        async collect() {
          const { traffic } = await self.read();
          this.reset();
          for (const t of traffic) this.set(labelsOf(t.key), pick(t));
        },
      });
    counter('kube_ipvs_proxy_service_connections_total', 'Connections scheduled by IPVS to the Service port (sum over its virtual servers)', (t) => [[{}, t.conns]]);
    counter('kube_ipvs_proxy_service_packets_total', 'Packets through IPVS for the Service port, by direction', (t) => [[{ direction: 'in' }, t.inPkts], [{ direction: 'out' }, t.outPkts]], ['direction']);
    counter('kube_ipvs_proxy_service_bytes_total', 'Bytes through IPVS for the Service port, by direction', (t) => [[{ direction: 'in' }, t.inBytes], [{ direction: 'out' }, t.outBytes]], ['direction']);
    gauge('kube_ipvs_proxy_service_active_connections', 'Active IPVS connections to the real servers of the Service port', (t) => t.activeConns);
    gauge('kube_ipvs_proxy_service_inactive_connections', 'Inactive IPVS connections to the real servers of the Service port', (t) => t.inactiveConns);
    new Gauge({
      name: 'kube_ipvs_proxy_service_stats_omitted', help: 'Service ports left out of the kube_ipvs_proxy_service_* metrics by --metrics-service-stats-max', registers: [registry],
      async collect() {
        this.set((await self.read()).omitted);
      },
    });
  }

  /** IPVS dumps taken so far. */
  get dumps(): number {
    return this.#dumps;
  }

  /** The traffic of the exported Service ports, from the cache or one fresh dump. */
  async read(): Promise<{ traffic: ServiceTraffic[]; omitted: number }> {
    const c = this.#cache;
    if (c && this.#now() - c.at < this.o.periodMs) return c;
    this.#pending ??= this.#refresh().finally(() => (this.#pending = null));
    return this.#pending;
  }

  async #refresh(): Promise<{ traffic: ServiceTraffic[]; omitted: number }> {
    this.#dumps++;
    let dump: ServiceWithDestinations[] = [];
    try {
      dump = await this.o.dump();
    } catch (e) {
      this.o.onError?.(e instanceof Error ? e : new Error(String(e)));
    }
    const all = trafficByService(dump, this.o.ownerOf);
    const traffic = all.slice(0, this.o.maxServices);
    this.#cache = { at: this.#now(), traffic, omitted: all.length - traffic.length };
    return this.#cache;
  }
}
