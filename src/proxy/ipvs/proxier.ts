// The IPVS proxier: tracked objects -> desired state (per changed service) -> plan -> apply.
// A partial sync costs work proportional to the services that changed. A full sync (at start)
// reads the whole kernel; every --ipvs-sync-period a verification re-reads it in small steps
// between which partial syncs run (verify.ts), and repairs any drift.
import { performance } from 'node:perf_hooks';

import type { LinkClient } from '../../kernel/link.js';
import type { ObjectError } from '../../model/service.js';
import type { DesiredView } from '../../server/desired.js';
import type { SourceHandler } from '../../source/types.js';
import { ChangeTracker } from '../changetracker.js';
import { nodeZone } from '../topology.js';
import { UdpConntrack } from '../conntrack.js';
import { ErrorReporter, healthCheckErrors, kernelErrors, trackerHandler } from '../handler.js';
import type { ApplyResult } from './apply.js';
import { desiredForService } from './desired.js';
import { GracefulState, refreshDraining } from './graceful.js';
import { DesiredIndex, emptyDelta, mergeDelta, type DesiredDelta } from './desired-index.js';
import { DrainSchedule } from './drain.js';
import { FamilyRulesBuilder } from './family-rules.js';
import { capacityOf, GROW_PREFIX } from './ipsets.js';
import { IptablesKeeper, type FamilyRules } from './iptables-keeper.js';
import { differing, takeHandoff, writeHandoff } from './handoff.js';
import { emptyObserved, isOwnedSetName, readObserved } from './observe.js';
import { formatPlan } from './plan.js';
import { KernelRecord } from './kernel-record.js';
import { ensureNodeObjects, readNodeAddresses, setIpvsTimeouts } from './node.js';
import { countKernelOps } from './sync-metrics.js';
import type { DesiredContext } from './types.js';
import { Verifier, type NodeAddresses, type VerifyReport } from './verify.js';
import { closeClients, type IptablesPair, type ProxierOptions, type SyncReport } from './proxier-options.js';
import { SerialQueue } from '../../serial.js';

export type { VerifyReport };

export { formatPlan };

export { DRAIN_CHECK_INTERVAL_MS, DRAIN_READ_DELAY_MS } from './drain.js';

/** The IPVS proxier; the daemon feeds it through handler() and calls sync() from the runner. */
export class IpvsProxier {
  readonly tracker: ChangeTracker;
  private readonly index = new DesiredIndex();
  private readonly graceful = new GracefulState();
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
  private readonly drain: DrainSchedule;
  /** The health-check ports the last sync could not open (reported with every report()). */
  private healthErrors: ObjectError[] = [];
  /** The whole kernel was read once (adopted, or a full sync): observed is worth a handoff record at close(). */
  private whole = false;
  private requestSync: () => void = () => {};
  private readonly now: () => number;
  private started = false;
  /** The node objects were ensured once (the first time also drops half-done conversions). */
  private nodeEnsured = false;
  /** Sysctls and the dummy link that could not be ensured (reported once each). */
  private nodeErrors: ObjectError[] = [];
  private readonly familyRules = new FamilyRulesBuilder(this.index);
  private readonly kernel: KernelRecord;

  private readonly errors: ErrorReporter;
  private readonly conntrack: UdpConntrack;

  constructor(private readonly o: ProxierOptions) {
    this.errors = new ErrorReporter(o.logger, o.events);
    this.conntrack = new UdpConntrack(o.conntrack);
    this.iptables = new IptablesKeeper(o.stateDir);
    this.kernel = new KernelRecord({ index: this.index, graceful: this.graceful, config: o.config, clients: o.clients, dummyName: o.dummyName, logger: o.logger });
    this.iptablesDrivers = Promise.resolve(o.clients.iptables);
    this.iptablesDrivers.catch(() => {}); // a failure surfaces in the syncs that await it, not as an unhandled rejection
    this.verifier = new Verifier({
      read: o.clients.read ?? o.clients,
      dummyName: o.dummyName,
      binding: o.config.ipvs.addressBinding,
      index: this.index,
      iptables: this.iptables,
      now: () => this.now(),
      observed: () => this.kernel.observed!,
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
    this.drain = new DrainSchedule({ draining: () => this.graceful.draining.size > 0, serial: (fn) => this.queue.run(fn), count: () => this.countDraining() });
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

  /** The node's addresses, and those NodePorts listen on. */
  private readNodePortAddresses(link: LinkClient = this.o.clients.link): Promise<NodeAddresses> {
    return readNodeAddresses(link, this.o.dummyName, this.o.config.nodePortAddresses, () => this.tracker.state().node?.addresses ?? []);
  }

  private takeAddresses(a: NodeAddresses): void {
    this.nodePortAddresses = a.nodePort;
    this.nodeAddresses = a.local;
  }

  /** One-time setup: the IPVS timeouts. */
  private async prepare(): Promise<void> {
    await setIpvsTimeouts(this.o.clients.ipvs, this.o.config.ipvs);
    this.started = true;
  }

  /**
   * Re-ensures the node-level objects (at start, on every full sync, and when a sync found the
   * dummy link missing or down): the sysctls and the dummy link. A re-created link has no
   * addresses, a link that was down no routes: every wanted one is bound again. The owned ipsets
   * are created by the plan when missing.
   */
  private async ensureNode(scope: DesiredDelta | 'full'): Promise<void> {
    const wanted = this.index.addresses();
    const first = !this.nodeEnsured;
    const { created, errors, bound } = await ensureNodeObjects({ config: this.o.config, link: this.o.clients.link, dummyName: this.o.dummyName, sysctl: this.o.sysctl, wanted, first });
    this.nodeEnsured = true;
    this.nodeErrors = errors;
    if (created === null) return;
    for (const a of bound) this.kernel.observed?.addresses.add(a);
    // Re-created, or found down by a sync (ENETDOWN: a link set down loses its routes): bind every wanted IP again.
    const rebind = created || this.kernel.linkMissing;
    if (rebind && this.kernel.observed) this.kernel.observed.addresses.clear();
    if (rebind && scope !== 'full') for (const a of this.index.addresses().keys()) scope.addresses.add(a);
    this.kernel.linkMissing = false;
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
    const adopting = this.kernel.observed === null && !opts.full && !this.o.config.dryRun;
    if (adopting) await this.adopt();
    try {
      const report = await this.queue.run(() => this.syncNow(Boolean(opts.full) || this.kernel.observed === null));
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
      const observed = (this.kernel.observed = emptyObserved());
      // Sets that exist are known to exist, and their sizes (their entries are read by the
      // verification); the plan creates the owned ones that do not.
      for (const h of await this.o.clients.ipset.listHeaders()) {
        if (h.name.startsWith(GROW_PREFIX)) await this.o.clients.ipset.destroy(h.name, { exist: true }); // a copy a dead daemon left half-built
        if (!isOwnedSetName(h.name)) continue;
        observed.ipsets.set(h.name, new Set());
        const capacity = capacityOf(h);
        if (capacity !== null) observed.ipsetCapacity.set(h.name, capacity);
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
      this.kernel.observed = null;
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
    await this.kernel.apply(this.kernel.planFor(scope), scope); // its failures: in the retry scope
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
    if (!full) scope = this.index.mergeDeltas([this.kernel.retryScope, ...[...changed].map((k) => this.update(k))]);
    if ((full || this.kernel.linkMissing) && !config.dryRun) await this.ensureNode(scope);
    if (full) {
      this.takeAddresses(await this.readNodePortAddresses());
      this.kernel.observed = await readObserved({ ipvs: clients.ipvs, ipset: clients.ipset, link: clients.link, dummyName: this.o.dummyName, binding: config.ipvs.addressBinding });
      this.whole = !config.dryRun;
      for (const key of new Set([...this.tracker.state().services.keys(), ...this.index.keys()])) this.update(key);
    }
    this.kernel.retryScope = emptyDelta();
    phase('read');
    if (scope !== 'full') this.verifier.touch(scope, this.graceful.draining.keys());
    // The plan uses the drain counts last read (drain.ts): reading them first would hold
    // every change back by a dump of each draining service.
    const p = this.kernel.planFor(scope);
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
    const result = await this.kernel.apply(p, scope, rules);
    await this.conntrack.clean(this.tracker.state(), changed);
    phase('apply');
    phases.apply! -= iptablesMs;
    phases.iptables = iptablesMs;
    this.drain.soon();
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
   * refreshDraining (one dump per virtual server that drains), then, when a server drained or ran
   * out of time, the plan of those virtual servers alone (no iptables, no health-check work): the
   * drained ones are deleted now, not by the next sync (up to --ipvs-sync-period later).
   */
  private async countDraining(): Promise<void> {
    if (this.closed || !this.kernel.observed) return;
    try {
      const counted = await refreshDraining(this.o.clients.ipvs, this.kernel.observed, this.graceful);
      if (counted.drained > 0 || this.graceful.timedOut(this.o.config.gracefulTerminationTimeoutMs)) await this.deleteDrained();
    } catch (e) {
      this.o.logger.warn({ err: e instanceof Error ? e.message : String(e) }, "counting the draining real servers' connections failed; the next count tries again");
    }
  }

  /** Plans and applies the virtual servers that drain (plan() always compares them), in the sync queue. */
  private async deleteDrained(): Promise<void> {
    const t0 = this.now();
    const scope = emptyDelta();
    this.verifier.touch(scope, this.graceful.draining.keys()); // newer than a verification's read in flight
    const p = this.kernel.planFor(scope);
    const result = await this.kernel.apply(p, scope);
    this.countKernelOps(result);
    if (result.errors.length) this.report(result);
    this.o.logger.info({ deleted: p.counts.deleteDestination, ops: p.ipvs.length, errors: result.errors.length, durationMs: Math.round(this.now() - t0) }, 'drained real servers deleted');
    if (result.retry) this.requestSync();
  }

  /** Resolves once the draining servers' count that has started (if any) is done. */
  async drainingCounted(): Promise<void> {
    await this.drain.counted();
  }

  private report(result: ApplyResult): void {
    const transient = result.errors.filter((e) => !result.refused.includes(e));
    const owner = (vs: string) => this.index.virtualServers().get(vs)?.owner;
    this.errors.report([...this.tracker.errors(), ...this.index.errors(), ...this.nodeErrors, ...kernelErrors([...this.kernel.refused, ...transient], owner), ...this.healthErrors]);
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
    await refreshDraining(this.o.clients.ipvs, this.kernel.observed!, this.graceful);
    const p = this.kernel.planFor(scope);
    const result = await this.kernel.apply(p, scope);
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

  /** Adds what an apply did to the kernel-op counters (sync-metrics.ts). */
  private countKernelOps(result: ApplyResult): void {
    if (this.o.metrics) countKernelOps(this.o.metrics, this.kernel.observed!, result);
  }

  /** The iptables rules of each family (family-rules.ts). */
  private async rules(): Promise<FamilyRules[]> {
    return this.familyRules.build(await this.iptablesDrivers, () => this.context(), (family) => this.iptables.has(family));
  }

  /** Closes the sockets; with a state directory, first leaves what is programmed for the next daemon (handoff.ts). */
  close(): void {
    if (this.o.stateDir && this.whole && this.kernel.observed && !this.closed) writeHandoff(this.o.stateDir, this.kernel.observed);
    this.closed = true;
    this.drain.stop();
    closeClients(this.o.clients);
  }
}

