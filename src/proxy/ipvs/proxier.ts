// The IPVS proxier: tracked objects -> desired state (per changed service) -> plan -> apply.
// A partial sync costs work proportional to the services that changed; a full sync (at start
// and every --ipvs-sync-period) re-reads the kernel and repairs any drift.
import { execFile } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';

import type { Config } from '../../config.js';
import type { IpsetClient } from '../../kernel/ipset/types.js';
import type { IpvsClient } from '../../kernel/ipvs/client.js';
import type { Iptables } from '../../kernel/iptables.js';
import type { LinkClient } from '../../kernel/link.js';
import type { Logger } from '../../log.js';
import { familyOf, inCidr } from '../../model/ip.js';
import type { ProxyHealth } from '../../server/health.js';
import type { ProxyMetrics } from '../../server/metrics.js';
import type { DesiredView } from '../../server/desired.js';
import type { ServiceHealthServers } from '../../server/servicehealth.js';
import type { EventSink } from '../../source/events.js';
import type { SourceHandler } from '../../source/types.js';
import { ChangeTracker } from '../changetracker.js';
import { nodeZone } from '../topology.js';
import { ErrorReporter, healthCheckErrors, kernelErrors, trackerHandler } from '../handler.js';
import { applyPlan } from './apply.js';
import { desiredForService } from './desired.js';
import { GracefulState, refreshDraining } from './graceful.js';
import { DesiredIndex, emptyDelta, mergeDelta, type DesiredDelta } from './index.js';
import { OWNED_SETS, SET, setName } from './ipsets.js';
import { readObserved } from './observe.js';
import { plan, type Plan } from './plan.js';
import { ipvsModeRules, lbNoNodeAccess } from './rules.js';
import { applySysctls, ipvsSysctls } from './sysctl.js';
import type { DesiredContext, ObservedState } from './types.js';

/** The kernel clients the proxier programs through. */
export interface ProxierClients {
  ipvs: IpvsClient;
  ipset: IpsetClient;
  link: LinkClient;
  iptables: { ipv4: Iptables; ipv6: Iptables | null };
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
  /** Where --dry-run prints the plan. */
  out?: (text: string) => void;
  /** Writes sysctls (default: /proc/sys); returns the ones that failed. Tests pass a recorder. */
  sysctl?: typeof applySysctls;
  now?: () => number;
}

/** What one sync did. */
export interface SyncReport {
  full: boolean;
  durationMs: number;
  changedServices: number;
  ops: Plan['counts'];
  errors: number;
  /** Milliseconds spent per phase (prepare, read, plan, apply, iptables, health). */
  phases: Record<string, number>;
}

/** The IPVS proxier; the daemon feeds it through handler() and calls sync() from the runner. */
export class IpvsProxier {
  readonly tracker: ChangeTracker;
  private readonly index = new DesiredIndex();
  private readonly graceful = new GracefulState();
  private observed: ObservedState | null = null;
  private lastFullAt = -Infinity;
  private nodePortAddresses: string[] = [];
  private readonly iptablesText = new Map<string, string>();
  /** Objects whose ops failed: looked at again by the next (partial) sync. */
  private retryScope: DesiredDelta = emptyDelta();
  private readonly now: () => number;
  private started = false;

  private readonly errors: ErrorReporter;

  constructor(private readonly o: ProxierOptions) {
    this.errors = new ErrorReporter(o.logger, o.events);
    this.tracker = new ChangeTracker(o.nodeName);
    this.now = o.now ?? (() => performance.now());
  }

  /** Read-only view of the desired state, for the /desired endpoint and the traffic metrics. */
  desiredView(): DesiredView {
    return { virtualServers: this.index.virtualServers(), state: this.tracker.state(), draining: this.graceful.draining };
  }

  /** The SourceHandler that feeds the tracker; `onChange` asks the runner for a sync. */
  handler(onChange: () => void): SourceHandler {
    return trackerHandler(this.tracker, this.o, onChange);
  }

  private context(): DesiredContext {
    return { config: this.o.config, nodeName: this.o.nodeName, zone: nodeZone(this.tracker.state().node), nodePortAddresses: this.nodePortAddresses };
  }

  /** Local addresses NodePorts listen on: --nodeport-addresses CIDRs, `primary`, or all. */
  private async readNodePortAddresses(): Promise<string[]> {
    const wanted = this.o.config.nodePortAddresses;
    const local = (await this.o.clients.link.localAddresses({ exclude: [this.o.dummyName] })).map((a) => a.address);
    if (wanted.length === 0) return local;
    if (wanted[0] === 'primary') {
      const nodeIPs = this.tracker.state().node?.addresses ?? [];
      return local.filter((a) => nodeIPs.includes(a));
    }
    return local.filter((a) => wanted.some((c) => inCidr(a, c)));
  }

  /** One-time node setup: sysctls, IPVS timeouts, the dummy link, the owned ipsets. */
  private async prepare(): Promise<void> {
    const { config, logger, clients } = this.o;
    for (const f of (this.o.sysctl ?? applySysctls)(ipvsSysctls({ strictARP: config.ipvs.strictARP }))) logger.warn({ sysctl: f.key, err: f.error }, 'cannot set sysctl');
    const t = config.ipvs;
    if (t.tcpTimeoutMs || t.tcpFinTimeoutMs || t.udpTimeoutMs) {
      const s = (ms: number) => Math.round(ms / 1000);
      await clients.ipvs.setTimeouts({ tcp: s(t.tcpTimeoutMs), tcpFin: s(t.tcpFinTimeoutMs), udp: s(t.udpTimeoutMs) });
    }
    await clients.link.ensureDummy(this.o.dummyName);
    for (const set of OWNED_SETS) await clients.ipset.create(set.spec, { exist: true });
    this.started = true;
  }

  /** Recomputes the contribution of one service port key; returns what it touched. */
  private update(key: string) {
    const state = this.tracker.state();
    const svc = state.services.get(key);
    return this.index.set(key, svc ? desiredForService(svc, state.endpoints.get(key) ?? [], this.context()) : null);
  }

  /** One sync; throws when kernel operations failed (the runner retries). */
  async sync(opts: { full?: boolean } = {}): Promise<SyncReport> {
    const { config, clients, logger } = this.o;
    const t0 = this.now();
    const phases: Record<string, number> = {};
    let mark = t0;
    const phase = (name: string) => {
      const t = this.now();
      phases[name] = Math.round(t - mark);
      mark = t;
    };
    const full = Boolean(opts.full) || this.observed === null || t0 - this.lastFullAt >= config.syncPeriodMs;
    if (!this.started && !config.dryRun) await this.prepare();
    phase('prepare');
    const changed = this.tracker.takeChanged();
    let scope: Parameters<typeof plan>[2] = 'full';
    if (full) {
      this.nodePortAddresses = await this.readNodePortAddresses();
      this.observed = await readObserved({ ipvs: clients.ipvs, ipset: clients.ipset, link: clients.link, dummyName: this.o.dummyName });
      for (const key of new Set([...this.tracker.state().services.keys(), ...this.index.keys()])) this.update(key);
    } else {
      scope = this.index.mergeDeltas([this.retryScope, ...[...changed].map((k) => this.update(k))]);
    }
    this.retryScope = emptyDelta();
    const observed = this.observed!;
    phase('read');
    await refreshDraining(clients.ipvs, observed, this.graceful);
    const p = plan(this.index, observed, scope, this.graceful, {
      now: Date.now(),
      gracefulTimeoutMs: config.gracefulTerminationTimeoutMs,
      excludeCIDRs: config.ipvs.excludeCIDRs,
    });
    phase('plan');
    if (config.dryRun) {
      (this.o.out ?? ((t) => process.stdout.write(t)))(formatPlan(p));
      return { full, durationMs: this.now() - t0, changedServices: changed.size, ops: p.counts, errors: 0, phases };
    }
    const result = await applyPlan(p, { ...clients, dummyName: this.o.dummyName }, observed);
    mergeDelta(this.retryScope, result.retryScope);
    await this.cleanStaleUdp(p);
    phase('apply');
    await this.syncIptables(full);
    phase('iptables');
    const healthErrors = (await this.o.serviceHealth?.sync(this.index.healthChecks())) ?? [];
    phase('health');
    const owner = (vs: string) => this.index.virtualServers().get(vs)?.owner;
    this.errors.report([...this.tracker.errors(), ...this.index.errors(), ...kernelErrors(result.errors, owner), ...healthCheckErrors(healthErrors)]);
    if (full) this.lastFullAt = t0;
    const durationMs = this.now() - t0;
    const report: SyncReport = { full, durationMs, changedServices: changed.size, ops: p.counts, errors: result.errors.length, phases };
    this.recordMetrics(durationMs, full, result);
    logger.info(report, 'synced');
    if (result.retry) throw new Error(`${result.errors.length} kernel operations failed (retrying)`);
    this.o.health?.updated();
    return report;
  }

  private recordMetrics(durationMs: number, full: boolean, result: Awaited<ReturnType<typeof applyPlan>>): void {
    const m = this.o.metrics;
    if (!m) return;
    m.observeSync(durationMs, full ? 'full' : 'partial', !result.retry);
    const { virtualServers, realServers } = this.index.counts();
    m.setCounts({ virtualServers, realServers });
    m.countKernelOps('ipvs', 'ok', result.counts.ipvsOps);
    m.countKernelOps('ipset', 'ok', result.counts.ipsetEntries);
    m.countKernelOps('address', 'ok', result.counts.addresses);
    if (result.errors.length) m.countKernelOps('any', 'error', result.errors.length);
  }

  /** kube-proxy's IPVS-mode chains, per family; a restore only when the rules changed (or on a full sync). */
  private async syncIptables(full: boolean): Promise<void> {
    const nonEmpty = new Set(this.index.allSets().filter((s) => this.index.ipsetEntries(s).size > 0));
    const hasIpv6 = this.index.counts().ipv6VirtualServers > 0;
    for (const [family, ipt] of Object.entries(this.o.clients.iptables) as Array<['ipv4' | 'ipv6', Iptables | null]>) {
      // Like kube-proxy's per-family proxiers: no ip6tables work on a node without IPv6 services
      // (once written, the IPv6 rules are kept in sync, so they are removed when those go away).
      if (!ipt || (family === 'ipv6' && !hasIpv6 && !this.iptablesText.has('ipv6'))) continue;
      const entries = (base: (typeof SET)[keyof typeof SET]) => this.index.ipsetEntries(setName(base, family)).keys();
      const noNodeAccess = lbNoNodeAccess(entries(SET.LOAD_BALANCER_FW), entries(SET.LOAD_BALANCER_SOURCE_IP));
      const spec = ipvsModeRules(this.context(), family, nonEmpty, noNodeAccess);
      const text = JSON.stringify(spec);
      if (!full && this.iptablesText.get(family) === text) continue;
      await ipt.sync(spec);
      this.iptablesText.set(family, text);
    }
  }

  /** UDP real servers removed: their conntrack entries would keep sending packets to them. */
  private async cleanStaleUdp(p: Plan): Promise<void> {
    for (const s of p.staleUdp ?? []) {
      const family = familyOf(s.vip) === 'ipv6' ? 'ipv6' : 'ipv4';
      const args = ['-D', '-f', family, '-p', 'udp', '--orig-dst', s.vip, '--orig-port-dst', String(s.port), '--dst-nat', s.endpoint];
      await promisify(execFile)('conntrack', args).catch(() => undefined); // exit 1: no entries
    }
  }

  close(): void {
    const c = this.o.clients;
    c.ipvs.close();
    c.ipset.close();
    c.link.close();
  }
}

/** A plan as text, for --dry-run. */
export function formatPlan(p: Plan): string {
  const lines = [
    ...p.ipvs.map((op) => `ipvs ${op.kind} ${JSON.stringify('destination' in op ? { service: op.service, destination: op.destination } : op.service)}`),
    ...p.ipsetCreate.map((s) => `ipset create ${s.name} ${s.type}`),
    ...[...p.ipsetAdd].flatMap(([set, entries]) => entries.map((e) => `ipset add ${set} ${e}`)),
    ...[...p.ipsetDel].flatMap(([set, entries]) => entries.map((e) => `ipset del ${set} ${e}`)),
    ...p.addressAdd.map((a) => `address add ${a}`),
    ...p.addressDel.map((a) => `address del ${a}`),
  ];
  return `${lines.join('\n')}\n`;
}
