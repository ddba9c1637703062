// The daemon: pick the mode, open the kernel clients, start the source, servers and runner.

import type { Config } from './config.js';
import { spawnExec } from './kernel/exec.js';
import { NetlinkIpsetClient } from './kernel/ipset/client.js';
import { NetlinkIpvsClient, type IpvsClient } from './kernel/ipvs/client.js';
import { Iptables, type Detection, type Family } from './kernel/iptables.js';
import { detectBackendWithReason } from './kernel/iptables/backend.js';
import { DEFAULT_DUMMY_LINK, NetlinkLinkClient } from './kernel/link.js';
import type { Logger } from './log.js';
import { MemoryKeeper } from './memory.js';
import type { IpvsProxier } from './proxy/ipvs/proxier.js';
import { BoundedFrequencyRunner } from './proxy/runner.js';
import { HealthServer, ProxyHealth } from './server/health.js';
import { MetricsServer, ProxyMetrics, type ProxyMode } from './server/metrics.js';
import { serveIpvsViews } from './server/ipvs-views.js';
import { healthCheckAddresses, ServiceHealthServers } from './server/servicehealth.js';
import { nodeNameOf, startSource, type StartedSource } from './source/start.js';
import type { SourceHandler } from './source/types.js';
import { STATE_DIR } from './state-dir.js';

export { nodeNameOf } from './source/start.js';

/**
 * Opens IPVS; when the kernel has no IPVS family, tries `modprobe ip_vs` once (schedulers are
 * loaded by the kernel on demand). Returns the client or why IPVS is unavailable.
 * `familyName` is for tests (see NetlinkIpvsClient.open).
 */
export async function openIpvs(logger: Logger, familyName?: string): Promise<{ client: IpvsClient } | { reason: string }> {
  let a = await NetlinkIpvsClient.open(familyName);
  if (a.available) return { client: a.client };
  const r = await spawnExec('modprobe', ['ip_vs'], { timeoutMs: 10_000 }).catch((e: Error) => ({ code: null, signal: null, stderr: e.message }));
  if (r.code !== 0) logger.debug({ err: r.stderr.trim() || (r.code === null ? `killed by ${r.signal}` : `exit code ${r.code}`) }, 'modprobe ip_vs failed');
  a = await NetlinkIpvsClient.open(familyName);
  return a.available ? { client: a.client } : { reason: `${a.reason}; modprobe ip_vs did not help` };
}

/** Second sockets for the IPVS proxier's periodic verification reads (so they never queue its writes); falls back to `ipvs`. */
async function openReadClients(ipvs: IpvsClient): Promise<{ ipvs: IpvsClient; ipset: NetlinkIpsetClient; link: NetlinkLinkClient }> {
  const a = await NetlinkIpvsClient.open();
  return { ipvs: a.available ? a.client : ipvs, ipset: await NetlinkIpsetClient.open(), link: NetlinkLinkClient.open() };
}

/** What the daemon needs of a proxier (IpvsProxier and IptablesProxier both are one). */
interface Proxier {
  handler(onChange: () => void): SourceHandler;
  /** Both proxiers report `full`; `adopted`: this sync verified the whole kernel first (the IPVS proxier's first sync). */
  sync(opts: { full?: boolean; periodic?: boolean }): Promise<{ full: boolean; adopted?: boolean }>;
  close(): void;
}

/**
 * The mode to run in and, when IPVS is open, its client. `--proxy-mode ipvs` without IPVS (after
 * one modprobe) falls back to iptables with a warning, or, with the fallback disabled, is an
 * error (null). `--proxy-mode iptables` opens IPVS only if it is there, to remove its leftovers.
 */
async function chooseMode(config: Config, logger: Logger): Promise<{ mode: ProxyMode; ipvs: IpvsClient | null } | null> {
  if (config.mode === 'iptables') {
    const a = await NetlinkIpvsClient.open().catch(() => null);
    return { mode: 'iptables', ipvs: a?.available ? a.client : null };
  }
  const ipvs = await openIpvs(logger);
  if ('client' in ipvs) return { mode: 'ipvs', ipvs: ipvs.client };
  if (!config.fallback) {
    logger.error({ reason: ipvs.reason }, 'IPVS is unavailable and the iptables fallback is disabled (--ipvs-fallback=false): exiting');
    return null;
  }
  logger.warn(
    { reason: ipvs.reason, scheduler: config.ipvs.scheduler },
    'IPVS is unavailable: falling back to the iptables proxy mode (connections are spread at random; IPVS schedulers are not honoured)',
  );
  return { mode: 'iptables', ipvs: null };
}

/**
 * The iptables drivers (IPv4 and IPv6) on the detected backend. Unless --dry-run,
 * the preferred backend must pass a probe that programs nat and filter; otherwise the other one
 * is used, with a warning naming why. Never rejects.
 */
async function openIptables(detection: Promise<Detection>, logger: Logger): Promise<{ ipv4: Iptables; ipv6: Iptables; saved: Partial<Record<Family, string>> }> {
  const d = await detection;
  const other = d.backend === 'nft' ? 'legacy' : 'nft';
  if (d.unusable[d.backend] !== undefined) {
    logger.warn({ backend: d.backend, errors: d.unusable }, 'neither iptables backend can program the nat and filter tables here; syncs will fail');
  } else if (d.unusable[other] !== undefined) {
    logger.warn(
      { backend: d.backend, preferred: other, preferredBecause: d.reason, reason: d.unusable[other] },
      `iptables backend ${other} cannot program the nat and filter tables here: using ${d.backend}`,
    );
  }
  logger.info({ backend: d.backend, reason: d.reason }, 'iptables backend');
  return { ipv4: new Iptables(d.backend, { family: 'ipv4' }), ipv6: new Iptables(d.backend, { family: 'ipv6' }), saved: d.saved };
}

/**
 * The IPVS mode's iptables drivers, once the backend is known and the iptables mode's leftover
 * jumps are gone (the IPVS mode's first iptables sync deletes the iptables mode's chains; these
 * jumps it would keep). Never rejects: the leftover check only logs.
 */
async function ipvsModeIptables(ipts: ReturnType<typeof openIptables>, config: Config, logger: Logger): Promise<{ ipv4: Iptables; ipv6: Iptables }> {
  const { ipv4, ipv6, saved } = await ipts;
  if (!config.dryRun) {
    const { removeIptablesModeLeftovers } = await import('./proxy/iptables/leftovers.js');
    await removeIptablesModeLeftovers([ipv4, ipv6], config, logger, saved);
  }
  return { ipv4, ipv6 };
}

/**
 * Runs the daemon until SIGTERM/SIGINT (or one sync with --once); returns the exit code.
 * `early` is the source the CLI started before loading this module (else it is started here):
 * it lists while the kernel is probed and the proxier built, not after.
 */
export async function runDaemon(config: Config, logger: Logger, early?: StartedSource): Promise<number> {
  const nodeName = nodeNameOf(config);
  const started = early ?? (await startSource(config, logger, { resume: !config.dryRun }));
  // Unless --dry-run, the preferred backend must prove it can program nat and filter (a write:
  // the caller holds the node lock). Never rejects; only the first sync's iptables step waits for it.
  const detection = detectBackendWithReason({ probe: !config.dryRun });
  try {
    return await runWithSource(config, logger, nodeName, started, detection);
  } catch (e) {
    await started.source.stop();
    throw e;
  }
}

/** Where health-check node ports listen (healthCheckAddresses); undefined: every address. */
async function serviceHealthAddresses(config: Config, logger: Logger): Promise<string[] | undefined> {
  if (healthCheckAddresses([], config.nodePortAddresses, config.bindAddress) === undefined) return undefined;
  const link = NetlinkLinkClient.open();
  try {
    const local = (await link.localAddresses({ exclude: [DEFAULT_DUMMY_LINK] })).map((a) => a.address);
    return healthCheckAddresses(local, config.nodePortAddresses, config.bindAddress);
  } catch (e) {
    logger.warn({ err: e instanceof Error ? e.message : String(e) }, 'cannot read the node addresses; health-check node ports listen on every address');
    return undefined;
  } finally {
    link.close();
  }
}

async function runWithSource(config: Config, logger: Logger, nodeName: string, { source, held, synced, tracker, leave }: StartedSource, detection: Promise<Detection>): Promise<number> {
  // The backend is detected while the IPVS mode programs the kernel: only its iptables step waits.
  const ipts = openIptables(detection, logger);
  const chosen = await chooseMode(config, logger);
  if (chosen === null) {
    await ipts;
    await source.stop();
    return 1;
  }
  const { mode } = chosen;
  const metrics = new ProxyMetrics();
  metrics.setProxyMode(mode);
  const health = new ProxyHealth({ syncPeriodMs: config.syncPeriodMs });
  const serviceHealth = new ServiceHealthServers({ proxyHealth: health, hostname: nodeName, nodeAddresses: await serviceHealthAddresses(config, logger) });
  // API mode: per-Service problems also become Events on the Service (not with --once/--dry-run).
  const events = !config.events || config.manifests || config.once || config.dryRun ? null : await (await import('./source/events.js')).eventRecorderFor({ kubeconfig: config.kubeconfig, master: config.master, nodeName, logger });
  const common = { config, nodeName, logger, metrics, health, serviceHealth, tracker: await tracker, ...(events ? { events } : {}) };
  // Only the chosen mode's proxier is loaded (start-up time is mostly module loading).
  let ipvsProxier: IpvsProxier | null = null;
  const proxier: Proxier =
    chosen.ipvs !== null && mode === 'ipvs'
      ? (ipvsProxier = new (await import('./proxy/ipvs/proxier.js')).IpvsProxier({
          ...common,
          dummyName: DEFAULT_DUMMY_LINK,
          stateDir: STATE_DIR,
          nextSyncIn: () => runner.nextSyncIn(),
          clients: {
            ipvs: chosen.ipvs,
            ipset: await NetlinkIpsetClient.open(),
            link: NetlinkLinkClient.open(),
            iptables: ipvsModeIptables(ipts, config, logger),
            read: await openReadClients(chosen.ipvs),
          },
        }))
      : new (await import('./proxy/iptables/proxier.js')).IptablesProxier({
          ...common,
          dummyName: DEFAULT_DUMMY_LINK,
          clients: { ipvs: chosen.ipvs, ipset: await NetlinkIpsetClient.open().catch(() => null), link: NetlinkLinkClient.open(), iptables: await ipts },
        });
  logger.info({ nodeName, mode, source: config.manifests ?? 'kubernetes' }, 'starting');

  if (config.once || config.dryRun) {
    held.attach(proxier.handler(() => {}));
    let code = 0;
    if (!(await sourceStarted(synced, config, logger))) code = 1;
    else {
      try {
        await proxier.sync({ full: true });
      } catch (e) {
        logger.error({ err: e instanceof Error ? e.message : String(e) }, 'sync failed');
        code = 1;
      }
    }
    await source.stop();
    await serviceHealth.close(); // the sync opened the health-check node ports: open listeners would keep the process alive
    proxier.close();
    return code;
  }

  const servers: Array<{ stop(): Promise<void> }> = [];
  if (config.healthzBindAddress) {
    const s = new HealthServer(health, config.healthzBindAddress, { onProbe: (p, c) => metrics.observeProbe(p, c) });
    await s.start();
    servers.push(s);
  }
  if (config.metricsBindAddress) {
    const s = new MetricsServer(metrics, config.metricsBindAddress, mode);
    s.setConfig(config);
    await s.start();
    servers.push(s);
    const view = ipvsProxier;
    if (view) servers.push(await serveIpvsViews(s, () => view.desiredView(), config, nodeName, logger));
  }
  const memory = new MemoryKeeper({ logger, intervalMs: config.syncPeriodMs, quietFor: () => runner.quietFor() });
  const runner: BoundedFrequencyRunner = new BoundedFrequencyRunner(async ({ periodic }) => {
    const { adopted } = await proxier.sync({ periodic });
    // A periodic sync starts the verification, which reads the whole kernel table in steps:
    // memory is looked at once it is done, so its garbage is returned too.
    if (periodic && ipvsProxier) void ipvsProxier.verified().then(() => memory.afterVerification(), () => undefined);
    else memory.afterSync();
    // The first sync verified the whole kernel as it adopted it: the next verification is a period after it.
    return { verified: adopted === true };
  }, {
    minIntervalMs: config.minSyncPeriodMs,
    maxIntervalMs: config.syncPeriodMs,
    retryIntervalMs: Math.max(config.minSyncPeriodMs, 1000),
    onError: (err) => logger.error({ err: err instanceof Error ? err.message : String(err) }, 'sync failed; will retry'),
  });
  const handler = proxier.handler(() => runner.run());
  events?.uidsFrom((service) => common.tracker.uidOf(service));
  held.attach(handler);
  const started = await sourceStarted(synced, config, logger);
  if (started) {
    runner.start();
    runner.run();
    await new Promise<void>((resolve) => {
      const stop = (signal: string) => {
        logger.info({ signal }, 'stopping; kernel rules stay in place');
        resolve();
      };
      process.once('SIGTERM', () => stop('SIGTERM'));
      process.once('SIGINT', () => stop('SIGINT'));
    });
  }
  await runner.stop();
  await source.stop();
  if (started) leave(common.tracker); // the API source's resume record for the next daemon (source/resume.ts)
  events?.close();
  await Promise.all(servers.map((s) => s.stop()));
  await serviceHealth.close(); // health-check node port listeners would keep the process alive
  proxier.close();
  return started ? 0 : 1;
}

/**
 * Waits for the source's initial lists; false (logged in one line) when it could not start: an
 * unreadable manifest path, a kubeconfig naming a file that cannot be read, no API server configured.
 */
async function sourceStarted(synced: Promise<void>, config: Config, logger: Logger): Promise<boolean> {
  try {
    await synced;
    return true;
  } catch (e) {
    const source = config.manifests !== undefined ? `--manifests ${config.manifests}` : config.kubeconfig !== undefined ? `--kubeconfig ${config.kubeconfig}` : 'kubernetes';
    logger.error({ source, err: e instanceof Error ? e.message : String(e) }, 'the source cannot start; exiting');
    return false;
  }
}
