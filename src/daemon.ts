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
import { IpvsProxier } from './proxy/ipvs/proxier.js';
import { BoundedFrequencyRunner } from './proxy/runner.js';
import { HealthServer, ProxyHealth } from './server/health.js';
import { MetricsServer, ProxyMetrics } from './server/metrics.js';
import { ServiceHealthServers } from './server/servicehealth.js';
import type { ProxySource } from './source/types.js';

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

/** Runs the daemon until SIGTERM/SIGINT (or one sync with --once); returns the exit code. */
export async function runDaemon(config: Config, logger: Logger): Promise<number> {
  const nodeName = nodeNameOf(config);
  if (config.mode !== 'ipvs') {
    logger.error({ mode: config.mode }, 'proxy mode iptables is not implemented yet');
    return 1;
  }
  const ipvs = await openIpvs(logger);
  if (!('client' in ipvs)) {
    logger.error({ reason: ipvs.reason, fallback: config.fallback }, 'IPVS is unavailable and the iptables fallback is not implemented yet');
    return 1;
  }
  const iptables = await Iptables.create({ family: 'ipv4' });
  const ip6tables = await Iptables.create({ family: 'ipv6', backend: iptables.backend }).catch(() => null);
  const metrics = new ProxyMetrics();
  const health = new ProxyHealth({ syncPeriodMs: config.syncPeriodMs });
  const proxier = new IpvsProxier({
    config,
    nodeName,
    logger,
    dummyName: DEFAULT_DUMMY_LINK,
    clients: { ipvs: ipvs.client, ipset: await NetlinkIpsetClient.open(), link: NetlinkLinkClient.open(), iptables: { ipv4: iptables, ipv6: ip6tables } },
    metrics,
    health,
    serviceHealth: new ServiceHealthServers({ proxyHealth: health, hostname: nodeName }),
  });
  logger.info({ nodeName, mode: 'ipvs', iptables: iptables.backend, source: config.manifests ?? 'kubernetes' }, 'starting');

  const source = await sourceFor(config, nodeName, logger);
  if (config.once || config.dryRun) {
    await source.start(proxier.handler(() => {}));
    const ok = await proxier.sync({ full: true });
    await source.stop();
    proxier.close();
    return ok ? 0 : 1;
  }

  const servers: Array<{ stop(): Promise<void> }> = [];
  if (config.healthzBindAddress) {
    const s = new HealthServer(health, config.healthzBindAddress, { onProbe: (p, c) => metrics.observeProbe(p, c) });
    await s.start();
    servers.push(s);
  }
  if (config.metricsBindAddress) {
    const s = new MetricsServer(metrics, config.metricsBindAddress, 'ipvs');
    await s.start();
    servers.push(s);
  }
  const runner = new BoundedFrequencyRunner(async () => void (await proxier.sync({})), {
    minIntervalMs: config.minSyncPeriodMs,
    maxIntervalMs: config.syncPeriodMs,
    retryIntervalMs: Math.max(config.minSyncPeriodMs, 1000),
    onError: (err) => logger.error({ err: err instanceof Error ? err.message : String(err) }, 'sync failed; will retry'),
  });
  await source.start(proxier.handler(() => runner.run()));
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
  await Promise.all(servers.map((s) => s.stop()));
  proxier.close();
  return 0;
}
