// The IPVS proxier: tracked objects -> desired state (per changed service) -> plan -> apply.
// A partial sync costs work proportional to the services that changed. A full sync (at start)
// reads the whole kernel; every --ipvs-sync-period a verification re-reads it in small steps
// between which partial syncs run (verify.ts), and repairs any drift.
import { performance } from 'node:perf_hooks';

import type { Config } from '../../config.js';
import type { IpsetClient } from '../../kernel/ipset/types.js';
import type { IpvsClient } from '../../kernel/ipvs/client.js';
import type { Iptables } from '../../kernel/iptables.js';
import type { LinkClient } from '../../kernel/link.js';
import type { Logger } from '../../log.js';
import type { ObjectError } from '../../model/service.js';
import { inCidr } from '../../model/ip.js';
import type { ProxyHealth } from '../../server/health.js';
import type { ProxyMetrics } from '../../server/metrics.js';
import type { DesiredView } from '../../server/desired.js';
import type { ServiceHealthServers } from '../../server/servicehealth.js';
import type { EventSink } from '../../source/events.js';
import type { SourceHandler } from '../../source/types.js';
import { ChangeTracker } from '../changetracker.js';
import { nodeZone } from '../topology.js';
import { UdpConntrack, type ConntrackRunner } from '../conntrack.js';
import { ErrorReporter, healthCheckErrors, kernelErrors, trackerHandler } from '../handler.js';
import { applyPlan, type ApplyResult } from './apply.js';
import { desiredForService } from './desired.js';
import { GracefulState, refreshDraining } from './graceful.js';
import { DesiredIndex, emptyDelta, mergeDelta, type DesiredDelta } from './desired-index.js';
import { capacityOf, GROW_PREFIX, OWNED_SETS, SET, setName } from './ipsets.js';
import { IptablesKeeper, type FamilyRules } from './iptables-keeper.js';
import { differing, takeHandoff, writeHandoff } from './handoff.js';
import { emptyObserved, isOwnedSetName, readObserved } from './observe.js';
import { formatPlan, plan, type Plan } from './plan.js';
import { ipvsModeRules, lbNoNodeAccess } from './rules.js';
import { applySysctls, conntrackSysctls, ipvsSysctls } from './sysctl.js';
import type { DesiredContext, ObservedState } from './types.js';
import { Verifier, type NodeAddresses, type VerifyReport } from './verify.js';
import { SerialQueue } from '../../serial.js';

export type { VerifyReport };

export { formatPlan };

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

/**
 * How long after a sync the connections of the real servers left draining are counted (for the
 * next plan, which deletes the drained ones). A sync ends with its writes: counting a server it
 * has just set to weight 0 tells nothing yet, and on a busy CPU that read would stand between
 * the change and whatever runs next. Syncs in a burst share one count.
 */
export const DRAIN_READ_DELAY_MS = 200;

/**
 * While real servers drain, how often their connections are counted again (one dump per virtual
 * server that drains, never the whole table) and the drained ones deleted: a real server goes
 * within about this long of its last connection, not at the next sync.
 */
export const DRAIN_CHECK_INTERVAL_MS = 1000;

/** The IPVS proxier; the daemon feeds it through handler() and calls sync() from the runner. */
export class IpvsProxier {
  readonly tracker: ChangeTracker;
  private readonly index = new DesiredIndex();
  private readonly graceful = new GracefulState();
  private observed: ObservedState | null = null;
  private nodePortAddresses: string[] = [];
  /** Every address of the node but the dummy link's (never bound there). */
  private nodeAddresses: string[] = [];
  private readonly iptables: IptablesKeeper;
  private readonly iptablesDrivers: Promise<IptablesPair>;
  /** Syncs and verification steps run one at a time, in the order they asked. */
  private readonly queue = new SerialQueue();
  /** The verification in flight, if any. */
  private verifying: Promise<VerifyReport | null> | null = null;
  private readonly verifier: Verifier;
  private lastVerify: VerifyReport | null = null;
  /** close() was called: a verification still reading fails on the closed sockets, as expected. */
  private closed = false;
  /** The timer of the draining servers' count that is due (countDrainingSoon), until it fires. */
  private drainTimer: ReturnType<typeof setTimeout> | null = null;
  /** The draining servers' count in flight (queued or running), if any. */
  private drainCount: Promise<void> | null = null;
  /** The health-check ports the last sync could not open (reported with every report()). */
  private healthErrors: ObjectError[] = [];
  /** The whole kernel was read once (adopted, or a full sync): observed is worth a handoff record at close(). */
  private whole = false;
  private requestSync: () => void = () => {};
  /** Objects whose ops failed: looked at again by the next (partial) sync. */
  private retryScope: DesiredDelta = emptyDelta();
  private readonly now: () => number;
  private started = false;
  /** A sync found the dummy link missing: the next one re-creates it. */
  private linkMissing = false;
  /** Sysctls and the dummy link that could not be ensured (reported once each). */
  private nodeErrors: ObjectError[] = [];
  /** Per family, the rules rules() last built and what they were built from. */
  private readonly lastRules = new Map<string, { inputs: string; spec: FamilyRules['spec'] }>();
  /** Objects the kernel refused for good (errors.ts): kept until the next full sync compares them again. */
  private refused: ApplyResult['refused'] = [];

  private readonly errors: ErrorReporter;
  private readonly conntrack: UdpConntrack;

  constructor(private readonly o: ProxierOptions) {
    this.errors = new ErrorReporter(o.logger, o.events);
    this.conntrack = new UdpConntrack(o.conntrack);
    this.iptables = new IptablesKeeper(o.stateDir);
    this.iptablesDrivers = Promise.resolve(o.clients.iptables);
    this.iptablesDrivers.catch(() => {}); // a failure surfaces in the syncs that await it, not as an unhandled rejection
    this.verifier = new Verifier({
      read: o.clients.read ?? o.clients,
      dummyName: o.dummyName,
      index: this.index,
      iptables: this.iptables,
      now: () => this.now(),
      observed: () => this.observed!,
      serial: (fn) => this.queue.run(fn),
      readNodePortAddresses: (link) => this.readNodePortAddresses(link),
      node: async (scope, addresses) => {
        await this.ensureNode(scope);
        if (addresses.nodePort.join() === this.nodePortAddresses.join() && addresses.local.join() === this.nodeAddresses.join()) return;
        this.takeAddresses(addresses);
        for (const key of [...this.index.keys()]) mergeDelta(scope, this.update(key));
      },
      repair: (scope) => this.repair(scope),
      rules: () => this.rules(),
      nextSyncIn: () => this.o.nextSyncIn?.() ?? -1,
    });
    this.tracker = o.tracker ?? new ChangeTracker(o.nodeName);
    this.now = o.now ?? (() => performance.now());
  }

  /** Read-only view of the desired state, for the /desired endpoint and the traffic metrics. */
  desiredView(): DesiredView {
    return { virtualServers: this.index.virtualServers(), state: this.tracker.state(), draining: this.graceful.draining };
  }

  /** The SourceHandler that feeds the tracker; `onChange` asks the runner for a sync. */
  handler(onChange: () => void): SourceHandler {
    this.requestSync = onChange;
    return trackerHandler(this.tracker, this.o, onChange);
  }

  private context(): DesiredContext {
    return { config: this.o.config, nodeName: this.o.nodeName, zone: nodeZone(this.tracker.state().node), nodePortAddresses: this.nodePortAddresses, nodeAddresses: this.nodeAddresses };
  }

  /** The node's addresses, and those NodePorts listen on: --nodeport-addresses CIDRs, `primary`, or all. */
  private async readNodePortAddresses(link: LinkClient = this.o.clients.link): Promise<NodeAddresses> {
    const wanted = this.o.config.nodePortAddresses;
    const local = (await link.localAddresses({ exclude: [this.o.dummyName] })).map((a) => a.address);
    if (wanted.length === 0) return { nodePort: local, local };
    if (wanted[0] === 'primary') {
      const nodeIPs = this.tracker.state().node?.addresses ?? [];
      return { nodePort: local.filter((a) => nodeIPs.includes(a)), local };
    }
    return { nodePort: local.filter((a) => wanted.some((c) => inCidr(a, c))), local };
  }

  private takeAddresses(a: NodeAddresses): void {
    this.nodePortAddresses = a.nodePort;
    this.nodeAddresses = a.local;
  }

  /** One-time setup: the IPVS timeouts. */
  private async prepare(): Promise<void> {
    const t = this.o.config.ipvs;
    if (t.tcpTimeoutMs || t.tcpFinTimeoutMs || t.udpTimeoutMs) {
      const s = (ms: number) => Math.round(ms / 1000);
      const want = { tcp: s(t.tcpTimeoutMs), tcpFin: s(t.tcpFinTimeoutMs), udp: s(t.udpTimeoutMs) };
      const have = await this.o.clients.ipvs.getTimeouts();
      // 0 leaves a timeout as it is: write only when a wanted one differs.
      if ((Object.keys(want) as Array<keyof typeof want>).some((k) => want[k] !== 0 && want[k] !== have[k])) await this.o.clients.ipvs.setTimeouts(want);
    }
    this.started = true;
  }

  /**
   * Re-ensures the node-level objects (at start, on every full sync, and when a sync found the
   * dummy link missing): the sysctls (written only when they differ) and the dummy link. A
   * re-created link has no addresses: every wanted one is bound again. The owned ipsets are
   * created by the plan when missing.
   */
  private async ensureNode(scope: DesiredDelta | 'full'): Promise<void> {
    const { config } = this.o;
    const failed = (this.o.sysctl ?? applySysctls)([...ipvsSysctls({ strictARP: config.ipvs.strictARP }), ...conntrackSysctls(config.conntrack)]);
    this.nodeErrors = failed.map((f) => ({ object: `sysctl ${f.key}`, reason: `cannot set ${f.key}=${f.value}: ${f.error}` }));
    try {
      const { created } = await this.o.clients.link.ensureDummy(this.o.dummyName);
      if (created && this.observed) this.observed.addresses.clear();
      if (created && scope !== 'full') for (const a of this.index.addresses().keys()) scope.addresses.add(a);
      this.linkMissing = false;
    } catch (e) {
      this.nodeErrors.push({ object: `link ${this.o.dummyName}`, reason: e instanceof Error ? e.message : String(e) });
    }
  }

  /** Recomputes the contribution of one service port key; returns what it touched. */
  private update(key: string) {
    const state = this.tracker.state();
    const svc = state.services.get(key);
    return this.index.set(key, svc ? desiredForService(svc, state.endpoints.get(key) ?? [], this.context()) : null);
  }

  /**
   * One sync; throws when kernel operations failed (the runner retries). `full` reads the whole
   * kernel first (--once, --dry-run); otherwise the first sync adopts the kernel (adopt()).
   * `periodic` also starts a verification in the background (see verify()), which never holds
   * back the partial syncs that follow.
   */
  async sync(opts: { full?: boolean; periodic?: boolean } = {}): Promise<SyncReport> {
    const adopting = this.observed === null && !opts.full && !this.o.config.dryRun;
    if (adopting) await this.adopt();
    try {
      const report = await this.queue.run(() => this.syncNow(Boolean(opts.full) || this.observed === null));
      return adopting ? { ...report, adopted: true } : report;
    } finally {
      if (opts.periodic && !opts.full && !this.verifying && !this.o.config.dryRun) {
        this.verifying = this.verify().finally(() => (this.verifying = null));
      }
    }
  }

  /**
   * The first sync of a daemon (not of --once): adopts what the kernel holds through one
   * verification (reads in steps, each followed by the writes it shows are needed), instead of
   * reading the whole table before the first write. A kernel that already matches gets no write.
   * With the stopped daemon's handoff record, what differs from it is read first (handoff.ts).
   */
  private async adopt(): Promise<void> {
    let changed: ReadonlySet<string> = new Set();
    let first: ReadonlySet<string> | undefined;
    await this.queue.run(async () => {
      if (!this.started) await this.prepare();
      this.observed = emptyObserved();
      // Sets that exist are known to exist, and their sizes (their entries are read by the
      // verification); the plan creates the owned ones that do not.
      for (const h of await this.o.clients.ipset.listHeaders()) {
        if (h.name.startsWith(GROW_PREFIX)) await this.o.clients.ipset.destroy(h.name, { exist: true }); // a copy a dead daemon left half-built
        if (!isOwnedSetName(h.name)) continue;
        this.observed.ipsets.set(h.name, new Set());
        const capacity = capacityOf(h);
        if (capacity !== null) this.observed.ipsetCapacity.set(h.name, capacity);
      }
      this.takeAddresses(await this.readNodePortAddresses());
      changed = this.tracker.takeChanged();
      for (const key of changed) this.update(key);
      const record = this.o.stateDir ? takeHandoff(this.o.stateDir) : null;
      if (record) first = differing(record, this.index.virtualServers());
      await this.rulesFirst();
    });
    this.verifying = this.verify(false, first); // nothing else runs meanwhile: no pacing
    const r = await this.verifying.finally(() => (this.verifying = null));
    // After the writes, not before them (one conntrack process per UDP VIP), as a sync does.
    await this.queue.run(() => this.conntrack.clean(this.tracker.state(), changed));
    if (r === null) {
      this.observed = null;
      throw new Error('adopting the kernel state failed (see the verification warning); retrying');
    }
    this.whole = true;
  }

  /**
   * Before the adopting verification adds a virtual server: the owned sets the kernel lacks,
   * created and filled (a plan of nothing but them), then the iptables rules restored if they
   * differ from the last restore's (kubernetes#133773: on a new node, a virtual server that takes
   * a connection before its masquerade rule never answers it). A failure is left to the
   * verification's own iptables step, which tries again and reports it.
   */
  private async rulesFirst(): Promise<void> {
    const scope = emptyDelta();
    const result = await this.applyFor(this.planFor(scope), scope);
    mergeDelta(this.retryScope, result.retryScope);
    try {
      await this.iptables.sync(await this.rules(), false);
      this.iptables.trustRestored(); // the verification that follows reads nothing back
    } catch (e) {
      this.o.logger.warn({ err: e instanceof Error ? e.message : String(e) }, 'iptables rules not restored before the virtual servers; the verification tries again');
    }
  }

  /** Resolves when the verification in flight (if any) has finished: the last verification's report, or null. */
  async verified(): Promise<VerifyReport | null> {
    await this.verifying;
    return this.lastVerify;
  }

  private async syncNow(full: boolean): Promise<SyncReport> {
    const { config, clients, logger } = this.o;
    const t0 = this.now();
    const phases: Record<string, number> = {};
    let mark = t0;
    const phase = (name: string) => {
      const t = this.now();
      phases[name] = Math.round(t - mark);
      mark = t;
    };
    if (!this.started && !config.dryRun) await this.prepare();
    phase('prepare');
    const changed = this.tracker.takeChanged();
    let scope: DesiredDelta | 'full' = 'full';
    if (!full) scope = this.index.mergeDeltas([this.retryScope, ...[...changed].map((k) => this.update(k))]);
    if ((full || this.linkMissing) && !config.dryRun) await this.ensureNode(scope);
    if (full) {
      this.takeAddresses(await this.readNodePortAddresses());
      this.observed = await readObserved({ ipvs: clients.ipvs, ipset: clients.ipset, link: clients.link, dummyName: this.o.dummyName });
      this.whole = !config.dryRun;
      for (const key of new Set([...this.tracker.state().services.keys(), ...this.index.keys()])) this.update(key);
    }
    this.retryScope = emptyDelta();
    phase('read');
    if (scope !== 'full') this.verifier.touch(scope, this.graceful.draining.keys());
    // The plan uses the drain counts last read (countDrainingSoon): reading them first would hold
    // every change back by a dump of each draining service.
    const p = this.planFor(scope);
    phase('plan');
    if (config.dryRun) {
      (this.o.out ?? ((t) => process.stdout.write(t)))(formatPlan(p));
      return { full, durationMs: this.now() - t0, changedServices: changed.size, ops: p.counts, errors: 0, phases };
    }
    // The iptables rules once the sets they match are filled, before any address or virtual
    // server (kubernetes#133773); a failure there does not hold back the IPVS ops, and is thrown after them.
    let rulesError: unknown = null;
    let iptablesMs = 0;
    const rules = async (): Promise<void> => {
      const t = this.now();
      await this.iptables.sync(await this.rules(), full).catch((e: unknown) => void (rulesError = e ?? new Error('iptables sync failed')));
      iptablesMs = Math.round(this.now() - t);
    };
    const result = await this.applyFor(p, scope, rules);
    await this.conntrack.clean(this.tracker.state(), changed);
    phase('apply');
    phases.apply! -= iptablesMs;
    phases.iptables = iptablesMs;
    this.countDrainingSoon();
    if (rulesError !== null) throw rulesError;
    this.healthErrors = healthCheckErrors((await this.o.serviceHealth?.sync(this.index.healthChecks())) ?? []);
    phase('health');
    this.report(result);
    const durationMs = this.now() - t0;
    const report: SyncReport = { full, durationMs, changedServices: changed.size, ops: p.counts, errors: result.errors.length, ...(result.drift.length ? { drift: result.drift.length } : {}), phases };
    const at = this.o.health?.now(); // one reading of the wall clock for metrics and health
    this.recordMetrics(durationMs, full, result, at);
    logger.info(report, 'synced');
    if (result.retry && result.errors.length) throw new Error(`${result.errors.length} kernel operations failed (retrying)`);
    if (result.retry) this.requestSync(); // drift, or a service found already there: compared again by the next sync, not a failure
    this.o.health?.updated(undefined, at);
    return report;
  }

  /**
   * Counts the draining servers' connections `delayMs` from now, in the sync queue, unless a count
   * is already due (syncs in a burst share one). Each count deletes the drained servers and, while
   * some still drain, asks for the next one DRAIN_CHECK_INTERVAL_MS later.
   */
  private countDrainingSoon(delayMs = DRAIN_READ_DELAY_MS): void {
    if (this.drainTimer || this.drainCount || this.graceful.draining.size === 0 || this.closed) return;
    // Unref'd: a draining server never keeps --once's process alive; close() clears it.
    this.drainTimer = setTimeout(() => {
      this.drainTimer = null;
      this.drainCount = this.queue.run(() => this.countDraining()).finally(() => {
        this.drainCount = null;
        this.countDrainingSoon(DRAIN_CHECK_INTERVAL_MS);
      });
    }, delayMs);
    this.drainTimer.unref?.();
  }

  /**
   * refreshDraining (one dump per virtual server that drains), then, when a server drained or ran
   * out of time, the plan of those virtual servers alone (no iptables, no health-check work): the
   * drained ones are deleted now, not by the next sync (up to --ipvs-sync-period later).
   */
  private async countDraining(): Promise<void> {
    if (this.closed || !this.observed) return;
    try {
      const counted = await refreshDraining(this.o.clients.ipvs, this.observed, this.graceful);
      if (counted.drained > 0 || this.drainTimedOut()) await this.deleteDrained();
    } catch (e) {
      this.o.logger.warn({ err: e instanceof Error ? e.message : String(e) }, "counting the draining real servers' connections failed; the next count tries again");
    }
  }

  /** True when a draining server has reached --graceful-termination-timeout. */
  private drainTimedOut(): boolean {
    const now = Date.now();
    const timeout = this.o.config.gracefulTerminationTimeoutMs;
    for (const m of this.graceful.draining.values()) for (const e of m.values()) if (now - e.since >= timeout) return true;
    return false;
  }

  /** Plans and applies the virtual servers that drain (plan() always compares them), in the sync queue. */
  private async deleteDrained(): Promise<void> {
    const t0 = this.now();
    const scope = emptyDelta();
    this.verifier.touch(scope, this.graceful.draining.keys()); // newer than a verification's read in flight
    const p = this.planFor(scope);
    const result = await this.applyFor(p, scope);
    this.countKernelOps(result);
    if (result.errors.length) this.report(result);
    this.o.logger.info({ deleted: p.counts.deleteDestination, ops: p.ipvs.length, errors: result.errors.length, durationMs: Math.round(this.now() - t0) }, 'drained real servers deleted');
    if (result.retry) this.requestSync();
  }

  /** Resolves once the draining servers' count that has started (if any) is done. */
  async drainingCounted(): Promise<void> {
    await this.drainCount;
  }

  /** The plan of `scope` against the observed state, with the drain counts last read. */
  private planFor(scope: DesiredDelta | 'full'): Plan {
    const { config } = this.o;
    return plan(this.index, this.observed!, scope, this.graceful, {
      now: Date.now(),
      gracefulTimeoutMs: config.gracefulTerminationTimeoutMs,
      excludeCIDRs: config.ipvs.excludeCIDRs,
      ownedSets: OWNED_SETS,
    });
  }

  /** Applies a plan; keeps what failed for the next sync (retry scope) or the next full sync (refusals). */
  private async applyFor(p: Plan, scope: DesiredDelta | 'full', beforeVirtualServers?: () => Promise<void>): Promise<ApplyResult> {
    const result = await applyPlan(p, { ...this.o.clients, dummyName: this.o.dummyName }, this.observed!, beforeVirtualServers);
    for (const g of result.grown) this.o.logger.info(g, 'ipset grown ahead of need (a larger copy swapped in)');
    mergeDelta(this.retryScope, result.retryScope);
    if (result.linkMissing) this.linkMissing = true;
    const refused = result.refused;
    // The objects in a partial scope were compared again: their old refusals are replaced by the new ones.
    const compared = (object: string) => scope !== 'full' && scope.virtualServers.has(object.split(' ')[0]!);
    this.refused = scope === 'full' ? refused : [...this.refused.filter((r) => !compared(r.object)), ...refused];
    return result;
  }

  private report(result: ApplyResult): void {
    const transient = result.errors.filter((e) => !result.refused.includes(e));
    const owner = (vs: string) => this.index.virtualServers().get(vs)?.owner;
    this.errors.report([...this.tracker.errors(), ...this.index.errors(), ...this.nodeErrors, ...kernelErrors([...this.refused, ...transient], owner), ...this.healthErrors]);
  }

  /** The periodic verification (see Verifier); null when a read failed (logged; the next period tries again). */
  private async verify(paced = true, first?: ReadonlySet<string>): Promise<VerifyReport | null> {
    const { logger } = this.o;
    let r: VerifyReport;
    try {
      r = await this.verifier.run(paced, first);
    } catch (e) {
      const err = e instanceof Error ? e.message : String(e);
      if (this.closed) logger.debug({ err }, 'periodic verification cut short by shutdown');
      else logger.warn({ err }, 'periodic verification stopped; the next period tries again');
      return null;
    }
    this.o.metrics?.observeSync(r.durationMs, 'full', r.errors === 0);
    logger.info(r, 'verified');
    this.lastVerify = r;
    return r;
  }

  /** Plans and applies `scope` inside a verification; failures go to the next partial sync. */
  private async repair(scope: DesiredDelta): Promise<{ ops: number; errors: number; drift: number }> {
    await refreshDraining(this.o.clients.ipvs, this.observed!, this.graceful);
    const p = this.planFor(scope);
    const result = await this.applyFor(p, scope);
    this.countKernelOps(result);
    this.report(result);
    if (result.retry) this.requestSync();
    return { ops: result.counts.ipvsOps + result.counts.ipsetEntries + result.counts.addresses, errors: result.errors.length, drift: result.drift.length };
  }

  private recordMetrics(durationMs: number, full: boolean, result: ApplyResult, at?: number): void {
    const m = this.o.metrics;
    if (!m) return;
    m.observeSync(durationMs, full ? 'full' : 'partial', !result.retry, at);
    const { virtualServers, realServers } = this.index.counts();
    m.setCounts({ virtualServers, realServers });
    this.countKernelOps(result);
  }

  /** Adds what an apply (a sync's or a verification's repair) did to the kernel-op counters, and the sets' sizes. */
  private countKernelOps(result: ApplyResult): void {
    const m = this.o.metrics;
    if (!m) return;
    const o = this.observed!;
    const sizes = OWNED_SETS.flatMap(({ spec: { name } }) => {
      const have = o.ipsets.get(name);
      const maxElem = o.ipsetCapacity.get(name);
      return have && maxElem !== undefined ? [{ set: name, entries: have.size, maxElem }] : [];
    });
    m.setIpsetSizes(sizes);
    m.countKernelOps('ipvs', 'ok', result.counts.ipvsOps);
    m.countKernelOps('ipset', 'ok', result.counts.ipsetEntries);
    m.countKernelOps('address', 'ok', result.counts.addresses);
    if (result.errors.length) m.countKernelOps('any', 'error', result.errors.length);
    if (result.drift.length) m.countKernelOps('any', 'drift', result.drift.length);
  }

  /**
   * kube-proxy's IPVS-mode chains, per family (no ip6tables work on a node that never had IPv6
   * services, like kube-proxy's per-family proxiers). The rules depend on the configuration (all
   * ipvsModeRules reads of the context), the sets that have entries and the load-balancer entries
   * the node may not reach: while those stay the same, the last spec is returned as the same object
   * (the keeper hashes each spec once).
   */
  private async rules(): Promise<FamilyRules[]> {
    const drivers = await this.iptablesDrivers;
    const nonEmpty = new Set(this.index.allSets().filter((s) => this.index.ipsetEntries(s).size > 0));
    const hasIpv6 = this.index.counts().ipv6VirtualServers > 0;
    const out: FamilyRules[] = [];
    for (const [family, ipt] of Object.entries(drivers) as Array<['ipv4' | 'ipv6', Iptables | null]>) {
      if (!ipt || (family === 'ipv6' && !hasIpv6 && !this.iptables.has('ipv6'))) continue;
      const entries = (base: (typeof SET)[keyof typeof SET]) => this.index.ipsetEntries(setName(base, family)).keys();
      const noNodeAccess = lbNoNodeAccess(entries(SET.LOAD_BALANCER_FW), entries(SET.LOAD_BALANCER_SOURCE_IP));
      const inputs = `${[...nonEmpty].sort().join()} ${noNodeAccess.join()} ${this.index.redirectVersion}`;
      let last = this.lastRules.get(family);
      if (last?.inputs !== inputs) {
        const spec = ipvsModeRules(this.context(), family, nonEmpty, noNodeAccess, this.index.redirects(family));
        this.lastRules.set(family, (last = { inputs, spec }));
      }
      out.push({ family, ipt, spec: last.spec });
    }
    return out;
  }

  /** Closes the sockets; with a state directory, first leaves what is programmed for the next daemon (handoff.ts). */
  close(): void {
    if (this.o.stateDir && this.whole && this.observed && !this.closed) writeHandoff(this.o.stateDir, this.observed);
    this.closed = true;
    if (this.drainTimer) clearTimeout(this.drainTimer);
    this.drainTimer = null;
    const c = this.o.clients;
    c.ipvs.close();
    c.ipset.close();
    c.link.close();
    if (c.read && c.read.ipvs !== c.ipvs) c.read.ipvs.close();
    c.read?.ipset.close();
    c.read?.link.close();
  }
}

