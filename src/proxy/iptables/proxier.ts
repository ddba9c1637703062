// The iptables proxier (the fallback when the kernel has no IPVS): the same tracker, topology,
// runner, health and metrics as the IPVS proxier; the kernel backend is netfilter, programmed
// as kube-proxy's iptables mode does. A partial sync is one iptables-restore that rewrites the
// fixed chains and only the changed services' chains; a full sync (at start, after a failure and
// every sync period) goes through the driver: one iptables-save, then one iptables-restore that
// makes the owned chains exactly the desired ones, jumps ensured, rewriting only the chains that
// do not read back as written (none when nothing changed, so no restore at all; nor a save while
// the tables' token shows them as the last full sync left them).
import { existsSync, readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

import type { Config } from '../../config.js';
import type { IpsetClient } from '../../kernel/ipset/types.js';
import type { IpvsClient } from '../../kernel/ipvs/client.js';
import { defaultIsOwned, planRestore, type Iptables, type TableSpec } from '../../kernel/iptables.js';
import { DEFAULT_DUMMY_LINK, type LinkClient } from '../../kernel/link.js';
import type { Logger } from '../../log.js';
import { familyOf, type Family } from '../../model/ip.js';
import type { ServicePortInfo } from '../../model/service.js';
import type { ProxyHealth } from '../../server/health.js';
import type { ProxyMetrics } from '../../server/metrics.js';
import type { ServiceHealthServers, ServiceHealthTarget } from '../../server/servicehealth.js';
import type { EventSink } from '../../source/events.js';
import type { SourceHandler } from '../../source/types.js';
import { ChangeTracker } from '../changetracker.js';
import { nodeZone } from '../topology.js';
import { ErrorReporter, EVENT_REASON, healthCheckErrors, trackerHandler } from '../handler.js';
import { formatCidr, parseCidr } from '../ipvs/desired-net.js';
import { nodePortAddresses, nodePortsOnAll } from '../ipvs/node.js';
import { masqueradeMark } from '../ipvs/rules.js';
import { applySysctls, conntrackSysctls } from '../ipvs/sysctl.js';
import { UdpConntrack, type ConntrackRunner } from '../conntrack.js';
import { cleanIdleFamily, syncFamilyFull, syncFamilyPartial, type FamilyState, type FamilySyncReport } from './family.js';
import { removeIpvsLeftovers } from './leftovers.js';
import { iptablesModeSpecs, LARGE_CLUSTER_ENDPOINTS, serviceRules, type RulesContext, type ServiceRules } from './rules.js';

export type { FamilySyncReport };

/** The kernel clients the iptables proxier works with. */
export interface IptablesProxierClients {
  iptables: { ipv4: Iptables; ipv6: Iptables | null };
  /** The node's local addresses (NodePorts with --nodeport-addresses) and the IPVS dummy link. */
  link: LinkClient;
  /** When IPVS is available: the IPVS mode's virtual servers are removed once. */
  ipvs?: IpvsClient | null;
  /** When ipset is available: the IPVS mode's sets are destroyed once. */
  ipset?: IpsetClient | null;
}

/** What the iptables proxier is built from. */
export interface IptablesProxierOptions {
  config: Config;
  nodeName: string;
  logger: Logger;
  clients: IptablesProxierClients;
  metrics?: ProxyMetrics;
  health?: ProxyHealth;
  serviceHealth?: ServiceHealthServers;
  /** Where per-Service problems are also recorded as Events (API mode). */
  events?: EventSink;
  /** The change tracker the source already fed (DeferredHandler.feed); a new one by default. */
  tracker?: ChangeTracker;
  /** The IPVS mode's dummy link, removed with its other leftovers; default kube-ipvs0. */
  dummyName?: string;
  /** Where --dry-run prints the restore input. */
  out?: (text: string) => void;
  now?: () => number;
  /** Writes sysctls (default: /proc/sys); returns the ones that failed. Tests pass a recorder. */
  sysctl?: typeof applySysctls;
  /** Runs `conntrack ARGS` (default: the binary; its failures are ignored). */
  conntrack?: ConntrackRunner;
  /** Reads nf_conntrack_tcp_be_liberal (default: /proc/sys); null when unreadable. */
  tcpBeLiberal?: () => boolean | null;
}

function readTcpBeLiberal(): boolean | null {
  try {
    return readFileSync('/proc/sys/net/netfilter/nf_conntrack_tcp_be_liberal', 'utf8').trim() !== '0';
  } catch {
    return null;
  }
}

/** What one sync did. */
export interface IptablesSyncReport {
  full: boolean;
  durationMs: number;
  changedServices: number;
  families: Partial<Record<Family, FamilySyncReport>>;
  errors: number;
  /** Milliseconds spent per phase (prepare, rules, ipv4, ipv6, leftovers, health). */
  phases: Record<string, number>;
}

const FAMILIES: readonly Family[] = ['ipv4', 'ipv6'];

/** kube-proxy's `ns/name` of a service port. */
const serviceOf = (svc: ServicePortInfo): string => `${svc.name.namespace}/${svc.name.name}`;

/** The iptables proxier; the daemon feeds it through handler() and calls sync() from the runner. */
export class IptablesProxier {
  readonly tracker: ChangeTracker;
  private readonly families = new Map<Family, FamilyState>();
  private readonly now: () => number;
  private lastFullAt = -Infinity;
  private needFull = true;
  private started = false;
  private leftoversDone = false;
  private dropInvalid = true;
  private nodePortAddresses: string[] = [];
  private nodeIPs: string[] = [];
  /** Services (`ns/name`) already told that their scheduler annotation cannot be honoured. */
  private readonly schedulerWarned = new Set<string>();
  private readonly conntrack: UdpConntrack;

  private readonly errors: ErrorReporter;

  constructor(private readonly o: IptablesProxierOptions) {
    this.errors = new ErrorReporter(o.logger, o.events);
    this.tracker = o.tracker ?? new ChangeTracker(o.nodeName);
    this.now = o.now ?? (() => performance.now());
    this.conntrack = new UdpConntrack(o.conntrack);
    for (const family of FAMILIES) {
      const ipt = o.clients.iptables[family];
      if (ipt) this.families.set(family, { family, ipt, rules: new Map(), written: new Map(), dirty: new Set(), synced: false, largeCluster: false });
    }
  }

  /** The SourceHandler that feeds the tracker; `onChange` asks the runner for a sync. */
  handler(onChange: () => void): SourceHandler {
    return trackerHandler(this.tracker, this.o, onChange);
  }

  /** One-time node setup: forwarding, kube-proxy's conntrack settings, and whether conntrack is liberal (then INVALID is not dropped). */
  private prepare(): void {
    const settings = [{ key: 'net/ipv4/ip_forward', value: '1', reason: 'route service traffic to endpoints' }, ...conntrackSysctls(this.o.config.conntrack)];
    if (existsSync('/proc/sys/net/bridge/bridge-nf-call-iptables')) {
      settings.push({ key: 'net/bridge/bridge-nf-call-iptables', value: '1', reason: 'bridged pod traffic must traverse iptables' });
    }
    for (const f of (this.o.sysctl ?? applySysctls)(settings)) this.o.logger.warn({ sysctl: f.key, err: f.error }, 'cannot set sysctl');
    this.dropInvalid = (this.o.tcpBeLiberal ?? readTcpBeLiberal)() !== true;
    if (!this.dropInvalid) this.o.logger.info('nf_conntrack_tcp_be_liberal set, not installing DROP rules for INVALID packets');
    this.started = true;
  }

  /** Addresses NodePorts answer on when --nodeport-addresses is given, and the node's own IPs. */
  private async readAddresses(): Promise<void> {
    const { config } = this.o;
    const local = (await this.o.clients.link.localAddresses({ exclude: [this.o.dummyName ?? DEFAULT_DUMMY_LINK] })).map((a) => a.address);
    const nodeObject = this.tracker.state().node?.addresses.filter((a) => familyOf(a) !== null) ?? [];
    this.nodePortAddresses = nodePortAddresses(local, config.nodePortAddresses, () => nodeObject);
    const primary = [...(config.bindAddress !== undefined ? [config.bindAddress] : []), ...nodeObject];
    this.nodeIPs = primary.length > 0 ? primary : local;
  }

  private context(fs: FamilyState): RulesContext {
    const { config, nodeName } = this.o;
    const f = fs.family;
    const cidr = config.clusterCIDRs.map(parseCidr).find((c) => c !== null && c.family === f);
    return {
      family: f,
      nodeName,
      zone: nodeZone(this.tracker.state().node),
      masqueradeAll: config.masqueradeAll,
      masqueradeMark: masqueradeMark(config.masqueradeBit),
      clusterCIDR: cidr ? formatCidr(cidr) : null,
      // null: every local address (kube-proxy's per family: no CIDR of this family given).
      nodePortAddresses: nodePortsOnAll(config.nodePortAddresses, f) ? null : this.nodePortAddresses.filter((a) => familyOf(a) === f),
      nodeIPs: this.nodeIPs.filter((a) => familyOf(a) === f),
      largeCluster: fs.largeCluster,
      dropInvalid: this.dropInvalid,
    };
  }

  /** Recomputes one port key's rules in one family; marks it dirty. */
  private update(fs: FamilyState, key: string, ctx: RulesContext): void {
    const state = this.tracker.state();
    const svc = state.services.get(key);
    const rules = svc ? serviceRules(svc, state.endpoints.get(key) ?? [], ctx) : null;
    if (rules) fs.rules.set(key, rules);
    else fs.rules.delete(key);
    fs.dirty.add(key);
  }

  /** Says once per Service that its scheduler annotation means nothing here. */
  private warnScheduler(svc: ServicePortInfo): void {
    const id = serviceOf(svc);
    if (svc.scheduler === null) return void this.schedulerWarned.delete(id);
    if (this.schedulerWarned.has(id)) return;
    this.schedulerWarned.add(id);
    this.o.logger.warn({ service: id, scheduler: svc.scheduler }, 'iptables mode cannot honour the scheduler annotation: connections are spread at random');
    const note = `scheduler "${svc.scheduler}" is not honoured in the iptables proxy mode (IPVS is unavailable on node ${this.o.nodeName}): connections are spread at random`;
    this.o.events?.record({ service: id, type: 'Warning', reason: EVENT_REASON.schedulerIgnored, action: 'Programming', note });
  }

  /** Rules of one family in key order (the order of the shared chains' rules). */
  private ordered(fs: FamilyState): ServiceRules[] {
    return [...fs.rules.keys()].sort().map((k) => fs.rules.get(k)!);
  }

  /** One sync; throws when a restore failed (the runner retries; the next sync is full). */
  async sync(opts: { full?: boolean } = {}): Promise<IptablesSyncReport> {
    const { config, logger } = this.o;
    const t0 = this.now();
    const phases: Record<string, number> = {};
    let mark = t0;
    const phase = (name: string) => {
      const t = this.now();
      phases[name] = Math.round(t - mark);
      mark = t;
    };
    const full = Boolean(opts.full) || this.needFull || t0 - this.lastFullAt >= config.syncPeriodMs;
    if (!this.started && !config.dryRun) this.prepare();
    if (full) await this.readAddresses();
    phase('prepare');

    const state = this.tracker.state();
    const changed = this.tracker.takeChanged();
    for (const key of changed) {
      const svc = state.services.get(key);
      if (svc) this.warnScheduler(svc);
    }
    const hasIpv6 = [...state.services.values()].some((s) => s.clusterIPs.some((ip) => familyOf(ip) === 'ipv6'));
    // Like kube-proxy's per-family proxiers: no ip6tables work on a node without IPv6 services
    // (once written, the IPv6 rules are kept in sync, so they go when those services go).
    const idle = (fs: FamilyState): boolean => fs.family === 'ipv6' && !hasIpv6 && !fs.synced;
    const fullFamilies = new Set<Family>();
    for (const fs of this.families.values()) {
      if (idle(fs)) continue;
      let endpoints = 0;
      for (const [key, eps] of state.endpoints) if (state.services.has(key)) for (const ep of eps) if (ep.family === fs.family) endpoints++;
      const large = endpoints > LARGE_CLUSTER_ENDPOINTS;
      const familyFull = full || !fs.synced || large !== fs.largeCluster;
      fs.largeCluster = large;
      const ctx = this.context(fs);
      if (familyFull) {
        fullFamilies.add(fs.family);
        for (const key of new Set([...state.services.keys(), ...fs.rules.keys()])) this.update(fs, key, ctx);
      } else {
        for (const key of changed) this.update(fs, key, ctx);
      }
    }
    phase('rules');

    if (config.dryRun) {
      const text = [...this.families.values()].filter((fs) => !idle(fs)).map((fs) => `# ${fs.family}\n${this.specs(fs).map((s) => planRestore(s, undefined, { isOwned: defaultIsOwned }).text).join('')}`);
      (this.o.out ?? ((t) => process.stdout.write(t)))(text.join(''));
      return { full, durationMs: this.now() - t0, changedServices: changed.size, families: {}, errors: 0, phases };
    }

    const families: IptablesSyncReport['families'] = {};
    try {
      for (const fs of this.families.values()) {
        if (idle(fs)) {
          if (!this.leftoversDone) await cleanIdleFamily(fs, this.o.logger);
          continue;
        }
        families[fs.family] = fullFamilies.has(fs.family) ? await syncFamilyFull(fs, this.specs(fs), !this.leftoversDone, this.o.logger) : await syncFamilyPartial(fs, this.context(fs), this.ordered(fs));
        phase(fs.family);
      }
    } catch (e) {
      this.needFull = true;
      this.o.metrics?.iptablesRestoreFailed();
      this.o.metrics?.countKernelOps('iptables', 'error');
      this.o.metrics?.observeSync(this.now() - t0, full ? 'full' : 'partial', false);
      throw e;
    }
    this.needFull = false;
    if (full) this.lastFullAt = t0;
    this.o.metrics?.countKernelOps('iptables', 'ok', Object.keys(families).length);
    await this.conntrack.clean(state, changed);
    if (!this.leftoversDone) await this.removeLeftovers();
    phase('leftovers');

    const healthErrors = (await this.o.serviceHealth?.sync(this.healthChecks())) ?? [];
    phase('health');
    this.errors.report([...this.tracker.errors(), ...healthCheckErrors(healthErrors)]);
    this.o.metrics?.setNoLocalEndpoints(this.noLocalEndpoints());
    const durationMs = Math.round((this.now() - t0) * 10) / 10;
    const report: IptablesSyncReport = { full, durationMs, changedServices: changed.size, families, errors: 0, phases };
    const at = this.o.health?.now(); // one reading of the wall clock for metrics and health
    this.o.metrics?.observeSync(durationMs, full ? 'full' : 'partial', true, at);
    logger.info(report, 'synced');
    this.o.health?.updated(undefined, at);
    return report;
  }

  private specs(fs: FamilyState): TableSpec[] {
    return iptablesModeSpecs(this.context(fs), this.ordered(fs));
  }

  /** Once, after the first successful sync: the IPVS mode's virtual servers, ipsets (and the mangle chains that match them) and dummy link. */
  private async removeLeftovers(): Promise<void> {
    const c = this.o.clients;
    const steps = await removeIpvsLeftovers({
      link: c.link,
      ipvs: c.ipvs,
      ipset: c.ipset,
      iptables: [...this.families.values()].map((f) => f.ipt),
      dummyName: this.o.dummyName ?? DEFAULT_DUMMY_LINK,
      excludeCIDRs: this.o.config.ipvs.excludeCIDRs,
    });
    for (const s of steps) {
      if (s.error !== undefined) this.o.logger.warn({ step: s.step, err: s.error }, 'cannot remove an IPVS-mode leftover');
      else this.o.logger.info({ step: s.step, result: s.result }, 'removed IPVS-mode leftovers');
    }
    this.leftoversDone = true;
  }

  /** Health-check node ports of eTP Local services: port -> service and local ready endpoints (first claimant wins). */
  private healthChecks(): Map<number, ServiceHealthTarget> {
    const out = new Map<number, ServiceHealthTarget>();
    const state = this.tracker.state();
    for (const [key, svc] of state.services) {
      if (!svc.externalPolicyLocal || svc.healthCheckNodePort === null || out.has(svc.healthCheckNodePort)) continue;
      const local = new Set((state.endpoints.get(key) ?? []).filter((ep) => ep.isLocal && ep.ready).map((ep) => ep.address));
      out.set(svc.healthCheckNodePort, { service: serviceOf(svc), localEndpoints: local.size });
    }
    return out;
  }

  private noLocalEndpoints(): { internal: number; external: number } {
    const out = { internal: 0, external: 0 };
    const fs = this.families.get('ipv4') ?? this.families.get('ipv6');
    for (const r of fs?.rules.values() ?? []) {
      if (r.noLocalEndpoints.internal) out.internal++;
      if (r.noLocalEndpoints.external) out.external++;
    }
    return out;
  }

  close(): void {
    const c = this.o.clients;
    c.link.close();
    c.ipvs?.close();
    c.ipset?.close();
  }
}
