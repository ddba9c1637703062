// The daemon: pick the mode, open the kernel clients, start the source, servers and runner.
import { execFile } from 'node:child_process';
import { hostname } from 'node:os';
import { promisify } from 'node:util';

import type { Config } from './config.js';
import { NetlinkIpsetClient } from './kernel/ipset/client.js';
import { NetlinkIpvsClient, type IpvsClient } from './kernel/ipvs/client.js';
import { Iptables } from './kernel/iptables.js';
import { DEFAULT_DUMMY_LINK, NetlinkLinkClient } from './kernel/link.js';
import type { Logger } from './log.js';
import { removeIptablesModeLeftovers } from './proxy/iptables/leftovers.js';
import { IptablesProxier } from './proxy/iptables/proxier.js';
import { IpvsProxier } from './proxy/ipvs/proxier.js';
import { BoundedFrequencyRunner } from './proxy/runner.js';
import { HealthServer, ProxyHealth } from './server/health.js';
import { MetricsServer, ProxyMetrics, type ProxyMode } from './server/metrics.js';
import { serveIpvsViews } from './server/ipvs-views.js';
import { ServiceHealthServers } from './server/servicehealth.js';
import type { ProxySource, SourceHandler } from './source/types.js';

/** The node name: --hostname-override, else the host name, lower-cased as kube-proxy does. */
export function nodeNameOf(config: Config): string {
  return (config.hostnameOverride ?? hostname()).trim().toLowerCase();
}

/**
 * Opens IPVS; when the kernel has no IPVS family, tries `modprobe ip_vs` once (schedulers are
 * loaded by the kernel on demand). Returns the client or why IPVS is unavailable.
 */
export async function openIpvs(logger: Logger): Promise<{ client: IpvsClient } | { reason: string }> {
  let a = await NetlinkIpvsClient.open();
  if (a.available) return { client: a.client };
  try {
    await promisify(execFile)('modprobe', ['ip_vs'], { timeout: 10_000 });
  } catch (e) {
    logger.debug({ err: (e as Error).message }, 'modprobe ip_vs failed');
  }
  a = await NetlinkIpvsClient.open();
  return a.available ? { client: a.client } : { reason: `${a.reason}; modprobe ip_vs did not help` };
}

/** The source of objects; loaded on demand (the Kubernetes client is a large module graph). */
async function sourceFor(config: Config, nodeName: string, logger: Logger): Promise<ProxySource> {
  if (config.manifests) {
    const { ManifestSource } = await import('./source/manifests.js');
    return new ManifestSource({ path: config.manifests, nodeName, logger });
  }
  const { KubernetesSource } = await import('./source/kubernetes.js');
  return new KubernetesSource({
    nodeName,
    logger,
    ...(config.kubeconfig ? { kubeconfig: config.kubeconfig } : {}),
    ...(config.master ? { master: config.master } : {}),
  });
}

/** What the daemon needs of a proxier (IpvsProxier and IptablesProxier both are one). */
interface Proxier {
  handler(onChange: () => void): SourceHandler;
  sync(opts: { full?: boolean }): Promise<unknown>;
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

/** Runs the daemon until SIGTERM/SIGINT (or one sync with --once); returns the exit code. */
export async function runDaemon(config: Config, logger: Logger): Promise<number> {
  const nodeName = nodeNameOf(config);
  const chosen = await chooseMode(config, logger);
  if (chosen === null) return 1;
  const { mode } = chosen;
  const iptables = await Iptables.create({ family: 'ipv4' });
  const ip6tables = await Iptables.create({ family: 'ipv6', backend: iptables.backend }).catch(() => null);
  const metrics = new ProxyMetrics();
  metrics.setProxyMode(mode);
  const health = new ProxyHealth({ syncPeriodMs: config.syncPeriodMs });
  const serviceHealth = new ServiceHealthServers({ proxyHealth: health, hostname: nodeName });
  // API mode: per-Service problems also become Events on the Service (not with --once/--dry-run).
  const events = !config.events || config.manifests || config.once || config.dryRun ? null : await (await import('./source/events.js')).eventRecorderFor({ kubeconfig: config.kubeconfig, master: config.master, nodeName, logger });
  const common = { config, nodeName, logger, metrics, health, serviceHealth, ...(events ? { events } : {}) };
  const proxier: Proxier =
    chosen.ipvs !== null && mode === 'ipvs'
      ? new IpvsProxier({
          ...common,
          dummyName: DEFAULT_DUMMY_LINK,
          clients: { ipvs: chosen.ipvs, ipset: await NetlinkIpsetClient.open(), link: NetlinkLinkClient.open(), iptables: { ipv4: iptables, ipv6: ip6tables } },
        })
      : new IptablesProxier({
          ...common,
          dummyName: DEFAULT_DUMMY_LINK,
          clients: { ipvs: chosen.ipvs, ipset: await NetlinkIpsetClient.open().catch(() => null), link: NetlinkLinkClient.open(), iptables: { ipv4: iptables, ipv6: ip6tables } },
        });
  logger.info({ nodeName, mode, iptables: iptables.backend, source: config.manifests ?? 'kubernetes' }, 'starting');
  // The IPVS mode's first sync deletes the iptables mode's chains; these jumps it would keep.
  if (mode === 'ipvs' && !config.dryRun) await removeIptablesModeLeftovers([iptables, ip6tables], config, logger);

  const source = await sourceFor(config, nodeName, logger);
  if (config.once || config.dryRun) {
    await source.start(proxier.handler(() => {}));
    let code = 0;
    try {
      await proxier.sync({ full: true });
    } catch (e) {
      logger.error({ err: e instanceof Error ? e.message : String(e) }, 'sync failed');
      code = 1;
    }
    await source.stop();
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
    if (proxier instanceof IpvsProxier) servers.push(await serveIpvsViews(s, () => proxier.desiredView(), config, nodeName, logger));
  }
  const runner = new BoundedFrequencyRunner(async () => void (await proxier.sync({})), {
    minIntervalMs: config.minSyncPeriodMs,
    maxIntervalMs: config.syncPeriodMs,
    retryIntervalMs: Math.max(config.minSyncPeriodMs, 1000),
    onError: (err) => logger.error({ err: err instanceof Error ? err.message : String(err) }, 'sync failed; will retry'),
  });
  const handler = proxier.handler(() => runner.run());
  await source.start(events ? events.trackServices(handler) : handler);
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
  await runner.stop();
  await source.stop();
  events?.close();
  await Promise.all(servers.map((s) => s.stop()));
  await serviceHealth.close(); // health-check node port listeners would keep the process alive
  proxier.close();
  return 0;
}
