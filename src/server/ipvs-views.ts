// Wires the IPVS proxier's read-only views into the metrics server: /desired, and the opt-in
// per-Service traffic metrics (their own IPVS socket: one socket has one owner).
import type { Config } from '../config.js';
import { NetlinkIpvsClient } from '../kernel/ipvs/client.js';
import type { Logger } from '../log.js';
import { desiredStateDoc, type DesiredView } from './desired.js';
import type { MetricsServer } from './metrics.js';
import { ServiceTrafficMetrics } from './service-stats.js';

/** Serves /desired on `server` and, with --metrics-service-stats, the kube_ipvs_proxy_service_* metrics; stop() releases them. */
export async function serveIpvsViews(
  server: MetricsServer,
  view: () => DesiredView,
  config: Config,
  nodeName: string,
  logger: Logger,
): Promise<{ stop(): Promise<void> }> {
  server.setDesired(() => desiredStateDoc(view(), nodeName, config.ipvs.scheduler));
  if (!config.serviceStats.enabled) return { stop: async () => server.setDesired(null) };
  const a = await NetlinkIpvsClient.open();
  if (!a.available) {
    logger.warn({ reason: a.reason }, 'cannot open IPVS for --metrics-service-stats; no service traffic metrics');
    return { stop: async () => server.setDesired(null) };
  }
  const client = a.client;
  new ServiceTrafficMetrics(server.metrics.registry, {
    dump: () => client.dumpAll({ stats: true }),
    ownerOf: (id) => view().virtualServers.get(id)?.owner,
    maxServices: config.serviceStats.maxServices,
    periodMs: config.serviceStats.periodMs,
    onError: (err) => logger.warn({ err: err.message }, 'IPVS dump for service traffic metrics failed'),
  });
  return {
    stop: async () => {
      server.setDesired(null);
      client.close();
    },
  };
}
